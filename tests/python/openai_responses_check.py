"""Drives toolrouter's Responses API face (`POST /v1/responses`) with the
official `openai` SDK and LangChain's `ChatOpenAI(use_responses_api=True)`,
against the scripted model server: plain, streamed (raw events and the
stream helper), a tool round trip with input items, 300 tools narrowed,
a repaired call, plan mode, and what cannot be carried refused clearly.

    python openai_responses_check.py TOOLROUTER_URL SCRIPTED_MODEL_URL API_KEY
"""

import json
import sys

import httpx
import openai
from openai import OpenAI

from checking import check

base, model_url, key = sys.argv[1], sys.argv[2], sys.argv[3]
client = OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
MODEL = "scripted"
HELLO = "Hello from the scripted model."
WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def seen():
    return httpx.get(f"{model_url}/seen").json()


# Plain, with instructions and usage.
r = client.responses.create(model=MODEL, input="hello", instructions="Be brief.")
check(r.output_text == HELLO and r.status == "completed" and r.id.startswith("resp_"), f"plain: {r}")
check(r.usage.total_tokens == 15 and r.usage.input_tokens + r.usage.output_tokens == 15, f"usage: {r.usage}")
sent = seen()[-1]
check(sent["first"] == {"role": "system", "text": "Be brief."}, f"instructions as the system message: {sent}")

