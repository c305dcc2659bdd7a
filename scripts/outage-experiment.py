#!/usr/bin/env python3
"""APIs down, end to end: how often execute mode still gets a successful
call, with and without backtracking (docs/benchmarks.md, "Planning around
APIs that are down").

    python3 scripts/outage-experiment.py [--down 0.3] [--queries 100] [--toolrouter PATH]

Real parts over loopback HTTP: `toolrouter replay --down SHARE` serves
ToolBench's recorded responses and answers 503 for a share of the
catalog's APIs (chosen by a hash of their names, the same in every run);
`toolrouter serve` in execute mode calls it as its RapidAPI upstream; the
scripted model (tests/python/scripted_model.py, model `scripted-overlap`)
makes the decisions: the offered API sharing the most words with the
request, `finish` after a successful call. Requests: the development
queries whose relevant APIs all have recordings, in file order.

Three runs, each with a fresh state directory: nothing down; the outage
with the default search (a failed call is dropped and another API tried,
backtracking, restarts); the same outage with `planner.greedy = true`.
A request is served when every sub-task it was split into made a
successful call.
"""

import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = pathlib.Path(os.environ.get("TOOLBENCH_DIR") or ROOT.parent / "shared" / "datasets" / "toolbench")
SETS = ["G1_instruction", "G1_category", "G2_instruction"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, limit=300):
    started = time.time()
    while time.time() - started < limit:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.2)
    sys.exit(f"{url} did not answer in {limit} s")


def recorded():
    """(tool name, API name) of every API the replay table has recordings of."""
    out = set()
    with open(DATA / "cache/derived_from_trajectories/index.jsonl") as f:
        for line in f:
            r = json.loads(line)
            out.add((r["tool_name"], r["api_name"]))
    return out


def recorded_catalog(directory):
    """The catalog's tools cut to their recorded APIs, as ToolBench tool
    files under `directory`: every API offered can answer, so a failed
    call is the outage's, not a gap of the replay table."""
    keep = recorded()
    tools = [(p.parent.name, p.name, json.load(open(p))) for p in sorted((DATA / "tools").glob("*/*.json"))]
    with open(DATA / "tools_dropped_compact.jsonl") as f:
        tools += [(r["category"], r["tool_file"], r["tool"]) for r in map(json.loads, f)]
    written = 0
    for category, name, tool in tools:
        apis = [a for a in tool.get("api_list") or [] if (tool.get("tool_name"), a.get("name")) in keep and a.get("url")]
        if apis:
            (directory / category).mkdir(parents=True, exist_ok=True)
            json.dump({**tool, "api_list": apis}, open(directory / category / name, "w"))
            written += len(apis)
    return written


def queries(limit):
    """Development queries whose relevant APIs all have recordings."""
    recorded_apis = recorded()
    out = []
    for name in SETS:
        for q in json.load(open(DATA / "queries/stabletoolbench_solvable" / f"{name}.json")):
            relevant = [tuple(p[:2]) for p in q.get("relevant APIs", [])]
            if relevant and all(p in recorded_apis for p in relevant):
                out.append(q["query"])
    return out[:limit]


def post(url, body):
    request = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        return {"error": e.read().decode(errors="replace")[:300]}


