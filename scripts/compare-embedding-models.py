#!/usr/bin/env python3
"""Two ONNX embedding models side by side, as toolrouter runs them (mean
pooling, L2-normalized, 128 tokens, 2 intra-op threads, no spinning, the
CPU arena off): resident memory after loading and after a query, the
time to embed a 96-token query, the cosine of each model's vectors to the
first model's, and dense Recall@10 of the development queries over the
APIs of their `api_list`s.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install onnxruntime==1.31.1 numpy tokenizers
    /tmp/v/bin/python scripts/compare-embedding-models.py TOOLBENCH_DIR TOKENIZER_JSON MODEL.onnx...

Each model is measured in a process of its own, so their memory does not mix.
"""

import json
import os
import subprocess
import sys
import time


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return 0


def measure(toolbench, tokenizer_path, model_path, out):
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer_path)
    tok.enable_truncation(128)
    tok.enable_padding()
    base = rss_mb()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.enable_cpu_mem_arena = False
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    loaded = rss_mb() - base
    inputs = {i.name for i in session.get_inputs()}

    def embed(texts):
        vectors = []
        for i in range(0, len(texts), 64):
            enc = tok.encode_batch(texts[i : i + 64])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = session.run(None, feed)[0]
            v = (hidden * mask[:, :, None]).sum(1) / mask.sum(1)[:, None]
            vectors.append(v / np.linalg.norm(v, axis=1, keepdims=True))
        return np.vstack(vectors)

    queries, docs, relevant = [], {}, []
    folder = os.path.join(toolbench, "queries/stabletoolbench_solvable")
    for name in ["G1_instruction", "G1_category", "G2_instruction"]:
        for q in json.load(open(os.path.join(folder, name + ".json"))):
            queries.append(q["query"])
            for a in q["api_list"]:
                params = a["required_parameters"] + a["optional_parameters"]
                docs[(a["tool_name"], a["api_name"])] = (
                    f"{a['api_name']}: {a.get('api_description', '')}. Tool {a['tool_name']}. "
                    f"Category {a['category_name']}. Parameters: " + ", ".join(p["name"] for p in params)
                )
            relevant.append({tuple(r) for r in q["relevant APIs"]})
    keys = list(docs)
    query_text = " ".join(["weather forecast for Berlin tomorrow and the exchange rate"] * 9)
    for _ in range(5):
        embed([query_text])
    times = []
    for _ in range(60):
        t = time.perf_counter()
        embed([query_text])
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    after_query = rss_mb() - base
    q, d = embed(queries), embed([docs[k] for k in keys])
    scores = q @ d.T
    recall = []
    for i, rel in enumerate(relevant):
        top = {keys[j] for j in np.argsort(-scores[i])[:10]}
        recall.append(len(rel & top) / len(rel))
    np.save(out, d)
    print(
        json.dumps(
            {
                "model": model_path,
                "rss_after_load_mb": loaded,
                "rss_after_query_mb": after_query,
                "query_p50_ms": round(times[30], 1),
                "query_p95_ms": round(times[57], 1),
                "apis": len(keys),
                "dense_recall_at_10": round(float(np.mean(recall)), 3),
            }
        )
    )


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        measure(*sys.argv[2:6])
        return
    toolbench, tokenizer, *models = sys.argv[1:]
    import numpy as np

    vectors = []
    for n, model in enumerate(models):
        out = f"/tmp/compare-embedding-{os.getpid()}-{n}.npy"
        subprocess.run([sys.executable, __file__, "--one", toolbench, tokenizer, model, out], check=True)
        vectors.append(np.load(out))
        os.remove(out)
    for model, v in zip(models[1:], vectors[1:]):
        cos = (vectors[0] * v).sum(1)
        print(json.dumps({"model": model, "cosine_to_first": {"mean": round(float(cos.mean()), 4), "min": round(float(cos.min()), 4)}}))


if __name__ == "__main__":
    main()
