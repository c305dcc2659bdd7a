#!/usr/bin/env bash
# Three toolrouter replicas sharing their limits, learning and traces through Redis,
# behind HAProxy, on loopback (docs/configuration.md, "Replicas"):
#
#   scripts/cluster-demo.sh            # runs until Ctrl-C; prints the URL
#   scripts/cluster-demo.sh --check    # starts everything, checks it, stops
#
# Needs redis-server, haproxy and curl (Debian: apt-get install
# redis-server haproxy curl) and a built binary (cargo build --release). HAProxy balances
# requests round-robin and keeps an MCP 2025 session on the replica that
# made it (sticky on the Mcp-Session-Id header); sessionless requests
# (MCP 2026-07-28, the OpenAI API) go anywhere.
# Ports: TOOLROUTER_DEMO_PORT (default 8090) for HAProxy, the next three
# for the replicas, the fourth for Redis.
set -euo pipefail
cd "$(dirname "$0")/.."
check=false
[ "${1:-}" = "--check" ] && check=true
for tool in redis-server haproxy curl; do
  command -v "$tool" >/dev/null || { echo "cluster-demo.sh needs $tool (apt-get install $tool)" >&2; exit 1; }
done
bin="${CARGO_TARGET_DIR:-target}/release/toolrouter"
[ -x "$bin" ] || bin="$HOME/.cache/toolrouter/target/release/toolrouter"
[ -x "$bin" ] || { echo "build toolrouter first: cargo build --release" >&2; exit 1; }

port="${TOOLROUTER_DEMO_PORT:-8090}"
redis_port=$((port + 4))
work="$(mktemp -d)"
pids=()
stop() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap stop EXIT INT TERM

redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
backends=""
for i in 1 2 3; do
  replica_port=$((port + i))
  mkdir -p "$work/replica$i"
  TOOLROUTER_STATE_DIR="$work/replica$i" \
  TOOLROUTER_CLUSTER_REDIS_URL="redis://127.0.0.1:$redis_port" \
  TOOLROUTER_CLUSTER_REPLICAS=3 \
  TOOLROUTER_RETRIEVAL_MODE="${TOOLROUTER_RETRIEVAL_MODE:-lexical}" \
  TOOLROUTER_LOG_LEVEL="${TOOLROUTER_LOG_LEVEL:-warn}" \
    "$bin" serve --listen "127.0.0.1:$replica_port" >"$work/replica$i.out" 2>"$work/replica$i.log" &
  pids+=($!)
  backends+="    server replica$i 127.0.0.1:$replica_port check inter 500ms rise 1"$'\n'
done

cat >"$work/haproxy.cfg" <<CFG
global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 300s
    timeout server 300s
frontend stats
    bind 127.0.0.1:$((port + 5))
    stats enable
    stats uri /stats
frontend toolrouter
    bind 127.0.0.1:$port
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk GET /readyz
    stick-table type string len 64 size 100k expire 30m
    stick on req.hdr(mcp-session-id)
    stick store-response res.hdr(mcp-session-id)
$backends
CFG
haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 &
pids+=($!)

url="http://127.0.0.1:$port"
for _ in $(seq 1 300); do
  ready=0
  for i in 1 2 3; do
    [ "$(curl -s "http://127.0.0.1:$((port + i))/readyz" || true)" = "ready" ] && ready=$((ready + 1))
  done
  [ "$ready" = 3 ] && curl -s "$url/readyz" >/dev/null && break
  sleep 0.2
done
# HAProxy marks a replica down while it loads (its /readyz answers 503):
# wait until its own health checks see all three up (its stats, as CSV).
for _ in $(seq 1 100); do
  up="$(curl -s "http://127.0.0.1:$((port + 5))/stats;csv" | grep -c '^replicas,replica[0-9],.*,UP,' || true)"
  [ "$up" = 3 ] && break
  sleep 0.1
done
echo "toolrouter: three replicas behind HAProxy at $url (Redis on 127.0.0.1:$redis_port)"

if $check; then
  for i in 1 2 3 4 5 6; do
    curl -s -o /dev/null -w "%{http_code}\n" -X POST "$url/v1/tools/search" \
      -H 'content-type: application/json' -d '{"query": "weather forecast in Berlin", "k": 2}'
  done | sort | uniq -c
  for i in 1 2 3; do
    metrics="$(curl -s "http://127.0.0.1:$((port + i))/metrics")"
    served="$(echo "$metrics" | grep -F 'route="/v1/tools/search",status="200"' | awk '{print $2}' || true)"
    echo "replica$i served ${served:-0} searches; $(echo "$metrics" | grep '^toolrouter_cluster_up' || echo 'toolrouter_cluster_up missing')"
  done
  exit 0
fi
echo "Ctrl-C stops everything."
wait