# Streamed: the raw events, in order, numbered.
events = list(client.responses.create(model=MODEL, input="hello", stream=True))
kinds = [e.type for e in events]
check(kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed", f"events: {kinds}")
check([e.sequence_number for e in events] == list(range(len(events))), "sequence numbers count up")
text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
check(text == HELLO and len([k for k in kinds if k == "response.output_text.delta"]) >= 2, f"streamed text: {text!r}")
check(events[-1].response.output_text == HELLO and events[-1].response.usage.total_tokens == 15, f"completed: {events[-1]}")

# The stream helper, with a tool call.
with client.responses.stream(model=MODEL, input="Weather in Berlin?", tools=[WEATHER]) as stream:
    final = stream.get_final_response()
calls = [o for o in final.output if o.type == "function_call"]
check(len(calls) == 1 and calls[0].name == "get_weather" and json.loads(calls[0].arguments) == {"city": "Berlin"}, f"stream helper: {final}")

# A tool round trip with input items: the call, then its output.
r = client.responses.create(model=MODEL, input="Weather in Berlin?", tools=[WEATHER])
call = next(o for o in r.output if o.type == "function_call")
check(call.call_id and json.loads(call.arguments) == {"city": "Berlin"}, f"tool call: {r.output}")
items = [{"role": "user", "content": "Weather in Berlin?"}, call.model_dump(exclude_none=True),
         {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 C"}]
r = client.responses.create(model=MODEL, input=items, tools=[WEATHER])
check("Sunny, 21 C" in r.output_text, f"second turn: {r.output_text!r}")
sent = seen()[-1]
check(sent["roles"] == ["user", "assistant", "tool"] and sent["last"] == "Sunny, 21 C", f"the items as chat messages: {sent}")

# 300 tools: the model sees at most max_tools (20), the relevant one among them.
tools = [{"type": "function", "name": f"tool_{i}", "description": f"Does task number {i} on spreadsheets",
          "parameters": {"type": "object", "properties": {}}} for i in range(299)] + [WEATHER]
r = client.responses.create(model=MODEL, input="What is the current weather in Berlin?", tools=tools)
offered = seen()[-1]["tools"]
check(len(offered) <= 20 and "get_weather" in offered, f"{len(offered)} tools offered: {offered}")
check(r.output[0].type == "function_call" and r.output[0].name == "get_weather", f"narrowed: {r.output}")

# Invalid arguments are repaired through the model, as on chat completions.
r = client.responses.with_raw_response.create(model=MODEL, input="invalid-then-valid weather", tools=[WEATHER])
body = json.loads(r.text)
call = next(o for o in body["output"] if o["type"] == "function_call")
check(json.loads(call["arguments"]) == {"city": "Berlin"} and body["toolrouter"]["repairs"] == 1, f"repaired: {body}")

# Plan mode: catalog APIs offered, one called.
r = client.responses.with_raw_response.create(model=MODEL, input="Open-Meteo weather forecast for Berlin, latitude and longitude",
                                              extra_body={"toolrouter": {"mode": "plan"}})
body = json.loads(r.text)
call = next((o for o in body["output"] if o["type"] == "function_call"), None)
check(body["toolrouter"]["mode"] == "plan" and call and call["name"] == "weather_forecast_for_open_meteo_forecast", f"plan mode: {body}")

# Execute mode: toolrouter calls the replay upstream and answers; streamed too.
SNOW = "How many ecoweather Schneetage snow days at lat 789.012 lon 123.456 since 2022-09-01?"
r = client.responses.with_raw_response.create(model=MODEL, input=SNOW, extra_body={"toolrouter": {"mode": "execute"}}, timeout=60)
body = json.loads(r.text)
text = body["output"][0]["content"][0]["text"]
check(body["toolrouter"]["status"] == "answered" and "days with snow" in text, f"execute: {body}")
events = list(client.responses.create(model=MODEL, input=SNOW, stream=True, extra_body={"toolrouter": {"mode": "execute"}}, timeout=60))
text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
check(events[-1].type == "response.completed" and "days with snow" in text, f"streamed execute: {[e.type for e in events]} {text!r}")

# What cannot be carried is refused, in OpenAI's error shape.
headers = {"Authorization": f"Bearer {key}"}
for payload, says in [
    ({"model": MODEL, "input": "x", "conversation": "conv_1"}, "conversation"),
    ({"model": MODEL, "input": "x", "tools": [{"type": "web_search"}]}, "web_search"),
    ({"model": MODEL}, "`input` is required"),
    ({"model": MODEL, "input": [{"type": "computer_call"}]}, "computer_call"),
]:
    r = httpx.post(f"{base}/v1/responses", json=payload, headers=headers)
    check(r.status_code == 400 and says in r.json()["error"]["message"], f"{payload}: {r.status_code} {r.text}")
r = httpx.post(f"{base}/v1/responses", json={"model": MODEL, "input": "x", "previous_response_id": "resp_1"}, headers=headers)
check(r.status_code == 404 and r.json()["error"]["code"] == "previous_response_not_found", f"unknown previous: {r.text}")
r = httpx.post(f"{base}/v1/responses", content=b"{oops", headers=headers)
check(r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", f"malformed JSON: {r.text}")
try:
    OpenAI(base_url=f"{base}/v1", api_key="wrong", max_retries=0).responses.create(model=MODEL, input="x")
    check(False, "a wrong key must fail")
except openai.AuthenticationError as e:
    check(e.status_code == 401, f"{e}")

# The models, as OpenAI's SDK reads them (the same route Anthropic's SDK reads).
check([m.id for m in client.models.list().data] == ["scripted"], "models")
check(client.models.retrieve("scripted").owned_by, "one model")

# LangChain over the Responses API.
from langchain_openai import ChatOpenAI

llm = ChatOpenAI(base_url=f"{base}/v1", api_key=key, model=MODEL, max_retries=0, use_responses_api=True)
msg = llm.bind_tools([WEATHER]).invoke("Weather in Berlin?")
check(msg.tool_calls and msg.tool_calls[0]["name"] == "get_weather" and msg.tool_calls[0]["args"] == {"city": "Berlin"}, f"langchain tool call: {msg}")
streamed = "".join(c.text() if callable(getattr(c, "text", None)) else str(c.content) for c in llm.stream("hello"))
check(streamed == HELLO, f"langchain stream: {streamed!r}")
print("ok (openai", openai.__version__ + ", responses)")
