"""Drives toolrouter's tool search with the official `openai` SDK, against
the scripted model server (which searches when the tool it needs is not
offered, then calls what it found):

- chat completions with `"defer_loading": true` beside `function`, plain and
  streamed; the search shows in the `toolrouter` report; a second turn keeps
  the tool it called loaded;
- the Responses API with `{"type": "tool_search"}`, deferred functions and a
  namespace: `tool_search_call` / `tool_search_output` items then the
  `function_call`, streamed and not; a second turn (`previous_response_id`)
  keeps the found tools; the client-executed form (`execution: "client"`);
- LangChain's `ChatOpenAI` (chat completions and the Responses API);
- route mode offering the search over the tools it narrowed out
  (`toolrouter.tool_search`);
- the tools block of consecutive model requests only grows;
- bad input: `tool_search` itself deferred, a client tool named
  `tool_search`, a model that searches forever (stopped, reported).

    python tool_search_check.py TOOLROUTER_URL SCRIPTED_MODEL_URL API_KEY
"""

import json
import sys

import httpx
import openai
from openai import OpenAI

from checking import check, user

base, model_url, key = sys.argv[1], sys.argv[2], sys.argv[3]
client = OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
MODEL = "scripted"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
FILLER = [(f"sheet_{i}", f"Does task number {i} on spreadsheets") for i in range(40)]


def seen():
    return httpx.get(f"{model_url}/seen").json()


def grows(requests):
    """Each request's tools start with the previous request's."""
    offered = [r["tools"] for r in requests]
    return all(b[: len(a)] == a for a, b in zip(offered, offered[1:])), offered


