"""Drives toolrouter's Anthropic face (`POST /v1/messages`) with the
official `anthropic` SDK, against the scripted model server: plain,
streamed (raw events and the stream helper), a tool round trip with
`tool_use` and `tool_result` blocks, 300 tools narrowed, plan mode, keys
as `x-api-key`, errors in Anthropic's shape; LangChain's `ChatAnthropic`
with a bound tool.

    python anthropic_check.py TOOLROUTER_URL SCRIPTED_MODEL_URL API_KEY
"""

import json
import sys

import anthropic
import httpx

from checking import check

base, model_url, key = sys.argv[1], sys.argv[2], sys.argv[3]
client = anthropic.Anthropic(base_url=base, api_key=key, max_retries=0)
MODEL = "scripted"
HELLO = "Hello from the scripted model."
WEATHER = {"name": "get_weather", "description": "Current weather for a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def seen():
    return httpx.get(f"{model_url}/seen").json()


def user(text):
    return [{"role": "user", "content": text}]


# Plain, with a system prompt (the SDK sends the key as x-api-key).
m = client.messages.create(model=MODEL, max_tokens=100, system="Be brief.", messages=user("hello"))
check(m.content[0].type == "text" and m.content[0].text == HELLO and m.stop_reason == "end_turn", f"plain: {m}")
check(m.usage.input_tokens + m.usage.output_tokens == 15, f"usage: {m.usage}")
check(seen()[-1]["first"] == {"role": "system", "text": "Be brief."}, f"system: {seen()[-1]}")

# Streamed: the raw events.
events = list(client.messages.create(model=MODEL, max_tokens=100, messages=user("hello"), stream=True))
kinds = [e.type for e in events]
check(kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"], f"events: {kinds}")
text = "".join(e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta")
check(text == HELLO, f"streamed text: {text!r}")

# The stream helper, with a tool call; then the round trip.
with client.messages.stream(model=MODEL, max_tokens=100, messages=user("Weather in Berlin?"), tools=[WEATHER]) as stream:
    final = stream.get_final_message()
calls = [b for b in final.content if b.type == "tool_use"]
check(final.stop_reason == "tool_use" and len(calls) == 1 and calls[0].name == "get_weather" and calls[0].input == {"city": "Berlin"},
      f"stream helper: {final}")
turns = user("Weather in Berlin?") + [
    {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0].id, "content": "Sunny, 21 C"}]}]
m = client.messages.create(model=MODEL, max_tokens=100, messages=turns, tools=[WEATHER])
check("Sunny, 21 C" in m.content[0].text, f"second turn: {m}")
check(seen()[-1]["roles"] == ["user", "assistant", "tool"], f"the blocks as chat messages: {seen()[-1]}")

# 300 tools: the model sees at most max_tools (20), the relevant one among them.
tools = [{"name": f"tool_{i}", "description": f"Does task number {i} on spreadsheets", "input_schema": {"type": "object"}}
         for i in range(299)] + [WEATHER]
m = client.messages.create(model=MODEL, max_tokens=100, messages=user("What is the current weather in Berlin?"), tools=tools)
offered = seen()[-1]["tools"]
check(len(offered) <= 20 and "get_weather" in offered, f"{len(offered)} tools offered: {offered}")
check(m.content[-1].type == "tool_use" and m.content[-1].name == "get_weather", f"narrowed: {m}")

# Plan mode: a catalog API offered and called.
r = client.messages.with_raw_response.create(model=MODEL, max_tokens=100,
    messages=user("Open-Meteo weather forecast for Berlin, latitude and longitude"), extra_body={"toolrouter": {"mode": "plan"}})
body = json.loads(r.http_response.text)
call = next((b for b in body["content"] if b["type"] == "tool_use"), None)
check(body["toolrouter"]["mode"] == "plan" and call and call["name"] == "weather_forecast_for_open_meteo_forecast", f"plan: {body}")

# Execute mode: toolrouter calls the replay upstream and answers; streamed too.
SNOW = "How many ecoweather Schneetage snow days at lat 789.012 lon 123.456 since 2022-09-01?"
execute = {"toolrouter": {"mode": "execute"}}
m = client.messages.create(model=MODEL, max_tokens=500, messages=user(SNOW), extra_body=execute, timeout=60)
check("days with snow" in m.content[0].text and m.stop_reason == "end_turn", f"execute: {m}")
with client.messages.stream(model=MODEL, max_tokens=500, messages=user(SNOW), extra_body=execute, timeout=60) as stream:
    text = "".join(stream.text_stream)
check("days with snow" in text, f"streamed execute: {text!r}")

# Errors in Anthropic's shape, the middleware's too.
headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
for payload, says in [
    ({"model": MODEL, "messages": user("x")}, "max_tokens"),
    ({"model": MODEL, "max_tokens": 10, "messages": user("x"), "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "web_search"),
]:
    r = httpx.post(f"{base}/v1/messages", json=payload, headers=headers)
    body = r.json()
    check(r.status_code == 400 and body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
          and says in body["error"]["message"], f"{payload}: {r.status_code} {r.text}")
try:
    anthropic.Anthropic(base_url=base, api_key="wrong", max_retries=0).messages.create(model=MODEL, max_tokens=10, messages=user("x"))
    check(False, "a wrong key must fail")
except anthropic.AuthenticationError as e:
    check(e.status_code == 401 and e.body["error"]["type"] == "authentication_error", f"{e.body}")
try:
    client.messages.count_tokens(model=MODEL, messages=user("x"))
    check(False, "count_tokens is refused")
except anthropic.BadRequestError as e:
    check("count_tokens is not served" in str(e), f"{e}")
# The models, as Anthropic's SDK reads them (the same route OpenAI's SDK reads).
models = client.models.list()
check([m.id for m in models.data] == ["scripted"] and models.data[0].type == "model", f"models: {models}")
check(client.models.retrieve("scripted").display_name == "scripted", "one model")
try:
    client.models.retrieve("no-such-model")
    check(False, "an unknown model must be 404")
except anthropic.NotFoundError:
    pass

# LangChain's ChatAnthropic with a bound tool: the call, its result, the answer; streamed.
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage, ToolMessage

llm = ChatAnthropic(base_url=base, api_key=key, model=MODEL, max_retries=0, max_tokens=100)
bound = llm.bind_tools([WEATHER])
asked = HumanMessage("Weather in Berlin?")
msg = bound.invoke([asked])
check(msg.tool_calls and msg.tool_calls[0]["name"] == "get_weather" and msg.tool_calls[0]["args"] == {"city": "Berlin"},
      f"langchain tool call: {msg}")
done = bound.invoke([asked, msg, ToolMessage("Sunny, 21 C", tool_call_id=msg.tool_calls[0]["id"])])
check("Sunny, 21 C" in done.text, f"langchain round trip: {done}")
streamed = "".join(c.text for c in llm.stream("hello"))
check(streamed == HELLO, f"langchain stream: {streamed!r}")
print("ok (anthropic", anthropic.__version__ + ", langchain ChatAnthropic)")
