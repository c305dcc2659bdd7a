#!/usr/bin/env bash
# Route cases from the Berkeley Function Calling Leaderboard's data (the
# bfcl-eval wheel on PyPI, Apache-2.0): a tool collection toolrouter was
# never tuned on, for `toolrouter eval route --cases` and
# tests/it/route_eval.rs. A no-op when present:
#
#   ~/.cache/toolrouter/bfcl/bfcl_{simple_python,multiple,live_simple,live_multiple}.jsonl
#
# TOOLROUTER_BFCL_DIR=/dir puts them elsewhere. Needs python3 with pip.
set -euo pipefail
cd "$(dirname "$0")/.."
version="2026.3.23"
dir="${TOOLROUTER_BFCL_DIR:-$HOME/.cache/toolrouter/bfcl}"
marker="bfcl-eval==$version $(sha256sum scripts/bfcl-route-cases.py | cut -c1-16)"
if [ -f "$dir/.source" ] && [ "$(cat "$dir/.source")" = "$marker" ]; then
  exit 0
fi
echo "fetch-bfcl.sh: writing route cases from bfcl-eval $version into $dir" >&2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --disable-pip-version-check --no-deps --dest "$work" "bfcl-eval==$version"
python3 - "$work"/bfcl_eval-*.whl "$work" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    for name in wheel.namelist():
        if name.startswith("bfcl_eval/data/") and name.endswith(".json"):
            wheel.extract(name, sys.argv[2])
PY
rm -rf "$dir"
mkdir -p "$dir"
python3 scripts/bfcl-route-cases.py "$work/bfcl_eval/data" "$dir"
echo "$marker" > "$dir/.source"
