#!/usr/bin/env bash
# Route cases from the Berkeley Function Calling Leaderboard's data (the
# bfcl-eval wheel on PyPI, Apache-2.0): a tool collection toolrouter was
# never tuned on, for `toolrouter eval route --cases` and
# tests/it/route_eval.rs. A no-op when present:
#
#   ~/.cache/toolrouter/bfcl/bfcl_<category>.jsonl   (six categories, scripts/bfcl-route-cases.py)
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
# The wheel (py3-none-any) wants Python >= 3.10; only its data is used here.
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.11 --dest "$work" "bfcl-eval==$version"
python3 - "$work"/bfcl_eval-*.whl "$work" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    for name in wheel.namelist():
        if name.startswith("bfcl_eval/data/") and name.endswith(".json"):
            wheel.extract(name, sys.argv[2])
PY
python3 scripts/bfcl-route-cases.py "$work/bfcl_eval/data" "$work/cases"
# Only this script's files are replaced: the directory may hold others.
mkdir -p "$dir"
rm -f "$dir"/bfcl_*.jsonl "$dir/.source"
mv "$work"/cases/bfcl_*.jsonl "$dir"/
echo "$marker" > "$dir/.source"
