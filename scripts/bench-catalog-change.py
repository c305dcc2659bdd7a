"""Time from a downstream MCP server's `list_changed` adding a tool to
toolrouter finding that tool, and from its removal to the tool being gone,
on a running `toolrouter serve` whose config has the test fixture server
(tests/python/downstream_fixture.py) as `fixture`, and `server.client_rate
= 0` (the polling would be rate limited).

    python3 scripts/bench-catalog-change.py http://127.0.0.1:8080 [runs] [pause]

Each run adds a tool with a description no other tool shares (through
`POST /v1/tools/call` of `fixture__add_tool`, which sends `list_changed`
before it answers), then searches `/v1/tools/search` every 20 ms until the
tool comes first; then removes it and searches until it is gone. The time
counts from the call being sent, so it includes the call, toolrouter's
re-list of the server and the index's carry-over. Between changes it waits
`pause` seconds (default 40), for the full index that each change starts
building in the background to be done: a change is timed on a quiet
server. Standard library only.
"""

import json
import os
import signal
import statistics
import sys
import time
import urllib.error
import urllib.request

WORDS = ["zorblax", "quintar", "vellumic", "drossen", "harkwing", "plimsoll", "tarnvex", "orrery", "gloaming", "sextant"]


def post(url, path, body):
    request = urllib.request.Request(url + path, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def search(url, query):
    try:
        return [hit["name"] for hit in post(url, "/v1/tools/search", {"query": query, "k": 5})["data"]]
    except urllib.error.HTTPError as e:
        if e.code == 429:
            raise SystemExit("rate limited: run the server with server.client_rate = 0") from e
        raise


def until(check, limit=30.0):
    started = time.monotonic()
    while time.monotonic() - started < limit:
        if check():
            return
        time.sleep(0.02)
    raise SystemExit("not within 30 s")


def spec_added_at_reload(url, pid, spec_dir, i):
    """Seconds from a spec written and SIGHUP to its operation found first."""
    word = WORDS[i % len(WORDS)]
    tool, operation = f"harbour{i}_{int(time.time())}", f"{word}_tide_tables_{i}"
    description = f"{word.capitalize()} tide tables of {tool}: high and low water for a harbour"
    spec = {
        "openapi": "3.0.3",
        "info": {"title": tool, "version": "1"},
        "servers": [{"url": "https://tides.example.com"}],
        "paths": {"/tides": {"get": {"operationId": operation, "summary": description}}},
    }
    started = time.monotonic()
    with open(os.path.join(spec_dir, f"{tool}.json"), "w") as f:
        json.dump(spec, f)
    os.kill(pid, signal.SIGHUP)
    until(lambda: search(url, description)[:1] == [f"{operation}_for_{tool}"])
    return time.monotonic() - started


def main():
    args = sys.argv[1:]
    reload = None
    if "--reload" in args:
        at = args.index("--reload")
        reload, args = (int(args[at + 1]), args[at + 2]), args[:at] + args[at + 3 :]
    url, runs = args[0].rstrip("/"), int(args[1]) if len(args) > 1 else 10
    pause = float(args[2]) if len(args) > 2 else 40.0
    if reload:
        times = []
        for i in range(runs):
            times.append(spec_added_at_reload(url, *reload, i))
            time.sleep(pause)
        report([("a spec added, SIGHUP, until found first", times)])
        return
    added, removed = [], []
    for i in range(runs):
        name = f"bench_{i}_{int(time.time())}"
        words = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(4))
        description = f"Turns {words} readings into a {WORDS[i % len(WORDS)]} ledger"
        started = time.monotonic()
        post(url, "/v1/tools/call", {"name": "fixture__add_tool", "arguments": {"name": name, "description": description}})
        until(lambda: search(url, description)[:1] == [f"fixture__{name}"])
        added.append(time.monotonic() - started)
        time.sleep(pause)
        started = time.monotonic()
        post(url, "/v1/tools/call", {"name": "fixture__remove_tool", "arguments": {"name": name}})
        until(lambda: f"fixture__{name}" not in search(url, description))
        removed.append(time.monotonic() - started)
        time.sleep(pause)
    report([("added, until found first", added), ("removed, until gone", removed)])


def report(rows):
    for what, times in rows:
        ms = sorted(t * 1000 for t in times)
        runs = ", ".join(f"{t:.0f}" for t in ms)
        print(f"{what}: {len(ms)} runs, median {statistics.median(ms):.0f} ms, max {ms[-1]:.0f} ms ({runs})")


main()
