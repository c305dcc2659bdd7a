#!/usr/bin/env bash
# Catalog load time and peak memory of the release binary, on the full
# ToolBench tool set (warm file cache). Prints the median of N runs.
#   scripts/bench-catalog.sh [TOOLS_DIR] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
tools="${1:-../shared/datasets/toolbench/tools}"
runs="${2:-7}"
cargo build --release --locked --quiet
bin="${CARGO_TARGET_DIR:-target}/release/toolrouter"
"$bin" catalog stats --catalog "$tools" >/dev/null   # warm the page cache
walls=(); rss=(); loads=()
for _ in $(seq "$runs"); do
  out=$( { /usr/bin/time -f '%e %M' "$bin" catalog stats --json --catalog "$tools" > /tmp/toolrouter-bench.json; } 2>&1 | tail -n 1)
  walls+=("${out% *}"); rss+=("${out#* }")
  loads+=("$(python3 -c 'import json;print(json.load(open("/tmp/toolrouter-bench.json"))["elapsed_ms"])')")
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "runs: $runs, cores: $(nproc)"
echo "catalog load (in process, median): $(median "${loads[@]}") ms"
echo "whole command wall time (median): $(median "${walls[@]}") s"
echo "peak RSS (median): $(( $(median "${rss[@]}") / 1024 )) MiB"
