"""Use toolrouter from Python through MCP (the official `mcp` SDK, 1.x or 2.x).

    pip install mcp
    python examples/mcp_client.py stdio                       # launches `toolrouter mcp`
    python examples/mcp_client.py http http://127.0.0.1:8080/mcp [API_KEY]   # `toolrouter serve`

With the ToolBench data and the replay upstream, for example:

    export TOOLROUTER_CATALOG_PATHS=../shared/datasets/toolbench/tools
    export TOOLROUTER_UPSTREAM_MODE=replay
    export TOOLROUTER_UPSTREAM_REPLAY_DIR=../shared/datasets/toolbench/cache/derived_from_trajectories

The agent's side of the flow: find APIs with search_tools, see them appear
as tools, call one.
"""

import asyncio
import os
import sys
from contextlib import AsyncExitStack

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def field(obj, camel):
    """A result field in either SDK's spelling (1.x camelCase, 2.x snake_case)."""
    snake = "".join("_" + c.lower() if c.isupper() else c for c in camel)
    return getattr(obj, camel, None) if hasattr(obj, camel) else getattr(obj, snake, None)


def http(url, key):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:  # mcp 2.x
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=60))
    except ImportError:  # mcp 1.x
        from mcp.client.streamable_http import streamablehttp_client

        return streamablehttp_client(url, headers=headers)


async def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    async with AsyncExitStack() as stack:
        if mode == "stdio":
            binary = os.environ.get("TOOLROUTER", "toolrouter")
            params = StdioServerParameters(command=binary, args=["mcp"], env=dict(os.environ))
            streams = await stack.enter_async_context(stdio_client(params))
        else:
            url = sys.argv[2] if len(sys.argv) > 2 else "http://127.0.0.1:8080/mcp"
            streams = await stack.enter_async_context(http(url, sys.argv[3] if len(sys.argv) > 3 else None))
        session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
        init = await session.initialize()
        print("connected to", field(init, "serverInfo").name, field(init, "serverInfo").version)

        tools = await session.list_tools()
        print("tools:", [t.name for t in tools.tools])

        found = await session.call_tool("search_tools", {"query": "how many snow days at a place since a date", "k": 3})
        print(found.content[0].text)

        tools = await session.list_tools()
        print("tools now:", [t.name for t in tools.tools])

        # Call an API by name (here one the replay table has recorded answers for).
        arguments = {"is_from": "2022-09-01", "lon": 123.456, "lat": 789.012}
        result = await session.call_tool("call_api", {"name": "schneetage_for_ecoweather", "arguments": arguments})
        print("error:" if field(result, "isError") else "response:", result.content[0].text)


asyncio.run(main())
