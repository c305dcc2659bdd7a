#!/usr/bin/env bash
# Throughput of three toolrouter replicas behind HAProxy against one, on
# the shared overhead harness (../shared/bench/overhead: the Rust mock
# OpenAI server, oha closed loop at 32 connections, body.json):
#
#   scripts/bench-replicas.sh [ROUNDS=2]
#
# Starts the mock, Redis and three replicas (`[cluster]` on, as in
# scripts/cluster-demo.sh, `server.client_rate = 0` so no request is
# refused) and HAProxy with two frontends: one balancing over the three
# replicas (round robin), one sending everything to the first. Each round
# saturates, in turn: the mock alone, the first replica directly, HAProxy
# with one replica, HAProxy with three. Prints req/s per target and round.
# Needs oha, redis-server, haproxy, curl and the release build.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
harness="$(cd "${HARNESS:-$root/../shared/bench/overhead}" && pwd)"
bin="${TOOLROUTER:-${CARGO_TARGET_DIR:-$root/target}/release/toolrouter}"
[ -x "$bin" ] || bin="$HOME/.cache/toolrouter/target/release/toolrouter"
rounds="${1:-2}"
for tool in oha redis-server haproxy curl; do
  command -v "$tool" >/dev/null || [ -x "$HOME/.cargo/bin/$tool" ] || { echo "needs $tool" >&2; exit 1; }
done
export PATH="$HOME/.cargo/bin:$PATH"
[ -x "$bin" ] || { echo "needs the release build: cargo build --release" >&2; exit 1; }
base="${PORT:-18180}" mock_port=$((base)) redis_port=$((base + 1)) lb3=$((base + 2)) lb1=$((base + 3))
results="${RESULTS_DIR:-$HOME/.cache/toolrouter/bench/replicas-$(date +%Y%m%d-%H%M)}"
mkdir -p "$results"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT

mock_target="$HOME/.cache/toolrouter/mock-target"
mock="$mock_target/release/mock-openai"
[ -x "$mock" ] || (cd "$harness/mock-openai" && CARGO_TARGET_DIR="$mock_target" cargo build --release --quiet)
"$mock" --port "$mock_port" --max-lifetime-s 3600 >"$work/mock.log" 2>&1 &
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &

backends=""
for i in 1 2 3; do
  mkdir -p "$work/replica$i"
  TOOLROUTER_STATE_DIR="$work/replica$i" TOOLROUTER_SERVER_CLIENT_RATE=0 \
  TOOLROUTER_CLUSTER_REDIS_URL="redis://127.0.0.1:$redis_port" TOOLROUTER_CLUSTER_REPLICAS=3 \
  TOOLROUTER_LLM_BASE_URL="http://127.0.0.1:$mock_port/v1" \
    "$bin" serve --listen "127.0.0.1:$((base + 3 + i))" >"$work/replica$i.out" 2>"$work/replica$i.log" &
  backends+="    server replica$i 127.0.0.1:$((base + 3 + i))"$'\n'
done
cat >"$work/haproxy.cfg" <<CFG
global
    maxconn 4096
    nbthread 1
defaults
    mode http
    option http-keep-alive
    timeout connect 2s
    timeout client 60s
    timeout server 60s
frontend three
    bind 127.0.0.1:$lb3
    default_backend three
frontend one
    bind 127.0.0.1:$lb1
    default_backend one
backend three
    balance roundrobin
$backends
backend one
    server replica1 127.0.0.1:$((base + 4))
CFG
haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 &
for i in 1 2 3; do
  for _ in $(seq 1 600); do
    curl -sf "127.0.0.1:$((base + 3 + i))/readyz" >/dev/null && break
    sleep 0.2
  done
done

saturate() { # LABEL URL
  LABEL="$1" BODY="$harness/body.json" SUMMARY_OUT="$results/$1.json" "$harness/run.sh" "$2" max 10 >/dev/null
  python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print("{:,} ({} errors)".format(round(s["achieved_rps"]), s["errors"]))' "$results/$1.json"
}
printf '| round | mock alone | one replica, direct | HAProxy → one replica | HAProxy → three replicas |\n| --- | ---: | ---: | ---: | ---: |\n'
for round in $(seq 1 "$rounds"); do
  mock_rps=$(saturate "mock-$round" "http://127.0.0.1:$mock_port")
  direct=$(saturate "direct-$round" "http://127.0.0.1:$((base + 4))")
  one=$(saturate "lb1-$round" "http://127.0.0.1:$lb1")
  three=$(saturate "lb3-$round" "http://127.0.0.1:$lb3")
  printf '| %s | %s | %s | %s | %s |\n' "$round" "$mock_rps" "$direct" "$one" "$three"
done
echo "results: $results"
