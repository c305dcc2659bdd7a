#!/usr/bin/env bash
# What toolrouter adds in front of a model server, with the shared overhead
# harness (../shared/bench/overhead: the Rust mock OpenAI server, oha
# open-loop with latency correction, direct and through toolrouter
# alternated round by round in one run):
#
#   scripts/bench-overhead.sh [STEP...]
#
# STEPs (default: all of them, in this order):
#   rate1k    compare.sh at 1,000 req/s, body.json (3 tools)
#   rate5k    compare.sh at 5,000 req/s, body.json
#   stream    compare.sh at 1,000 req/s, body.json with "stream": true
#             (oha times the whole stream; the mock sends it at once, so
#             the added time bounds the added time to the first byte)
#   tools1k   compare.sh at 200 req/s, 1,000 tools (a list seen before,
#             embedded), 400 KB body
#   sat       saturation (closed loop, 32 connections, 10 s): the mock
#             alone, toolrouter with body.json, and without `tools`
#   faces     compare.sh at 1,000 req/s for each face with the same request:
#             chat completions (body.json), the Responses API (store: false,
#             then stored: an fsync'd journal line each) and Anthropic's
#             Messages, each against the mock's chat completions with
#             body.json (a copy of the harness that posts to the face's path
#             and sends body.json to the mock)
#
# toolrouter runs `serve` as a user would start it: the release build, the
# embedded catalog, the default `log.level` (info, one line per request,
# to a file), with `server.client_rate = 0` (the default 20 req/s per
# client would refuse the load). Needs `oha` (`cargo install oha --locked`)
# and the release build. Writes each step's JSON under RESULTS_DIR
# (default ~/.cache/toolrouter/bench/overhead-DATE) and prints the tables.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
harness="${HARNESS:-$root/../shared/bench/overhead}"
harness="$(cd "$harness" && pwd)"
bin="${TOOLROUTER:-$root/target/release/toolrouter}"
mock_port="${MOCK_PORT:-18080}" port="${PORT:-18081}"
results="${RESULTS_DIR:-$HOME/.cache/toolrouter/bench/overhead-$(date +%Y%m%d-%H%M)}"
duration="${DURATION:-15}" rounds="${ROUNDS:-3}"
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(rate1k rate5k stream tools1k sat faces)
command -v oha >/dev/null || [ -x "$HOME/.cargo/bin/oha" ] || { echo "needs oha: cargo install oha --locked" >&2; exit 1; }
[ -x "$bin" ] || { echo "needs $bin: cargo build --release" >&2; exit 1; }
mkdir -p "$results"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT

# The mock, built once outside the shared folder.
mock_target="$HOME/.cache/toolrouter/mock-target"
mock="$mock_target/release/mock-openai"
if [ ! -x "$mock" ]; then
  (cd "$harness/mock-openai" && CARGO_TARGET_DIR="$mock_target" cargo build --release --quiet)
fi
"$mock" --port "$mock_port" --max-lifetime-s 7200 >"$work/mock.log" 2>&1 &
mock_pid=$!

TOOLROUTER_STATE_DIR="$work/state" TOOLROUTER_SERVER_CLIENT_RATE=0 \
TOOLROUTER_LLM_BASE_URL="http://127.0.0.1:$mock_port/v1" \
  "$bin" serve --listen "127.0.0.1:$port" >"$results/toolrouter.log" 2>&1 &
gw_pid=$!
for _ in $(seq 1 300); do
  curl -sf "127.0.0.1:$port/readyz" >/dev/null && curl -sf "127.0.0.1:$mock_port/health" >/dev/null && break
  sleep 0.2
done
curl -sf "127.0.0.1:$port/readyz" >/dev/null || { echo "toolrouter did not get ready" >&2; exit 1; }

# Bodies: body.json as it is, streamed, without tools, and with 1,000 tools.
python3 - "$harness/body.json" "$work" <<'PY'
import json, sys
body = json.load(open(sys.argv[1]))
out = sys.argv[2]
json.dump(dict(body, stream=True), open(f"{out}/stream.json", "w"))
json.dump({k: v for k, v in body.items() if k not in ("tools", "tool_choice")}, open(f"{out}/no-tools.json", "w"))
words = ("weather forecast shipment route city truck price stock currency news sports movie music "
         "recipe hotel flight translate email calendar invoice payment").split()
