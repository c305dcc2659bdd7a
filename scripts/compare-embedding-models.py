#!/usr/bin/env python3
"""Embedding models side by side, as toolrouter runs them (L2-normalized,
128 tokens, 2 intra-op threads, no spinning, the CPU arena off): resident
memory after loading and after a query, the time to embed a 96-token
query, the cosine of each model's vectors to the first model's, and dense
Recall@10 of the development queries (per set) over the APIs of their
`api_list`s. The last lines (cosine of each model's vectors to the first's) mean
something only for variants of one model (a model and its quantized copy).

Each MODEL_DIR holds `model.onnx` and `tokenizer.json`, and is read as
toolrouter reads `embedding.model_dir`: `1_Pooling/config.json` says CLS
pooling (mean without it), `config_sentence_transformers.json` the prompt
put before a query (none without it).

With `--rerank CE_DIR` (a cross-encoder: `model.onnx` with one logit,
`tokenizer.json`), each model's dense top 20 is also reranked by it:
Recall@10 of the cross-encoder's order, of both orders fused by reciprocal
rank, and the time to score 20 pairs.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install onnxruntime==1.31.1 numpy tokenizers
    /tmp/v/bin/python scripts/compare-embedding-models.py TOOLBENCH_DIR MODEL_DIR... [--rerank CE_DIR]

Each model is measured in a process of its own, so their memory does not mix.
"""

import json
import os
import subprocess
import sys
import time

SETS = ["G1_instruction", "G1_category", "G2_instruction"]
RERANK_DEPTH = 20


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return 0


def session(path):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.enable_cpu_mem_arena = False
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def read_card(model_dir):
    """(CLS pooling?, query prompt), as toolrouter's ModelCard reads them."""
    cls, prompt = False, ""
    pooling = os.path.join(model_dir, "1_Pooling", "config.json")
    if os.path.exists(pooling):
        cls = bool(json.load(open(pooling)).get("pooling_mode_cls_token"))
    st = os.path.join(model_dir, "config_sentence_transformers.json")
    if os.path.exists(st):
        prompt = json.load(open(st)).get("prompts", {}).get("query", "")
    return cls, prompt


def corpus(toolbench):
    sets, docs = {}, {}
    folder = os.path.join(toolbench, "queries/stabletoolbench_solvable")
    for name in SETS:
        records = json.load(open(os.path.join(folder, name + ".json")))
        sets[name] = [(q["query"], {tuple(r) for r in q["relevant APIs"]}) for q in records]
        for q in records:
            for a in q["api_list"]:
                params = a["required_parameters"] + a["optional_parameters"]
                docs[(a["tool_name"], a["api_name"])] = (
                    f"{a['api_name']}: {a.get('api_description') or ''}. Tool {a['tool_name']}. "
                    f"Category {a['category_name']}. Parameters: " + ", ".join(p["name"] for p in params)
                )
    return sets, docs


def measure(toolbench, model_dir, out, rerank_dir):
    import numpy as np
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.enable_truncation(128)
    tok.enable_padding()
    cls, prompt = read_card(model_dir)
    base = rss_mb()
    model = session(os.path.join(model_dir, "model.onnx"))
    loaded = rss_mb() - base
    inputs = {i.name for i in model.get_inputs()}

    def embed(texts, query=False):
        vectors = []
        for i in range(0, len(texts), 64):
            enc = tok.encode_batch([prompt + t if query else t for t in texts[i : i + 64]])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = model.run(None, feed)[0]
            v = hidden[:, 0] if cls else (hidden * mask[:, :, None]).sum(1) / mask.sum(1)[:, None]
            vectors.append(v / np.linalg.norm(v, axis=1, keepdims=True))
        return np.vstack(vectors)

    sets, docs = corpus(toolbench)
    keys = list(docs)
    query_text = " ".join(["weather forecast for Berlin tomorrow and the exchange rate"] * 9)
    for _ in range(5):
        embed([query_text], True)
    times = []
    for _ in range(60):
        t = time.perf_counter()
        embed([query_text], True)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    after_query = rss_mb() - base
    d = embed([docs[k] for k in keys])
    recall = lambda ranked, rel: len(rel & {keys[j] for j in ranked[:10]}) / len(rel)
    report = {
        "model": model_dir,
        "cls_pooling": cls,
        "query_prompt": prompt,
        "rss_after_load_mb": loaded,
        "rss_after_query_mb": after_query,
        "query_p50_ms": round(times[30], 1),
        "query_p95_ms": round(times[57], 1),
        "apis": len(keys),
        "dense_recall_at_10": {},
    }
    cross = rerank_dir and Reranker(rerank_dir)
    if cross:
        report["reranked_recall_at_10"], report["fused_recall_at_10"], pair_ms = {}, {}, []
    for name, queries in sets.items():
        scores = embed([q for q, _ in queries], True) @ d.T
        dense, reranked, fused = [], [], []
        for i, (text, rel) in enumerate(queries):
            top = list(np.argsort(-scores[i])[:RERANK_DEPTH])
            dense.append(recall(top, rel))
            if cross:
                t = time.perf_counter()
                logits = cross.score(text, [docs[keys[j]] for j in top])
                pair_ms.append((time.perf_counter() - t) * 1000)
                order = [top[j] for j in np.argsort(-logits)]
                rrf = {j: 1 / (5 + r) for r, j in enumerate(top)}
                for r, j in enumerate(order):
                    rrf[j] += 1 / (5 + r)
                reranked.append(recall(order, rel))
                fused.append(recall(sorted(rrf, key=lambda j: -rrf[j]), rel))
        report["dense_recall_at_10"][name] = round(float(np.mean(dense)), 3)
        if cross:
            report["reranked_recall_at_10"][name] = round(float(np.mean(reranked)), 3)
            report["fused_recall_at_10"][name] = round(float(np.mean(fused)), 3)
    if cross:
        pair_ms.sort()
        report[f"rerank_{RERANK_DEPTH}_pairs_p50_ms"] = round(pair_ms[len(pair_ms) // 2], 1)
    np.save(out, d)
    print(json.dumps(report))


class Reranker:
    """A cross-encoder: one logit per (query, document) pair."""

    def __init__(self, model_dir):
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        self.tok.enable_truncation(256)
        self.tok.enable_padding()
        self.model = session(os.path.join(model_dir, "model.onnx"))

    def score(self, query, documents):
        import numpy as np

        enc = self.tok.encode_batch([(query, d) for d in documents])
        feed = {
            "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
        }
        return self.model.run(None, feed)[0][:, 0]


def main():
    args = sys.argv[1:]
    if args and args[0] == "--one":
        measure(args[1], args[2], args[3], args[4] or None)
        return
    rerank = ""
    if "--rerank" in args:
        at = args.index("--rerank")
        rerank = args[at + 1]
        del args[at : at + 2]
    toolbench, *models = args
    import numpy as np

    vectors = []
    for n, model in enumerate(models):
        out = f"/tmp/compare-embedding-{os.getpid()}-{n}.npy"
        subprocess.run([sys.executable, __file__, "--one", toolbench, model, out, rerank], check=True)
        vectors.append(np.load(out))
        os.remove(out)
    for model, v in zip(models[1:], vectors[1:]):
        if v.shape != vectors[0].shape:
            continue
        cos = (vectors[0] * v).sum(1)
        print(json.dumps({"model": model, "cosine_to_first": {"mean": round(float(cos.mean()), 4), "min": round(float(cos.min()), 4)}}))


if __name__ == "__main__":
    main()