# Chat completions: deferred tools beside one loaded tool.
def chat_tool(name, description, deferred, parameters=None):
    tool = {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": parameters or {"type": "object", "properties": {}}}}
    if deferred:
        tool["defer_loading"] = True
    return tool


tools = [chat_tool("sum_column", "Sum a spreadsheet column", False)]
tools += [chat_tool(n, d, True) for n, d in FILLER] + [chat_tool("get_weather", "Current weather for a city", True, SCHEMA)]
before = len(seen())
r = client.chat.completions.create(model=MODEL, messages=user("Weather in Berlin?"), tools=tools)
calls = r.choices[0].message.tool_calls
check(calls and calls[0].function.name == "get_weather" and json.loads(calls[0].function.arguments) == {"city": "Berlin"},
      f"chat: the found tool called: {r}")
report = r.model_extra["toolrouter"]["tool_search"]
check(report["turns"] == 1 and report["rounds"][0]["query"] == "current weather for a city"
      and "get_weather" in report["rounds"][0]["found"] and report["searchable"] == 41, f"chat report: {report}")
requests = seen()[before:]
ok, offered = grows(requests)
check(len(requests) == 2 and offered[0] == ["tool_search", "sum_column"] and "get_weather" in offered[1] and ok,
      f"chat: the tools block only grows: {offered}")
check(r.usage.total_tokens == 30, f"both requests' tokens: {r.usage}")

# Streamed: the search before the call's deltas, the report on the last chunk.
chunks = list(client.chat.completions.create(model=MODEL, messages=user("Weather in Berlin, streamed?"), tools=tools,
                                             stream=True))
names = [c.function.name for ch in chunks for choice in ch.choices for c in (choice.delta.tool_calls or []) if c.function.name]
last = next(ch for ch in reversed(chunks) if ch.model_extra.get("toolrouter"))
check(names == ["get_weather"] and last.model_extra["toolrouter"]["tool_search"]["turns"] == 1, f"chat streamed: {names} {last}")

# A second turn: what the first turn's search loaded is offered from the start, as
# the first turn's last request offered it (the client never saw the search).
turns = user("Weather in Berlin?") + [r.choices[0].message.model_dump(exclude_none=True),
                                      {"role": "tool", "tool_call_id": calls[0].id, "content": "Sunny, 21 C"}]
before = len(seen())
r2 = client.chat.completions.create(model=MODEL, messages=turns, tools=tools)
check("Sunny, 21 C" in r2.choices[0].message.content, f"chat second turn: {r2}")
check(seen()[before:][0]["tools"] == offered[-1], f"loaded on turn two: {seen()[before:]} after {offered[-1]}")

# LangChain's ChatOpenAI passes `defer_loading` through in OpenAI-shaped tool dicts.
from langchain_openai import ChatOpenAI

lc = ChatOpenAI(model=MODEL, base_url=f"{base}/v1", api_key=key, max_retries=0).bind_tools(tools)
ai = lc.invoke("Weather in Berlin?")
check([c["name"] for c in ai.tool_calls] == ["get_weather"] and ai.tool_calls[0]["args"] == {"city": "Berlin"},
      f"langchain: {ai}")
lc = ChatOpenAI(model=MODEL, base_url=f"{base}/v1", api_key=key, max_retries=0, use_responses_api=True)
ai = lc.bind_tools([{"type": "tool_search"}, {"type": "function", "name": "get_weather", "description": "Current weather",
                     "parameters": SCHEMA, "defer_loading": True}]).invoke("Weather in Berlin?")
check([c["name"] for c in ai.tool_calls] == ["get_weather"], f"langchain, Responses API: {ai}")

# Route mode may offer the search over what it narrowed out.
many = [chat_tool(n, d, False) for n, d in FILLER]
before = len(seen())
asking = [{"role": "system", "content": "search-query:sheet_33"}] + user("Please help")
r = client.chat.completions.create(model=MODEL, messages=asking, tools=many,
                                   extra_body={"toolrouter": {"tool_search": True}})
first = seen()[before]["tools"]
check(first[0] == "tool_search" and len(first) == 21 and "sheet_33" not in first, f"narrowed, with the search: {first}")
check(r.model_extra["toolrouter"]["tool_search"]["rounds"][0]["query"] == "sheet_33", f"searched: {r.model_extra}")
calls = r.choices[0].message.tool_calls
check(calls and calls[0].function.name == "sheet_33", f"route mode reached a tool it narrowed out: {r}")

# The Responses API: the hosted tool search over deferred functions and a namespace.
def function(name, description, deferred=True, parameters=None):
    tool = {"type": "function", "name": name, "description": description,
            "parameters": parameters or {"type": "object", "properties": {}}}
    if deferred:
        tool["defer_loading"] = True
    return tool


CRM = {"type": "namespace", "name": "crm", "description": "Customer records",
       "tools": [function("list_open_orders", "List the open orders of a customer")]}
rtools = [{"type": "tool_search"}] + [function(n, d) for n, d in FILLER] + [
    function("get_weather", "Current weather for a city", parameters=SCHEMA), CRM]
resp = client.responses.create(model=MODEL, input="Weather in Berlin?", tools=rtools)
kinds = [o.type for o in resp.output]
check(kinds == ["tool_search_call", "tool_search_output", "function_call"], f"responses items: {kinds}")
call, output, fc = resp.output
check(call.execution == "server" and call.arguments == {"query": "current weather for a city"} and call.status == "completed",
      f"tool_search_call: {call}")
loaded = [t.name for t in output.tools]
check("get_weather" in loaded and output.call_id == call.call_id, f"tool_search_output: {output}")
weather_def = next(t for t in output.tools if t.name == "get_weather")
check(weather_def.parameters == SCHEMA, f"the tool as the request defined it: {weather_def}")
check(fc.name == "get_weather" and json.loads(fc.arguments) == {"city": "Berlin"}, f"function_call: {fc}")

# Its second turn keeps what the search loaded: no search, the tool offered.
before = len(seen())
resp2 = client.responses.create(model=MODEL, previous_response_id=resp.id, tools=rtools,
                                input=[{"type": "function_call_output", "call_id": fc.call_id, "output": "Sunny, 21 C"}])
check("Sunny, 21 C" in resp2.output_text, f"responses second turn: {resp2}")
offered = seen()[before]["tools"]
check("get_weather" in offered and offered[0] == "tool_search", f"responses: loaded on turn two: {offered}")
check(resp2.model_extra["toolrouter"]["tool_search"]["turns"] == 0, f"no new search: {resp2.model_extra['toolrouter']}")

# A namespace's function, found and called with its namespace.
resp = client.responses.create(model=MODEL, input="My open orders? search-query:orders", tools=rtools)
fc = resp.output[-1]
check(fc.type == "function_call" and fc.namespace == "crm" and fc.name == "list_open_orders",
      f"namespaced call: {resp.output}")
found = resp.output[1].tools
check(any(t.type == "namespace" and t.name == "crm" for t in found), f"the namespace in the output: {found}")

# Streamed: the search items are added and done before the call.
events = list(client.responses.create(model=MODEL, input="Weather in Berlin, streamed?", tools=rtools, stream=True))
added = [e.item.type for e in events if e.type == "response.output_item.added"]
done = next(e for e in events if e.type == "response.completed").response
check(added == ["tool_search_call", "tool_search_output", "function_call"], f"streamed items: {added}")
check([o.type for o in done.output] == added, f"completed response: {done.output}")
with client.responses.stream(model=MODEL, input="Weather in Berlin, by the helper?", tools=rtools) as stream:
    final = stream.get_final_response()
check(final.output[-1].name == "get_weather", f"stream helper: {final.output}")

# The client-executed form: the model's search goes back to the client.
GOAL = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
ctools = [{"type": "tool_search", "execution": "client", "description": "Find tools", "parameters": GOAL},
          function("get_weather", "Current weather for a city", parameters=SCHEMA)]
before = len(seen())
resp = client.responses.create(model=MODEL, input="Weather in Berlin?", tools=ctools)
item = resp.output[-1]
check(item.type == "tool_search_call" and item.execution == "client" and item.call_id
      and item.arguments == {"query": "current weather for a city"}, f"client search call: {resp.output}")
check(seen()[before]["tools"] == ["tool_search"], f"deferred tools wait for the client's search: {seen()[before]}")
answer = {"type": "tool_search_output", "execution": "client", "call_id": item.call_id, "status": "completed",
          "tools": [function("get_weather", "Current weather for a city", parameters=SCHEMA)]}
resp = client.responses.create(model=MODEL, tools=ctools, input=[
    {"role": "user", "content": "Weather in Berlin?"}, item.model_dump(exclude_none=True), answer])
check(resp.output[-1].type == "function_call" and resp.output[-1].name == "get_weather", f"after the client's search: {resp.output}")

# Bad input: clear errors in the face's shape.
try:
    client.responses.create(model=MODEL, input="x", tools=[{"type": "tool_search", "defer_loading": True}])
    check(False, "a deferred tool_search was accepted")
except openai.BadRequestError as e:
    check("cannot be deferred" in e.message and e.body.get("param") == "tools", f"deferred search: {e.body}")
try:
    client.chat.completions.create(model=MODEL, messages=user("x"),
                                   tools=[chat_tool("tool_search", "mine", False), chat_tool("a", "b", True)])
    check(False, "a client tool named tool_search was accepted")
except openai.BadRequestError as e:
    check("toolrouter's tool search" in e.message and "tools[0]" in (e.body.get("param") or ""), f"name clash: {e.body}")
try:
    client.chat.completions.create(model=MODEL, messages=user("x"),
                                   tools=[chat_tool("get_weather", "a", False), chat_tool("get_weather", "b", True)])
    check(False, "a deferred tool named as a loaded one was accepted")
except openai.BadRequestError as e:
    check("two tools are named `get_weather`" in e.message and e.body.get("param") == "tools[1].function.name", f"dup: {e.body}")
try:
    client.chat.completions.create(model=MODEL, messages=user("x"), tools=tools, extra_body={"toolrouter": {"tool_search": "bm25"}})
    check(False, "a wrong tool_search option was accepted")
except openai.BadRequestError as e:
    check(e.body.get("param") == "toolrouter.tool_search", f"option: {e.body}")

# A model that searches forever is stopped after openai.tool_search_rounds and asked without the search.
before = len(seen())
r = client.chat.completions.create(model=MODEL, messages=user("Weather in Berlin? search-forever"), tools=tools)
report = r.model_extra["toolrouter"]["tool_search"]
requests = seen()[before:]
check(report["turns"] == 3 and report["stopped"] == "openai.tool_search_rounds" and len(requests) == 4
      and "tool_search" not in requests[-1]["tools"], f"bounded: {report} {[q['tools'][:2] for q in requests]}")
check(r.choices[0].message.tool_calls[0].function.name == "get_weather", f"then answered: {r}")

print("ok")
