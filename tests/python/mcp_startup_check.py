"""`toolrouter mcp` answers at once while its engine loads: `initialize`
comes back before the catalog is loaded, the tools say how far loading
has got instead of hanging, and once the catalog is there (seconds)
`search_tools` answers with BM25 alone while the dense index is built
(minutes), saying how far the build has got. Drives it with the official
`mcp` Python SDK over stdio.

    python mcp_startup_check.py BINARY

The environment passes through (a catalog with no index yet, an empty
embedding cache). Prints how long `initialize` took.
"""

import asyncio
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def check(cond, message):
    if not cond:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


def is_error(result):
    return getattr(result, "isError", None) or getattr(result, "is_error", False)


async def main():
    params = StdioServerParameters(command=sys.argv[1], args=["mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            started = time.monotonic()
            await session.initialize()
            took = time.monotonic() - started
            names = [t.name for t in (await session.list_tools()).tools]
            check(names == ["search_tools", "plan", "call_api"], f"the fixed tools while loading: {names}")
            # Poll until search answers by words, saying how far the dense index is.
            said = []
            for _ in range(240):
                r = await session.call_tool("search_tools", {"query": "weather in Berlin"})
                said.append(text_of(r))
                if is_error(r):
                    check("still starting" in said[-1], f"an error other than loading: {said[-1]}")
                elif "% built" in said[-1]:
                    break
                await asyncio.sleep(0.5)
            check(not is_error(r), f"no answer while the dense index builds: {said[-3:]}")
            check("Searched by words alone: lexical search only, dense index" in said[-1], f"the report: {said[-1]}")
            check("weather" in said[-1].lower(), f"BM25 finds weather APIs: {said[-1]}")
            r = await session.call_tool("call_api", {"name": "no_such_api_x", "arguments": {}})
            check(is_error(r) and "still starting" not in text_of(r), f"call_api once loaded: {text_of(r)}")
            print(f"ok initialize in {took * 1000:.0f} ms; then: {said[0]!r} ... {said[-1]!r}")


asyncio.run(main())
