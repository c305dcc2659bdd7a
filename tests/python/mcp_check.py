"""Drives toolrouter's MCP face with the official `mcp` Python SDK (1.x or 2.x).

    python mcp_check.py stdio BINARY            # launches `BINARY mcp`
    python mcp_check.py http URL [API_KEY]      # streamable HTTP
    python mcp_check.py discover URL [API_KEY]  # 2.x high-level Client: server/discover, protocol 2026-07-28, no session

The environment passes through (catalog, replay upstream, state directory).
Exits non-zero with a message on the first failed check.
"""

import asyncio
import json
import os
import sys
from contextlib import AsyncExitStack

import importlib.metadata

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

MCP_MAJOR = int(importlib.metadata.version("mcp").split(".")[0])
SNOW = "schneetage_for_ecoweather"
SNOW_ARGS = {"is_from": "2022-09-01", "lon": 123.456, "lat": 789.012}


def check(cond, message):
    if not cond:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)


def http_transport(url, key):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if MCP_MAJOR >= 2:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=60))
    from mcp.client.streamable_http import streamablehttp_client

    return streamablehttp_client(url, headers=headers, timeout=60)


def attr(obj, camel):
    """A field in either SDK's spelling (1.x camelCase, 2.x snake_case)."""
    if hasattr(obj, camel):
        return getattr(obj, camel)
    snake = "".join("_" + c.lower() if c.isupper() else c for c in camel)
    return getattr(obj, snake)


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


async def list_page(session, cursor):
    if cursor is None:
        return await session.list_tools()
    try:
        return await session.list_tools(cursor=cursor)
    except TypeError:  # mcp 2.x takes request params
        from mcp import types

        return await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))


async def all_tools(session):
    """Every tool, following tools/list's pagination cursors."""
    tools, cursor, pages = [], None, 0
    while True:
        page = await list_page(session, cursor)
        pages += 1
        tools.extend(page.tools)
        cursor = attr(page, "nextCursor")
        if not cursor:
            return tools, pages


