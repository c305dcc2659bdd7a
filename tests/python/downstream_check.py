"""Drives toolrouter's MCP face (streamable HTTP) with the official `mcp`
Python SDK (1.x or 2.x) when toolrouter federates downstream MCP servers
(`tests/it/downstream.rs` starts them):

    python downstream_check.py URL NEW_TOOL_NAME

search_tools finds a downstream tool; it becomes a session tool and
answers; bad arguments are refused before the call; a tool the fixture
server adds at run time reaches this client as
notifications/tools/list_changed and is then found and called.
Exits non-zero with a message on the first failed check.
"""

import asyncio
import importlib.metadata
import sys
from contextlib import AsyncExitStack

from mcp import ClientSession

sys.path.insert(0, __import__("os").path.dirname(__file__))
from mcp_check import attr, check, http_transport, text_of  # noqa: E402


async def wait_for(flag, seconds):
    for _ in range(int(seconds * 10)):
        if flag:
            return True
        await asyncio.sleep(0.1)
    return bool(flag)


async def exercise(session, changed, new_tool):
    found = await session.call_tool("search_tools", {"query": "What is the current time in the Asia/Tokyo time zone?", "k": 5})
    names = [r["name"] for r in attr(found, "structuredContent")["results"]]
    check("time__get_current_time" in names, f"search finds the downstream tool: {names}")

    now = await session.call_tool("time__get_current_time", {"timezone": "Asia/Tokyo"})
    check(not attr(now, "isError") and "Asia/Tokyo" in text_of(now), f"the session tool answers: {text_of(now)}")

    bad = await session.call_tool("time__get_current_time", {"zone": "Asia/Tokyo"})
    t = text_of(bad)
    check(attr(bad, "isError") and "Invalid arguments" in t and "timezone" in t, f"bad arguments refused: {t}")

    changed.clear()
    added = await session.call_tool("call_api", {"name": "fixture__add_tool", "arguments": {"name": new_tool}})
    check(not attr(added, "isError"), f"the fixture adds a tool: {text_of(added)}")
    check(await wait_for(changed, 20), "the downstream list_changed reached this client")

    function = f"fixture__{new_tool}"
    again = await session.call_tool("search_tools", {"query": f"{new_tool} (a tool added at run time)", "k": 3})
    names = [r["name"] for r in attr(again, "structuredContent")["results"]]
    check(function in names, f"the new downstream tool is found: {names}")
    ran = await session.call_tool(function, {})
    check(not attr(ran, "isError") and "ran" in text_of(ran), f"the new tool answers: {text_of(ran)}")


async def main():
    url, new_tool = sys.argv[1], sys.argv[2]
    changed = []

    async def on_message(message):
        kind = getattr(getattr(message, "root", message), "method", None)
        if kind == "notifications/tools/list_changed":
            changed.append(True)

    async with AsyncExitStack() as stack:
        streams = await stack.enter_async_context(http_transport(url, None))
        session = await stack.enter_async_context(ClientSession(streams[0], streams[1], message_handler=on_message))
        await session.initialize()
        await exercise(session, changed, new_tool)
        print(f"ok (mcp {importlib.metadata.version('mcp')})")


asyncio.run(main())
