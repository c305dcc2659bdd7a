"""Drives toolrouter's tool search on the Messages face with the official
`anthropic` SDK, against the scripted model server: each of the two tool
search tools (BM25 and regex) with deferred tools, plain and streamed
(raw events and the stream helper); the `server_tool_use` and
`tool_search_tool_result` blocks, sent back on a second turn, keep the
found tool loaded; a pattern that does not compile is an error block the
model reads; a deferred search tool is refused in Anthropic's shape.

    python anthropic_tool_search_check.py TOOLROUTER_URL SCRIPTED_MODEL_URL API_KEY
"""

import sys

import anthropic
import httpx

from checking import check, user

base, model_url, key = sys.argv[1], sys.argv[2], sys.argv[3]
client = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0)
MODEL = "scripted"
BETA = {"anthropic-beta": "advanced-tool-use-2025-11-20"}
WEATHER = {"name": "get_weather", "description": "Current weather for a city", "defer_loading": True,
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
FILLER = [{"name": f"sheet_{i}", "description": f"Does task number {i} on spreadsheets", "defer_loading": True,
           "input_schema": {"type": "object"}} for i in range(40)]
BM25 = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
REGEX = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}


def seen():
    return httpx.get(f"{model_url}/seen").json()


for tool, query, asked in [(BM25, "Weather in Berlin?", {"query": "current weather for a city"}),
                           (REGEX, "Weather in Berlin? search-query:weath.r", {"pattern": "weath.r"})]:
    m = client.messages.create(model=MODEL, max_tokens=100, messages=user(query), tools=[tool] + FILLER + [WEATHER],
                               extra_headers=BETA)
    kinds = [b.type for b in m.content]
    check(kinds == ["server_tool_use", "tool_search_tool_result", "tool_use"], f"{tool['name']}: {kinds}")
    use, result, call = m.content
    check(use.name == tool["name"] and use.id.startswith("srvtoolu_") and use.input == asked, f"server_tool_use: {use}")
    names = [r.tool_name for r in result.content.tool_references]
    check(result.tool_use_id == use.id and "get_weather" in names, f"tool_search_tool_result: {result}")
    check(call.name == "get_weather" and call.input == {"city": "Berlin"} and m.stop_reason == "tool_use", f"tool_use: {call}")

    # The second turn: the blocks sent back load the tool; no search.
    before = len(seen())
    turns = user(query) + [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "Sunny, 21 C"}]}]
    m2 = client.messages.create(model=MODEL, max_tokens=100, messages=turns, tools=[tool] + FILLER + [WEATHER])
    check("Sunny, 21 C" in m2.content[-1].text, f"second turn: {m2}")
    offered = seen()[before]["tools"]
    check(offered[0] == "tool_search" and "get_weather" in offered, f"loaded on turn two: {offered}")
    check(m2.model_extra["toolrouter"]["tool_search"]["turns"] == 0, f"no new search: {m2.model_extra}")

# Streamed: raw events, then the stream helper's final message.
events = list(client.messages.create(model=MODEL, max_tokens=100, messages=user("Weather in Berlin, streamed?"),
                                     tools=[BM25] + FILLER + [WEATHER], stream=True))
starts = [e.content_block.type for e in events if e.type == "content_block_start"]
check(starts == ["server_tool_use", "tool_search_tool_result", "tool_use"], f"streamed blocks: {starts}")
with client.messages.stream(model=MODEL, max_tokens=100, messages=user("Weather in Berlin, by the helper?"),
                            tools=[BM25] + FILLER + [WEATHER]) as stream:
    final = stream.get_final_message()
check([b.type for b in final.content] == starts and final.content[0].input == {"query": "current weather for a city"},
      f"stream helper: {final.content}")

# A pattern that does not compile: an error block, the model answers without a tool.
m = client.messages.create(model=MODEL, max_tokens=100, messages=user("Weather? search-query:(("),
                           tools=[REGEX] + FILLER + [WEATHER])
result = m.content[1]
check(result.type == "tool_search_tool_result" and result.content.type == "tool_search_tool_result_error"
      and result.content.error_code == "invalid_pattern", f"bad pattern: {m.content}")
check(m.content[-1].type == "text", f"answered: {m.content}")

# A deferred search tool: refused in Anthropic's error shape.
try:
    client.messages.create(model=MODEL, max_tokens=100, messages=user("x"), tools=[{**BM25, "defer_loading": True}, WEATHER])
    check(False, "a deferred search tool was accepted")
except anthropic.BadRequestError as e:
    check(e.body["error"]["type"] == "invalid_request_error" and "cannot be deferred" in e.body["error"]["message"], f"{e.body}")

print("ok")
