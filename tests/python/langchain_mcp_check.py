"""LangChain's MCP adapters load toolrouter's tools and call them.

    python langchain_mcp_check.py BINARY      # over stdio (`BINARY mcp`)
"""

import asyncio
import os
import sys

from langchain_mcp_adapters.client import MultiServerMCPClient

SNOW = "schneetage_for_ecoweather"


def check(cond, message):
    if not cond:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)


async def main():
    client = MultiServerMCPClient(
        {"toolrouter": {"transport": "stdio", "command": sys.argv[1], "args": ["mcp"], "env": dict(os.environ)}}
    )
    tools = await client.get_tools()
    names = [t.name for t in tools]
    check({"search_tools", "plan", "call_api"} <= set(names), f"LangChain tools: {names}")
    by_name = {t.name: t for t in tools}
    found = await by_name["search_tools"].ainvoke(
        {"query": "number of snow days at a location since a date (ecoweather Schneetage)", "k": 5}
    )
    check(SNOW in str(found), f"search_tools through LangChain: {found}")
    called = await by_name["call_api"].ainvoke(
        {"name": SNOW, "arguments": {"is_from": "2022-09-01", "lon": 123.456, "lat": 789.012}}
    )
    check("days with snow" in str(called), f"call_api through LangChain: {called}")
    print("ok (langchain-mcp-adapters)")


asyncio.run(main())
