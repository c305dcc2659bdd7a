"""A downstream MCP server over stdio, hand-written JSON-RPC (no SDK would
send this): `tools/list` lists one tool whose `inputSchema` is not an
object, then `good`, which echoes its `text`.
"""

import json
import sys

TOOLS = [
    {"name": "broken", "description": "Its schema is a string", "inputSchema": "not a schema"},
    {"name": "good", "description": "Echoes the text it is given",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
]

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, rid = message.get("method"), message["id"]
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "malformed", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        text = message["params"].get("arguments", {}).get("text", "")
        result = {"content": [{"type": "text", "text": text}]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}), flush=True)