tools = list(body["tools"])
for i in range(len(tools), 1000):
    a, b, c = words[i % len(words)], words[(i // 3) % len(words)], words[(i // 7) % len(words)]
    tools.append({"type": "function", "function": {
        "name": f"{a}_{b}_{i}", "description": f"Look up {a} and {b} data by {c} (service {i}).",
        "parameters": {"type": "object", "properties": {c: {"type": "string", "description": f"the {c}"},
                       "limit": {"type": "integer"}}, "required": [c]}}})
json.dump(dict(body, tools=tools), open(f"{out}/tools1k.json", "w"))
# The same request for the Responses API and Anthropic's Messages.
system, user = body["messages"][0]["content"], body["messages"][1]["content"]
functions = [t["function"] for t in body["tools"]]
responses = {"model": body["model"], "instructions": system, "input": user, "temperature": body["temperature"],
             "max_output_tokens": body["max_tokens"], "tool_choice": "auto",
             "tools": [dict(f, type="function") for f in functions]}
json.dump(dict(responses, store=False), open(f"{out}/responses.json", "w"))
json.dump(responses, open(f"{out}/responses-store.json", "w"))
json.dump({"model": body["model"], "system": system, "messages": [{"role": "user", "content": user}],
           "max_tokens": body["max_tokens"], "temperature": body["temperature"], "tool_choice": {"type": "auto"},
           "tools": [{"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
                     for f in functions]}, open(f"{out}/messages.json", "w"))
PY

# The harness, copied to post to any face's path (run.sh takes only
# .../chat/completions) with body.json for the mock (DIRECT_BODY).
faces_harness="$work/harness"
mkdir -p "$faces_harness"
cp -r "$harness/run.sh" "$harness/compare.sh" "$harness/lib" "$faces_harness/"
sed -i 's|^  \*/chat/completions) URL="\$TARGET" ;;|  */chat/completions\|*/responses\|*/messages) URL="$TARGET" ;;|' "$faces_harness/run.sh"
sed -i 's|then url="\$MOCK"; key="\$DIRECT_KEY"; pids="\${MOCK_PIDS:-}"|then url="$MOCK"; key="$DIRECT_KEY"; pids="${MOCK_PIDS:-}"; body="${DIRECT_BODY:-$BODY}"|; s|else url="\$GW"; key="\${GATEWAY_KEY:-}"; pids="\${GATEWAY_PIDS:-}"; fi|else url="$GW"; key="${GATEWAY_KEY:-}"; pids="${GATEWAY_PIDS:-}"; body="$BODY"; fi|; s|  LABEL="\$tag" API_KEY="\$key"|  LABEL="$tag" BODY="$body" API_KEY="$key"|' "$faces_harness/compare.sh"
grep -q 'responses|\*/messages' "$faces_harness/run.sh" && grep -q 'BODY="$body"' "$faces_harness/compare.sh" \
  || { echo "the harness changed: the faces step's copy could not be adapted" >&2; exit 1; }

compare() { # LABEL RATE BODY
  LABEL="$1" BODY="$3" RESULTS_DIR="$results" GATEWAY_PIDS="$gw_pid" MOCK_PIDS="$mock_pid" \
    "$harness/compare.sh" "http://127.0.0.1:$port" "http://127.0.0.1:$mock_port" "$2" "$duration" "$rounds"
}
face() { # LABEL PATH BODY
  LABEL="$1" BODY="$3" DIRECT_BODY="$harness/body.json" RESULTS_DIR="$results" GATEWAY_PIDS="$gw_pid" \
    MOCK_PIDS="$mock_pid" "$faces_harness/compare.sh" "http://127.0.0.1:$port$2" "http://127.0.0.1:$mock_port" \
    1000 "$duration" "$rounds"
}
saturate() { # LABEL URL BODY
  LABEL="$1" BODY="$3" SUMMARY_OUT="$results/sat-$1.json" "$harness/run.sh" "$2" max 10
}
for step in "${steps[@]}"; do
  echo "== $step"
  case "$step" in
    rate1k) compare toolrouter 1000 "$harness/body.json" ;;
    rate5k) compare toolrouter 5000 "$harness/body.json" ;;
    stream) compare toolrouter-stream 1000 "$work/stream.json" ;;
    tools1k)
      # Seen before and embedded: one request, then time to embed the list.
      curl -sf "127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' \
        --data-binary "@$work/tools1k.json" >/dev/null
      sleep "${EMBED_WAIT_S:-20}"
      compare toolrouter-tools1k 200 "$work/tools1k.json" ;;
    sat)
      saturate mock "http://127.0.0.1:$mock_port" "$harness/body.json"
      saturate toolrouter "http://127.0.0.1:$port" "$harness/body.json"
      saturate toolrouter-no-tools "http://127.0.0.1:$port" "$work/no-tools.json" ;;
    faces)
      face chat /v1/chat/completions "$harness/body.json"
      face responses /v1/responses "$work/responses.json"
      face responses-stored /v1/responses "$work/responses-store.json"
      face messages /v1/messages "$work/messages.json" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
echo "RSS of toolrouter now: $(awk '/VmRSS/ {print $2 / 1024 " MiB"}' "/proc/$gw_pid/status"), peak $(awk '/VmHWM/ {print $2 / 1024 " MiB"}' "/proc/$gw_pid/status")"
echo "results: $results"
