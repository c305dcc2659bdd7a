#!/usr/bin/env python3
"""Measures the two other candidates of #51 beside the fine-tuned model.

1. A linear adapter on the frozen base embedding: requests' vectors
   mapped by a 384 x 384 matrix (identity at start), trained on the same
   pairs as scripts/train-retriever.py with the same in-batch loss; tools'
   vectors unchanged (so no index would need rebuilding). Reported as
   ToolLens test Recall@10, the check training.json reports for the base
   and the trained model, and Recall@10 of ToolBench's development
   requests (never trained on) over their APIs and 3,000 others, in the
   same run; on the base model and on the trained one.
2. A reranker over the top 30: its cost is one encoder pass over 30
   (request, tool) pairs; timed here with the shipped int8 model on
   onnxruntime, as a cross-encoder of the same size would run.

Runs in the training environment (scripts/train-retriever.py's header):

    python scripts/try-adapter.py --toolbench ../shared/datasets/toolbench \
        --toollens ../shared/datasets/toollens --bfcl $BFCL --documents /tmp/documents.jsonl \
        --base $BASE --trained models/tool-minilm/float --onnx models/tool-minilm/model.onnx
"""

import argparse
import importlib.util
import json
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("train", os.path.join(here, "train-retriever.py"))
train = importlib.util.module_from_spec(spec)
spec.loader.exec_module(train)


@torch.no_grad()
def embed_all(encoder, texts, max_length):
    encoder.model.eval()
    return torch.cat([encoder.embed(texts[i:i + 128], max_length) for i in range(0, len(texts), 128)])


def train_adapter(queries, positives, positives_text, others, epochs, scale, seed):
    """W (identity at start) on the request side, in-batch softmax."""
    torch.manual_seed(seed)
    dims = queries.shape[1]
    w = torch.nn.Parameter(torch.eye(dims))
    optimizer = torch.optim.AdamW([w], lr=1e-3, weight_decay=0.0)
    n = len(queries)
    for epoch in range(epochs):
        order = torch.randperm(n)
        for b in range(0, n, 64):
            idx = order[b:b + 64]
            q = F.normalize(queries[idx] @ w, dim=-1)
            d = positives[idx]
            scores = scale * q @ d.T
            mask = torch.zeros_like(scores, dtype=torch.bool)
            for i, a in enumerate(idx.tolist()):
                for j, c in enumerate(idx.tolist()):
                    if i != j and positives_text[c] in others[a]:
                        mask[i, j] = True
            loss = F.cross_entropy(scores.masked_fill(mask, -1e4), torch.arange(len(idx)))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        print(f"adapter epoch {epoch + 1} loss {loss.item():.3f}", file=sys.stderr, flush=True)
    return w.detach()


@torch.no_grad()
def recall(queries, docs, test, index):
    total = 0.0
    top = (queries @ docs.T).topk(10, dim=1).indices.tolist()
    for (_, positives), hits in zip(test, top):
        wanted = {index[p] for p in positives}
        total += len(wanted & set(hits)) / len(wanted)
    return total / len(test)


def rerank_cost(onnx_path, base, texts, runs):
    import numpy as np
    import onnxruntime as ort
    from transformers import AutoTokenizer
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    tokenizer = AutoTokenizer.from_pretrained(base)
    pairs = tokenizer(texts[:30], texts[30:60], padding="max_length", truncation=True, max_length=128,
                      return_tensors="np")
    feed = {k: v.astype(np.int64) for k, v in pairs.items() if k in {i.name for i in session.get_inputs()}}
    session.run(None, feed)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        session.run(None, feed)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.99) - 1]


def toolbench_check(toolbench, by_pair, others, seed):
    """ToolBench's development requests, their APIs' texts among `others` sampled ones."""
    qdir = os.path.join(toolbench, "queries", "stabletoolbench_solvable")
    requests = []
    for name in ["G1_instruction.json", "G1_category.json", "G2_instruction.json"]:
        for q in json.load(open(os.path.join(qdir, name))):
            docs = [by_pair.get((train.std(t), train.std(a))) for t, a in q["relevant APIs"]]
            docs = [d["dense"] for d in docs if d]
            if docs:
                requests.append((q["query"], docs))
    corpus = {d for _, docs in requests for d in docs}
    pool = sorted({d["dense"] for d in by_pair.values()} - corpus)
    corpus = sorted(corpus | set(random.Random(seed).sample(pool, others)))
    return requests, corpus


def measure(encoder, examples, sets, epochs, seed):
    """Recall@10 of `sets` (name: (requests, corpus)) with the encoder alone and with an adapter."""
    started = time.time()
    queries = embed_all(encoder, [e["query"] for e in examples], 96)
    positives_text = [e["positive"] for e in examples]
    positives = embed_all(encoder, positives_text, 64)
    embedded = time.time() - started
    others = [set(e["others"]) for e in examples]
    w = train_adapter(queries, positives, positives_text, others, epochs, 20.0, seed)
    out = {}
    for name, (requests, corpus) in sets.items():
        index = {t: i for i, t in enumerate(corpus)}
        docs = embed_all(encoder, corpus, 128)
        q = embed_all(encoder, [r for r, _ in requests], 128)
        out[name] = (recall(q, docs, requests, index), recall(F.normalize(q @ w, dim=-1), docs, requests, index))
    return out, embedded


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name in ["toolbench", "toollens", "bfcl", "documents", "base", "trained", "onnx"]:
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seed", type=int, default=51)
    args = p.parse_args()
    torch.set_num_threads(2)
    rng = random.Random(args.seed)
    by_pair, _, by_tool = train.load_documents(args.documents)
    toollens, test = train.toollens_pairs(args.toollens, by_pair, by_tool, 8, rng)
    examples = (toollens + train.gpt35_pairs(args.toolbench, train.dev_query_ids(args.toolbench))
                + train.bfcl_pairs(args.bfcl, rng))
    corpus = sorted({d["dense"] for _, docs in test for d in docs}
                    | {e["positive"] for e in toollens if e["positive"].find(" Tool ") >= 0})
    check = random.Random(7).sample(test, min(1000, len(test)))
    test_docs = [(q, [d["dense"] for d in docs]) for q, docs in check]
    sets = {"ToolLens test": (test_docs, corpus), "ToolBench development": toolbench_check(args.toolbench, by_pair,
                                                                                            3000, args.seed)}
    for label, path in [("base", args.base), ("fine-tuned", args.trained)]:
        out, embedded = measure(train.Encoder(path), examples, sets, args.epochs, args.seed)
        for name, (alone, adapted) in out.items():
            print(f"{name} Recall@10 ({len(sets[name][0])} requests, {len(sets[name][1])} APIs): {label} {alone:.3f},"
                  f" {label} + linear adapter {adapted:.3f}", flush=True)
        print(f"{label}: embedding {len(examples)} pairs for the adapter {embedded:.0f} s", flush=True)
    p50, p99 = rerank_cost(args.onnx, args.base, [q for q, _ in test_docs[:30]] + corpus[:30], 200)
    print(f"a reranker's pass over 30 pairs of 128 tokens (int8, 2 threads): p50 {p50:.1f} ms, p99 {p99:.1f} ms")


if __name__ == "__main__":
    main()