async def exercise(session, changed):
    init = None
    page_size = int(os.environ.get("TOOLROUTER_MCP_PAGE_SIZE", "50"))
    tools, pages = await all_tools(session)
    names = [t.name for t in tools]
    check({"search_tools", "plan", "call_api"} <= set(names), f"fixed tools listed: {names}")

    found = await session.call_tool("search_tools", {"query": "number of snow days at a location since a date (ecoweather Schneetage)", "k": 5})
    check(not attr(found, "isError"), f"search_tools succeeds: {text_of(found)}")
    results = attr(found, "structuredContent")["results"]
    check(any(r["name"] == SNOW for r in results), f"{SNOW} found: {[r['name'] for r in results]}")
    check(attr(found, "structuredContent")["after"] is None, "no call yet, so no cue")
    check(json.loads(found.content[-1].text) == attr(found, "structuredContent"), "the structured results also come as JSON text")
    too_many = await session.call_tool("search_tools", {"query": "snow days", "k": 999})
    check(attr(too_many, "isError") and "`k` must be 1 to 50" in text_of(too_many), f"k past the schema: {text_of(too_many)}")
    snow = next(r for r in results if r["name"] == SNOW)
    check("lat" in snow["input_schema"]["properties"] and 0 <= snow["availability"] <= 1, f"schema and availability: {snow}")
    for _ in range(50):
        if changed:
            break
        await asyncio.sleep(0.1)
    check(changed, "notifications/tools/list_changed arrived")
    tools, pages = await all_tools(session)
    names = [t.name for t in tools]
    check(SNOW in names, f"{SNOW} is a tool of the session: {names}")
    check(pages == -(-len(names) // page_size), f"{len(names)} tools in {pages} pages of {page_size}")
    snow_tool = next(t for t in tools if t.name == SNOW)
    check("lat" in attr(snow_tool, "inputSchema")["properties"], f"its input schema: {attr(snow_tool, 'inputSchema')}")
    hints = attr(snow_tool, "annotations")
    check(hints is not None and attr(hints, "readOnlyHint") is True, f"a GET API is annotated read-only: {hints}")
    check(snow["effect"] == "read_only", f"search says what a call does: {snow}")

    direct = await session.call_tool(SNOW, SNOW_ARGS)
    check(not attr(direct, "isError"), f"the dynamic tool answers: {text_of(direct)}")
    check("days with snow" in text_of(direct), f"the recorded response: {text_of(direct)}")
    check(attr(direct, "structuredContent")["name"] == SNOW, f"structuredContent: {attr(direct, 'structuredContent')}")

    via = await session.call_tool("call_api", {"name": SNOW, "arguments": SNOW_ARGS})
    check(not attr(via, "isError") and "days with snow" in text_of(via), f"call_api answers: {text_of(via)}")

    # The next search reads the session's last call as the tool graph's cue,
    # and reports it beside the query and the names found.
    query = "snow depth forecast"
    again = attr(await session.call_tool("search_tools", {"query": query, "k": 3}), "structuredContent")
    check(again["query"] == query and again["after"] == SNOW, f"the search reports its query and cue: {again}")
    check(again["found"] == [r["name"] for r in again["results"]] and len(again["found"]) == 3, f"found: {again}")
    check(all(isinstance(r["why"]["follows"], (int, float)) for r in again["results"]), f"why: {again['results']}")

    bad = await session.call_tool("call_api", {"name": SNOW, "arguments": {"lat": "north", "color": 1}})
    check(attr(bad, "isError"), "bad arguments are an isError result")
    t = text_of(bad)
    check("/lat" in t and "/lon" in t and "color" in t, f"every problem listed: {t}")

    big = await session.call_tool("call_api", {"name": SNOW, "arguments": {"lat": "x" * 70000}})
    check(attr(big, "isError") and "limit" in text_of(big), f"huge arguments are refused: {text_of(big)[:200]}")

    if os.environ.get("TOOLROUTER_UPSTREAM_BURST") == "2":
        # Two calls of the API went through; its rate (one per 100 s) refuses the third.
        limited = await session.call_tool(SNOW, SNOW_ARGS)
        t = text_of(limited)
        check(attr(limited, "isError") and "rate limited" in t and "Retry after" in t, f"a rate-limited call says when to retry: {t}")

    # Bad arguments to any tool, the fixed ones included, are isError results
    # a model can act on (2025-11-25), never protocol errors.
    for tool, args, says in [
        ("search_tools", {}, "`query` is required"),
        ("search_tools", {"query": 5}, "`query` must be a string"),
        ("search_tools", {"query": "weather", "k": 0}, "`k` must be a positive integer"),
        ("search_tools", {"query": "weather", "limit": 3}, "unknown argument `limit`"),
        ("plan", {"query": "  "}, "`query` is empty"),
        ("plan", {"query": "weather", "max_steps": "two"}, "`max_steps` must be a positive integer"),
        ("call_api", {"arguments": {}}, "`name` is required"),
        ("call_api", {"name": "schneetage_for_ecoweathr", "arguments": SNOW_ARGS}, f"did you mean `{SNOW}`"),
    ]:
        r = await session.call_tool(tool, args)
        check(attr(r, "isError") and says in text_of(r), f"{tool}({args}) is an isError result saying {says!r}: {text_of(r)}")

    plan = await session.call_tool("plan", {"query": "How many snow days were there at latitude 52.5 longitude 13.4 since 2022-09-01?", "max_steps": 3})
    check(not attr(plan, "isError") and attr(plan, "structuredContent")["steps"], f"plan proposes steps: {text_of(plan)}")

    try:
        r = await session.call_tool("no_such_tool_anywhere", {})
        check(False, f"an unknown tool is a protocol error, got {r}")
    except Exception as e:  # McpError in both SDKs
        check("unknown tool" in str(e), f"the error names the problem: {e}")
    return init


async def exercise_stateless(client):
    """A 2026-07-28 client: no session, so no session tools; it calls what it found by name."""
    check(client.session.protocol_version == "2026-07-28", f"protocol {client.session.protocol_version}")
    tools, _ = await all_tools(client.session)
    check(sorted(t.name for t in tools) == ["call_api", "plan", "search_tools"], f"the fixed tools: {[t.name for t in tools]}")
    found = await client.call_tool("search_tools", {"query": "number of snow days at a location since a date (ecoweather Schneetage)", "k": 5})
    results = attr(found, "structuredContent")["results"]
    check(any(r["name"] == SNOW for r in results), f"{SNOW} found: {[r['name'] for r in results]}")
    direct = await client.call_tool(SNOW, SNOW_ARGS)
    check(not attr(direct, "isError") and "days with snow" in text_of(direct), f"called by name: {text_of(direct)}")
    via = await client.call_tool("call_api", {"name": SNOW, "arguments": SNOW_ARGS})
    check(not attr(via, "isError") and "days with snow" in text_of(via), f"call_api answers: {text_of(via)}")
    bad = await client.call_tool(SNOW, {"lat": "north"})
    check(attr(bad, "isError") and "/lat" in text_of(bad), f"bad arguments are an isError result: {text_of(bad)}")
    tools, _ = await all_tools(client.session)
    check(len(tools) == 3, f"tools/list does not grow without a session: {[t.name for t in tools]}")


async def main():
    mode, target = sys.argv[1], sys.argv[2]
    key = sys.argv[3] if len(sys.argv) > 3 else None
    changed = []

    async def on_message(message):
        kind = getattr(getattr(message, "root", message), "method", None)
        if kind == "notifications/tools/list_changed":
            changed.append(True)

    async with AsyncExitStack() as stack:
        if mode == "discover":
            from mcp import Client

            client = await stack.enter_async_context(Client(http_transport(target, key), message_handler=on_message))
            await exercise_stateless(client)
            print(f"ok (server/discover, protocol {client.session.protocol_version}, no session)")
            return
        if mode == "stdio":
            params = StdioServerParameters(command=target, args=["mcp"], env=dict(os.environ))
            streams = await stack.enter_async_context(stdio_client(params))
        else:
            streams = await stack.enter_async_context(http_transport(target, key))
        session = await stack.enter_async_context(ClientSession(streams[0], streams[1], message_handler=on_message))
        init = await session.initialize()
        check(attr(init, "serverInfo").name == "toolrouter", f"serverInfo names toolrouter: {attr(init, 'serverInfo')}")
        check(attr(init, "protocolVersion") in ("2025-06-18", "2025-11-25"), f"protocol {attr(init, 'protocolVersion')}")
        await exercise(session, changed)
        print(f"ok (mcp {importlib.metadata.version('mcp')}, {mode}, protocol {attr(init, 'protocolVersion')})")


if __name__ == "__main__":
    asyncio.run(main())
