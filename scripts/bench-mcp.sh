#!/usr/bin/env bash
# Latency of an MCP tools/call through toolrouter against calling the
# replay upstream directly, side by side in one run:
#
#   scripts/bench-mcp.sh [CALLS] [--stateless]     (default 2000 calls;
#   --stateless: MCP 2026-07-28 without a session, else a 2025-11-25 session)
#
# Starts `toolrouter replay` and `toolrouter serve` (upstream live, sent to
# the replay server; rate limits off, so that they never wait) on loopback,
# then times, interleaved, a GET to the replay server (keep-alive) and the
# same call as MCP `call_api` over streamable HTTP, both from one client
# (`toolrouter bench mcp --url`: reqwest and rmcp).
# Needs the release build and the ToolBench data.
set -euo pipefail
cd "$(dirname "$0")/.."
calls="${1:-2000}"
data="${TOOLBENCH_DIR:-../shared/datasets/toolbench}"
bin="${TOOLROUTER:-target/release/toolrouter}"
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
"$bin" bench mcp --url http://127.0.0.1:18766/mcp --calls "$calls" \
  --direct 'http://127.0.0.1:18765/ucSNOW?from=2022-09-01&lon=123.456&lat=789.012' \
  --direct-header 'X-RapidAPI-Host: ecoweather.p.rapidapi.com' \
  --tool call_api --arguments '{"name": "schneetage_for_ecoweather",
    "arguments": {"is_from": "2022-09-01", "lon": 123.456, "lat": 789.012}}' "${@:2}"
