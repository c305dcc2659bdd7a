#!/usr/bin/env bash
# The project's test command: unit and integration tests.
# Tests over the real ToolBench data use $TOOLBENCH_DIR, else
# ../shared/datasets/toolbench beside the repository; without either
# they say SKIPPED and the rest still runs.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --locked "$@"
