#!/usr/bin/env bash
# Real MCP servers for the federation tests (tests/it/downstream.rs), from
# the package registries, in a cache outside the repository (a no-op when
# present):
#
#   ~/.cache/toolrouter/py-mcp-servers   mcp-server-time, mcp-server-git (PyPI)
#   ~/.cache/toolrouter/npm-servers      @modelcontextprotocol/server-everything (npm)
#
# TOOLROUTER_PYENVS=/dir puts them elsewhere. Needs python3 and npm.
set -euo pipefail
root="${TOOLROUTER_PYENVS:-$HOME/.cache/toolrouter}"
mkdir -p "$root"

py_requirements="mcp-server-time==2026.10.19 mcp-server-git==2026.10.19"
dir="$root/py-mcp-servers"
if [ ! -f "$dir/.requirements" ] || [ "$(cat "$dir/.requirements")" != "$py_requirements" ]; then
  echo "mcp-servers.sh: creating $dir ($py_requirements)" >&2
  rm -rf "$dir"
  python3 -m venv "$dir"
  # shellcheck disable=SC2086
  "$dir/bin/pip" install --quiet --disable-pip-version-check $py_requirements
  echo "$py_requirements" > "$dir/.requirements"
fi

npm_package="@modelcontextprotocol/server-everything@2026.8.31"
dir="$root/npm-servers"
if [ ! -f "$dir/.requirements" ] || [ "$(cat "$dir/.requirements")" != "$npm_package" ]; then
  echo "mcp-servers.sh: installing $npm_package into $dir" >&2
  rm -rf "$dir"
  mkdir -p "$dir"
  (cd "$dir" && npm install --silent --no-audit --no-fund "$npm_package" >/dev/null)
  echo "$npm_package" > "$dir/.requirements"
fi
