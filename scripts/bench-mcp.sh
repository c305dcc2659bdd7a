#!/usr/bin/env bash
# Latency of an MCP tools/call through toolrouter against calling the
# replay upstream directly, side by side in one run:
#
#   scripts/bench-mcp.sh [CALLS]        (default 500)
#
# Starts `toolrouter replay` and `toolrouter serve` (upstream live, sent to
# the replay server; rate limits off, so that they never wait) on loopback,
# then times, interleaved, a GET to the replay server (httpx, keep-alive)
# and the same call as MCP `call_api` over streamable HTTP (mcp 2.x SDK).
# Needs the release build, scripts/python-env.sh and the ToolBench data.
set -euo pipefail
cd "$(dirname "$0")/.."
calls="${1:-500}"
data="${TOOLBENCH_DIR:-../shared/datasets/toolbench}"
bin="${TOOLROUTER:-target/release/toolrouter}"
py="${TOOLROUTER_PYENVS:-$HOME/.cache/toolrouter}/py-mcp2/bin/python"
state="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$state"' EXIT

export TOOLROUTER_STATE_DIR="$state" TOOLROUTER_LOG_LEVEL=warn TOOLROUTER_RETRIEVAL_MODE=lexical
export TOOLROUTER_CATALOG_PATHS="$data/tools"
"$bin" replay --cache "$data/cache/derived_from_trajectories" --listen 127.0.0.1:18765 >/dev/null &
TOOLROUTER_UPSTREAM_BASE_URL=http://127.0.0.1:18765 TOOLROUTER_UPSTREAM_ALLOWED_HOSTS=127.0.0.1:18765 \
TOOLROUTER_UPSTREAM_ALLOW_PRIVATE=true TOOLROUTER_UPSTREAM_GLOBAL_RATE=0 TOOLROUTER_UPSTREAM_HOST_RATE=0 \
TOOLROUTER_UPSTREAM_API_RATE=0 TOOLROUTER_UPSTREAM_CLIENT_RATE=0 TOOLROUTER_SERVER_CLIENT_RATE=0 \
  "$bin" serve --listen 127.0.0.1:18766 >/dev/null &
for _ in $(seq 1 100); do
  if curl -sf 127.0.0.1:18766/readyz >/dev/null && curl -s 127.0.0.1:18765/ >/dev/null; then break; fi
  sleep 0.2
done
"$py" - "$calls" <<'PY'
import asyncio, statistics, sys, time
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

N = int(sys.argv[1])
ARGS = {"is_from": "2022-09-01", "lon": 123.456, "lat": 789.012}
DIRECT = "http://127.0.0.1:18765/ucSNOW?from=2022-09-01&lon=123.456&lat=789.012"

def pct(xs, p):
    xs = sorted(xs)
    return xs[round((len(xs) - 1) * p)]

async def main():
    direct, mcp = [], []
    async with httpx2.AsyncClient() as http, streamable_http_client("http://127.0.0.1:18766/mcp") as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            for i in range(N + 50):
                t = time.perf_counter()
                r = await http.get(DIRECT, headers={"X-RapidAPI-Host": "ecoweather.p.rapidapi.com"})
                a = time.perf_counter() - t
                assert r.status_code == 200 and "snow" in r.text
                t = time.perf_counter()
                res = await session.call_tool("call_api", {"name": "schneetage_for_ecoweather", "arguments": ARGS})
                b = time.perf_counter() - t
                assert not res.is_error and "snow" in res.content[0].text, res
                if i >= 50:  # warm-up
                    direct.append(a * 1e3); mcp.append(b * 1e3)
    for name, xs in (("replay server directly (GET)", direct), ("MCP tools/call via toolrouter", mcp)):
        print(f"{name:32} p50 {pct(xs, .5):6.2f} ms  p99 {pct(xs, .99):6.2f} ms")
    print(f"{'added by toolrouter':32} p50 {pct(mcp, .5) - pct(direct, .5):6.2f} ms  p99 {pct(mcp, .99) - pct(direct, .99):6.2f} ms")

asyncio.run(main())
PY