def run(toolrouter, python, catalog, requests, down, greedy, half_life=None):
    """Serves, sends every request, returns (served, calls, failed calls, errors). With `half_life`
    (`planner.failure_half_life_s`), hybrid retrieval: the memory needs the embedding model."""
    mode = "lexical" if half_life is None else "hybrid"
    env = {**os.environ, "TOOLROUTER_CATALOG_PATHS": json.dumps([str(catalog)]),
           "TOOLROUTER_CATALOG_INCLUDE_EMBEDDED": "false", "TOOLROUTER_RETRIEVAL_MODE": mode, "RUST_LOG": "warn"}
    if half_life is not None:
        env["TOOLROUTER_PLANNER_FAILURE_HALF_LIFE_S"] = str(half_life)
    procs = []
    try:
        replay_port, serve_port = free_port(), free_port()
        procs.append(subprocess.Popen([toolrouter, "replay", "--cache", str(DATA / "cache/derived_from_trajectories"),
                                       "--listen", f"127.0.0.1:{replay_port}", "--down", str(down)],
                                      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        model = subprocess.Popen([python, str(ROOT / "tests/python/scripted_model.py")], stdout=subprocess.PIPE, text=True)
        procs.append(model)
        model_url = model.stdout.readline().split()[-1]
        state = tempfile.mkdtemp(prefix="outage-")
        serve_env = {**env, "TOOLROUTER_STATE_DIR": state, "TOOLROUTER_SERVER_LISTEN": f"127.0.0.1:{serve_port}",
                     "TOOLROUTER_LLM_BASE_URL": f"{model_url}/v1",
                     "TOOLROUTER_UPSTREAM_BASE_URL": f"http://127.0.0.1:{replay_port}",
                     "TOOLROUTER_UPSTREAM_ALLOWED_HOSTS": f"127.0.0.1:{replay_port}",
                     "TOOLROUTER_UPSTREAM_ALLOW_PRIVATE": "true", "TOOLROUTER_SERVER_CLIENT_RATE": "0",
                     "TOOLROUTER_PLANNER_GREEDY": "true" if greedy else "false",
                     # Not what this measures: execute mode would stop before ToolBench's POST
                     # endpoints (destructive since #54) to ask for consent.
                     "TOOLROUTER_ACCESS_CONSENT": "off"}
        procs.append(subprocess.Popen([toolrouter, "serve"], env=serve_env, stdout=subprocess.DEVNULL,
                                      stderr=open(os.path.join(state, "serve.log"), "w")))
        wait_http(f"http://127.0.0.1:{replay_port}/")
        base = f"http://127.0.0.1:{serve_port}"
        started = time.time()
        while time.time() - started < 300:
            try:
                if urllib.request.urlopen(f"{base}/readyz", timeout=2).status == 200:
                    break
            except OSError:
                time.sleep(0.5)
        served = calls = failed = errors = 0
        for text in requests:
            answer = post(f"{base}/v1/chat/completions", {"model": "scripted-overlap", "toolrouter": {"mode": "execute"},
                                                          "messages": [{"role": "user", "content": text}]})
            trace = (answer.get("toolrouter") or {}).get("trace")
            if not trace:
                errors += 1
                continue
            subtasks = trace.get("subtasks") or []
            made = [c for s in subtasks for c in s.get("calls") or []]
            calls += len(made)
            failed += sum(1 for c in made if not c.get("ok"))
            served += bool(subtasks) and all(any(c.get("ok") for c in s.get("calls") or []) for s in subtasks)
        return served, calls, failed, errors
    finally:
        for p in procs:
            p.terminate()
            p.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--down", type=float, default=0.3)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--toolrouter", default=str(ROOT / "target/release/toolrouter"))
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--json", action="store_true", help="print one JSON object per run instead of a table")
    parser.add_argument("--failure-memory", action="store_true",
                        help="instead: the outage with the search and the embedding model, failed calls held against "
                             "their API for similar requests (planner.failure_half_life_s 3600) and not (0)")
    args = parser.parse_args()
    requests = queries(args.queries)
    catalog = pathlib.Path(tempfile.mkdtemp(prefix="outage-catalog-"))
    apis = recorded_catalog(catalog)
    if not args.json:
        print(f"{len(requests)} requests (development queries whose relevant APIs all have recordings), "
              f"a catalog of the {apis} APIs with recordings\n")
        print("| run | served | calls | failed calls | errors |")
        print("| --- | ---: | ---: | ---: | ---: |")
    runs = [("nothing down, backtracking", 0.0, False, None), ("nothing down, greedy", 0.0, True, None),
            (f"{args.down:.0%} down, backtracking", args.down, False, None),
            (f"{args.down:.0%} down, greedy", args.down, True, None)]
    if args.failure_memory:
        runs = [(f"{args.down:.0%} down, hybrid, failures held (half-life 3600 s)", args.down, False, 3600),
                (f"{args.down:.0%} down, hybrid, failures not held (0)", args.down, False, 0)]
    for label, down, greedy, half_life in runs:
        served, calls, failed, errors = run(args.toolrouter, args.python, catalog, requests, down, greedy, half_life)
        if args.json:
            print(json.dumps({"down": down, "greedy": greedy, "failure_half_life_s": half_life, "requests": len(requests),
                              "served": served, "calls": calls, "failed_calls": failed, "errors": errors}), flush=True)
            continue
        print(f"| {label} | {served}/{len(requests)} ({served / len(requests):.3f}) | {calls} | {failed} | {errors} |", flush=True)


if __name__ == "__main__":
    main()
