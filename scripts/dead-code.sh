#!/usr/bin/env bash
# Dead code an all-`pub` library hides: compiles a copy of the crate with
# every module but `cli` private, so that rustc's dead-code lint sees
# everything the binary does not reach. Items listed are unused by the
# binary; some are used only by the integration tests (tests/it), which
# reach the library from outside: check those with grep before deleting.
#
#   scripts/dead-code.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
cp -r "$root/src" "$root/Cargo.toml" "$root/Cargo.lock" "$copy/"
for d in config openapi ui; do [ -d "$root/$d" ] && cp -r "$root/$d" "$copy/"; done
sed -i 's/^pub mod \([a-z_]*\);/mod \1;/; s/^mod cli;/pub mod cli;/' "$copy/src/lib.rs"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/toolrouter/target}-dead-code
cd "$copy"
cargo check --lib --message-format short 2>&1 | grep -E '^src/.*warning' | sort -u || echo "no dead code found"
