"""A downstream MCP server for toolrouter's federation tests, over stdio,
built on the official `mcp` SDK (1.x low-level server).

Its tools exercise what the public servers cannot be made to do on demand:
    echo {text}              -> the text
    add_tool {name, flood?, description?}
                             -> adds a tool named `name` and sends
                                notifications/tools/list_changed (`flood` times)
    remove_tool {name}       -> removes an added tool and sends list_changed
    hang {}                  -> never answers
    huge {bytes}             -> a text result of that many bytes
    stats {}                 -> {"list_calls": N, "pid": PID}
    bad_schema               -> listed with an input schema that cannot be used
                                (a pattern no engine compiles): called unchecked
The process writes its pid to $FIXTURE_PID_FILE when set (a test kills it);
started again while that file exists, it waits 3 s before it serves.
"""

import asyncio
import json
import os

import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server

server = Server("toolrouter-fixture", instructions="A fixture server for toolrouter's tests.")
added = {}  # name -> description
list_calls = 0

OBJECT = {"type": "object", "properties": {}}


def tool(name, description, schema=OBJECT):
    return types.Tool(name=name, description=description, inputSchema=schema)


@server.list_tools()
async def list_tools():
    global list_calls
    list_calls += 1
    return [
        tool("echo", "Echoes the text it is given", {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text to echo"}},
            "required": ["text"],
        }),
        tool("add_tool", "Adds a tool to this server and announces it", {
            "type": "object",
            "properties": {
                "name": {"type": "string"}, "flood": {"type": "integer"}, "description": {"type": "string"},
            },
            "required": ["name"],
        }),
        tool("remove_tool", "Removes a tool added at run time and announces it", {
            "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
        }),
        tool("hang", "Never answers"),
        tool("huge", "Answers with a text of the given size", {
            "type": "object", "properties": {"bytes": {"type": "integer"}}, "required": ["bytes"],
        }),
        tool("stats", "How often the tools were listed, and this process's pid"),
        tool("bad_schema", "Has an input schema that cannot be used", {
            "type": "object", "properties": {"a": {"type": "string", "pattern": "("}},
        }),
    ] + [tool(name, added[name]) for name in added]


@server.call_tool(validate_input=False)
async def call_tool(name, arguments):
    if name == "echo":
        return [types.TextContent(type="text", text=arguments["text"])]
    if name == "add_tool":
        name = arguments["name"]
        added[name] = arguments.get("description") or f"A tool added at run time: {name}"
        session = server.request_context.session
        for _ in range(int(arguments.get("flood", 1))):
            await session.send_tool_list_changed()
        return [types.TextContent(type="text", text=f"added {arguments['name']}")]
    if name == "remove_tool":
        added.pop(arguments["name"], None)
        await server.request_context.session.send_tool_list_changed()
        return [types.TextContent(type="text", text=f"removed {arguments['name']}")]
    if name == "bad_schema":
        return [types.TextContent(type="text", text="unchecked " + json.dumps(arguments, sort_keys=True))]
    if name == "hang":
        await asyncio.Event().wait()
    if name == "huge":
        return [types.TextContent(type="text", text="x" * int(arguments["bytes"]))]
    if name == "stats":
        return [types.TextContent(type="text", text=json.dumps({"list_calls": list_calls, "pid": os.getpid()}))]
    if name in added:
        return [types.TextContent(type="text", text=f"{name} ran")]
    raise ValueError(f"unknown tool {name}")


async def main():
    pid_file = os.environ.get("FIXTURE_PID_FILE")
    if pid_file:
        if os.path.exists(pid_file):
            # A restart after the test killed it: stay down a while, so the
            # test sees the server reported down before it is back.
            await asyncio.sleep(3)
        with open(pid_file, "w") as f:
            f.write(str(os.getpid()))
    async with stdio_server() as (read, write):
        options = server.create_initialization_options(notification_options=NotificationOptions(tools_changed=True))
        await server.run(read, write, options)


asyncio.run(main())
