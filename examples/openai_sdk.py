"""toolrouter through the official OpenAI SDK: change `base_url`, nothing else.

    pip install openai
    toolrouter serve          # with llm.base_url naming your model server
    python examples/openai_sdk.py [BASE_URL] [API_KEY] [MODEL]

Shows a plain request, streaming, a tool round trip (route mode: toolrouter
narrows your tools and checks the model's calls), plan mode through
`extra_body` (toolrouter offers catalog APIs; you run the calls through
POST /v1/tools/call), and execute mode through `extra_body` (toolrouter
plans, calls the APIs and answers; the trace comes with the answer and at
GET /v1/traces/{id}).
"""

import json
import sys

import httpx
from openai import OpenAI

base = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
key = sys.argv[2] if len(sys.argv) > 2 else "none"
model = sys.argv[3] if len(sys.argv) > 3 else "gpt-4o-mini"
client = OpenAI(base_url=f"{base}/v1", api_key=key)

# Plain.
r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Say hello."}])
print("plain:", r.choices[0].message.content)

# Streaming.
print("streamed: ", end="")
for chunk in client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Count to five."}], stream=True):
    if chunk.choices and chunk.choices[0].delta.content:
        print(chunk.choices[0].delta.content, end="", flush=True)
print()

# A tool round trip.
weather = {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
messages = [{"role": "user", "content": "What's the weather in Berlin?"}]
r = client.chat.completions.create(model=model, messages=messages, tools=[weather])
message = r.choices[0].message
if message.tool_calls:
    call = message.tool_calls[0]
    print("tool call:", call.function.name, call.function.arguments)
    messages += [message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature_c": 21, "sky": "sunny"})}]
    r = client.chat.completions.create(model=model, messages=messages, tools=[weather])
    print("answer:", r.choices[0].message.content)
else:
    # The model answered in words (or its call could not be repaired into a valid one).
    print("no tool call; the model said:", message.content)

# Plan mode: catalog APIs chosen by toolrouter's planner are offered to the model.
r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Weather forecast for Berlin (52.52, 13.41)"}],
                                   extra_body={"toolrouter": {"mode": "plan"}})
if not r.choices[0].message.tool_calls:
    print("plan mode: no call; the model said:", r.choices[0].message.content)
for call in r.choices[0].message.tool_calls or []:
    result = httpx.post(f"{base}/v1/tools/call", headers={"Authorization": f"Bearer {key}"},
                        json={"name": call.function.name, "arguments": json.loads(call.function.arguments)}, timeout=60)
    print("plan-mode call:", call.function.name, "->", result.status_code, result.text[:200])

# Execute mode: toolrouter plans, calls the APIs itself and answers.
raw = client.chat.completions.with_raw_response.create(
    model=model, messages=[{"role": "user", "content": "What will the weather be in Berlin tomorrow?"}],
    extra_body={"toolrouter": {"mode": "execute"}})
body = json.loads(raw.text)
print("execute:", body["choices"][0]["message"]["content"])
trace = body["toolrouter"]
for sub in trace["trace"]["subtasks"]:
    steps = [(s["function"], s["outcome"]["status"]) for s in (sub["run"] or {}).get("steps", [])]
    print("  sub-task:", sub["task"], "->", steps)
print("  status:", trace["status"], "| trace:", f"{base}/v1/traces/{trace['trace_id']}")
