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


def main():
    url, runs = sys.argv[1].rstrip("/"), int(sys.argv[2]) if len(sys.argv) > 2 else 10
    pause = float(sys.argv[3]) if len(sys.argv) > 3 else 40.0
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
    for what, times in [("added, until found first", added), ("removed, until gone", removed)]:
        ms = sorted(t * 1000 for t in times)
        print(f"{what}: {len(ms)} runs, median {statistics.median(ms):.0f} ms, max {ms[-1]:.0f} ms")


main()
