#!/usr/bin/env bash
# Python environments for the integration tests that drive toolrouter with
# real clients, from PyPI, in a cache outside the repository (reused across
# runs; a no-op when present):
#
#   ~/.cache/toolrouter/py-mcp2   mcp 2.x (the current SDK)
#   ~/.cache/toolrouter/py-mcp1   mcp 1.x (older clients)
#   ~/.cache/toolrouter/py-langchain, py-openai   LangChain, the openai SDK
#   ~/.cache/toolrouter/py-anthropic   the anthropic SDK, LangChain's ChatAnthropic
#   ~/.cache/toolrouter/py-agents   the OpenAI Agents SDK
#   ~/.cache/toolrouter/py-schemathesis   schemathesis (openapi/toolrouter.yaml
#                                         against a running server)
#   ~/.cache/toolrouter/py-browser   selenium (the console in Debian's Chromium
#                                    through its chromedriver)
#   ~/.cache/toolrouter/py-otel   opentelemetry-proto (tests/python/otlp_receiver.py,
#                                 an OTLP/HTTP trace receiver)
#
# TOOLROUTER_PYENVS=/dir puts them elsewhere. Prints nothing when all is there.
set -euo pipefail
root="${TOOLROUTER_PYENVS:-$HOME/.cache/toolrouter}"
mkdir -p "$root"

make_env() { # name, pip requirements...
  local name="$1"; shift
  local dir="$root/$name" stamp="$root/$name/.requirements"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$*" ]; then return; fi
  echo "python-env.sh: creating $dir ($*)" >&2
  rm -rf "$dir"
  python3 -m venv "$dir"
  "$dir/bin/pip" install --quiet --disable-pip-version-check "$@"
  echo "$*" > "$stamp"
}

make_env py-mcp2 "mcp==2.3.0"
make_env py-mcp1 "mcp==1.30.0"
make_env py-langchain "langchain-mcp-adapters==0.3.2" "mcp==1.30.0"
make_env py-openai "openai==3.54.0" "langchain-openai==1.7.3"
make_env py-anthropic "anthropic==2.10.0" "langchain-anthropic==1.7.10"
make_env py-agents "openai-agents==0.24.0"
make_env py-schemathesis "schemathesis==4.32.5"
make_env py-browser "selenium==4.50.0"
make_env py-otel "opentelemetry-proto==1.45.2"
