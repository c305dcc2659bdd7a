#!/usr/bin/env bash
# The cost of an OAuth token against an API key on the cheapest protected
# route, side by side in one run:
#
#   scripts/bench-oauth.sh [SECONDS]      (default 8 s per run, two rounds)
#
# Starts the test authorization server (tests/python/oauth_server.py, in
# the mcp 1.x environment of scripts/python-env.sh) and `toolrouter serve`
# (embedded catalog, rate limits off) with `[server.oauth]` on it, mints an
# RS256 token, then loads `GET /v1/models` with `oha` (16 connections),
# alternating the key and the token. Needs the release build and `oha`.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-8}"
bin="${TOOLROUTER:-target/release/toolrouter}"
python="${TOOLROUTER_PYENVS:-$HOME/.cache/toolrouter}/py-mcp1/bin/python"
state="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$state"' EXIT

"$python" tests/python/oauth_server.py >"$state/issuer" &
for _ in $(seq 1 50); do [ -s "$state/issuer" ] && break; sleep 0.2; done
issuer="$(awk '{print $NF}' "$state/issuer")"
port=18932
cat >"$state/toolrouter.toml" <<TOML
[server]
api_key_hashes = ["$("$bin" key hash bench-key)"]
client_rate = 0
[server.oauth]
issuer = "$issuer"
resource = "http://127.0.0.1:$port/mcp"
TOML
TOOLROUTER_STATE_DIR="$state/state" TOOLROUTER_LOG_LEVEL=warn TOOLROUTER_RETRIEVAL_MODE=lexical \
  "$bin" serve --listen "127.0.0.1:$port" --config "$state/toolrouter.toml" >/dev/null &
for _ in $(seq 1 100); do curl -sf "127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
token="$(curl -sf "$issuer/test/mint?aud=http://127.0.0.1:$port/mcp&scope=tools:all&exp_in=3600")"
for round in 1 2; do
  for who in key token; do
    credential=bench-key
    [ "$who" = token ] && credential="$token"
    echo "round $round, $who:"
    oha -z "${seconds}s" -c 16 --no-tui -H "Authorization: Bearer $credential" "http://127.0.0.1:$port/v1/models" \
      | grep -E "Success rate|Requests/sec|50.00% in|99.00% in"
  done
done
