"""Drives toolrouter's OpenAI face (route mode) with the official `openai`
SDK and `langchain-openai`, against the scripted model server.

    python openai_check.py TOOLROUTER_URL SCRIPTED_MODEL_URL API_KEY
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
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}



def seen():
    return httpx.get(f"{model_url}/seen").json()



# The model list is the upstream's (no openai.models map): pickers fill.
check([m.id for m in client.models.list()] == ["scripted"], f"models: {client.models.list()}")
# Readiness needs no key (a Kubernetes probe carries none).
check(httpx.get(f"{base}/readyz").status_code == 200, "readyz without a key")

# Plain.
r = client.chat.completions.create(model=MODEL, messages=user("hello"))
check(r.choices[0].message.content == "Hello from the scripted model.", f"plain: {r}")

# Streaming, with usage.
chunks = list(client.chat.completions.create(model=MODEL, messages=user("hello"), stream=True, stream_options={"include_usage": True}))
text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
check(text == "Hello from the scripted model.", f"streamed text: {text!r}")
check(chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 15, f"usage chunk: {chunks[-1]}")
check(seen()[-1]["stream"], "a streamed request streams from the model too")
check(len([c for c in chunks if c.choices and c.choices[0].delta.content]) >= 2, "content arrives in several deltas")

# The stream helper.
with client.chat.completions.stream(model=MODEL, messages=user("hello")) as stream:
    final = stream.get_final_completion()
check(final.choices[0].message.content == "Hello from the scripted model.", f"stream helper: {final}")

# A tool round trip: streamed tool-call deltas, then the result.
with client.chat.completions.stream(model=MODEL, messages=user("Weather in Berlin?"), tools=[WEATHER]) as stream:
    final = stream.get_final_completion()
call = final.choices[0].message.tool_calls[0]
check(call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Berlin"}, f"tool call: {call}")
messages = user("Weather in Berlin?") + [final.choices[0].message.model_dump(exclude_none=True),
    {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C"}]
r = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER])
check("Sunny, 21 C" in r.choices[0].message.content, f"second turn: {r}")

# 300 tools: the model sees at most max_tools (20), the relevant one among them.
tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": f"Does task number {i} on spreadsheets",
          "parameters": {"type": "object", "properties": {}}}} for i in range(299)] + [WEATHER]
r = client.chat.completions.create(model=MODEL, messages=user("What is the current weather in Berlin?"), tools=tools)
offered = seen()[-1]["tools"]
check(len(offered) <= 20 and "get_weather" in offered, f"{len(offered)} tools offered: {offered}")
check(r.choices[0].message.tool_calls[0].function.name == "get_weather", f"the model called what it was offered: {r}")

# A streamed call with invalid arguments is repaired before its deltas go out.
with client.chat.completions.stream(model=MODEL, messages=user("invalid-then-valid weather"), tools=[WEATHER]) as stream:
    final = stream.get_final_completion()
check(json.loads(final.choices[0].message.tool_calls[0].function.arguments) == {"city": "Berlin"}, f"streamed repair: {final}")

# Invalid arguments are repaired through the model.
r = client.chat.completions.with_raw_response.create(model=MODEL, messages=user("invalid-then-valid weather"), tools=[WEATHER])
body = json.loads(r.text)
check(json.loads(body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) == {"city": "Berlin"}, f"repaired: {body}")
check(body["toolrouter"]["repairs"] == 1, f"one repair: {body['toolrouter']}")

# ... and when the model never fixes them, the client gets a clear error.
try:
    client.chat.completions.create(model=MODEL, messages=user("always-invalid weather"), tools=[WEATHER])
    check(False, "never-valid arguments must fail")
except openai.APIStatusError as e:
    check(e.status_code == 502 and "stayed invalid" in e.message, f"{e.status_code}: {e.message}")

# Bad requests, in OpenAI's error shape.
for payload, status, param in [
    ({"model": MODEL, "messages": []}, 400, "messages"),
    ({"messages": user("x")}, 400, "model"),
    ({"model": MODEL, "messages": user("x"), "tools": [WEATHER, WEATHER]}, 400, "tools[1].function.name"),
    ({"model": MODEL, "messages": user("x"), "tools": [{"type": "function", "function": {"name": "f", "parameters": "string"}}]}, 400, "tools[0].function.parameters"),
]:
    r = httpx.post(f"{base}/v1/chat/completions", json=payload, headers={"Authorization": f"Bearer {key}"})
    check(r.status_code == status and r.json()["error"]["param"] == param, f"{payload}: {r.status_code} {r.text}")
r = httpx.post(f"{base}/v1/chat/completions", content=b"{oops", headers={"Authorization": f"Bearer {key}"})
check(r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error", f"malformed JSON: {r.text}")
try:
    OpenAI(base_url=f"{base}/v1", api_key="wrong", max_retries=0).chat.completions.create(model=MODEL, messages=user("x"))
    check(False, "a wrong key must fail")
except openai.AuthenticationError as e:
    check(e.status_code == 401, f"{e}")

# Plan mode: catalog APIs chosen by the planner are offered; the client calls them through /v1/tools/call.
r = client.chat.completions.with_raw_response.create(model=MODEL, messages=user("Open-Meteo weather forecast for Berlin, latitude and longitude"),
    extra_body={"toolrouter": {"mode": "plan"}})
body = json.loads(r.text)
check(body["toolrouter"]["mode"] == "plan" and body["toolrouter"]["plan"], f"plan mode: {body.get('toolrouter')}")
check("toolrouter" not in json.dumps(seen()[-1]), "toolrouter's options never reach the model")
call = body["choices"][0]["message"]["tool_calls"][0]["function"]
check(call["name"] == "weather_forecast_for_open_meteo_forecast", f"a catalog API was offered and called: {call}")
headers = {"Authorization": f"Bearer {key}"}
r = httpx.post(f"{base}/v1/tools/call", json={"name": "schneetage_for_ecoweather",
    "arguments": {"is_from": "2022-09-01", "lon": 123.456, "lat": 789.012}}, headers=headers, timeout=30)
check(r.status_code == 200 and "days with snow" in json.dumps(r.json()["response"]), f"tools/call: {r.status_code} {r.text[:300]}")
r = httpx.post(f"{base}/v1/tools/call", json={"name": "schneetage_for_ecoweather", "arguments": {"lat": "north"}}, headers=headers)
check(r.status_code == 400 and r.json()["error"]["problems"], f"tools/call with bad arguments: {r.text[:300]}")
r = httpx.post(f"{base}/v1/tools/call", json={"name": "no_such_api_anywhere", "arguments": {}}, headers=headers)
check(r.status_code == 404 and r.json()["error"]["code"] == "unknown_tool", f"unknown API: {r.text[:300]}")
for options, param in [({"mode": "execute"}, "tools"), ({"mode": "fly"}, "toolrouter.mode"), ({"decompose": "yes"}, "toolrouter.decompose")]:
    r = httpx.post(f"{base}/v1/chat/completions", json={"model": MODEL, "messages": user("x"), "tools": [WEATHER], "toolrouter": options}, headers=headers)
    check(r.status_code == 400 and r.json()["error"]["param"] == param, f"{options}: {r.text}")

# LangChain: bind_tools(...).invoke and streaming.
from langchain_openai import ChatOpenAI

llm = ChatOpenAI(base_url=f"{base}/v1", api_key=key, model=MODEL, max_retries=0)
msg = llm.bind_tools([WEATHER]).invoke("Weather in Berlin?")
check(msg.tool_calls and msg.tool_calls[0]["name"] == "get_weather" and msg.tool_calls[0]["args"] == {"city": "Berlin"}, f"langchain tool call: {msg}")
streamed = "".join(c.content for c in llm.stream("hello"))
check(streamed == "Hello from the scripted model.", f"langchain stream: {streamed!r}")
print("ok (openai", openai.__version__ + ")")
