"""Drives toolrouter's execute mode (and plan mode through LangChain) with
the official `openai` SDK and `langchain-openai`, against the scripted
model server and the replay server of recorded RapidAPI responses.

    python openai_execute_check.py TOOLROUTER_URL API_KEY OTHER_API_KEY
"""

import json
import sys

import httpx
import openai
from openai import OpenAI

from checking import check, user

base, key, other_key = sys.argv[1], sys.argv[2], sys.argv[3]
client = OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=60)
MODEL = "scripted"
EXECUTE = {"toolrouter": {"mode": "execute"}}
headers = {"Authorization": f"Bearer {key}"}




def raw(text, **kw):
    r = client.chat.completions.with_raw_response.create(model=MODEL, messages=user(text), **kw)
    return json.loads(r.text)


# One task: the model picks the API, toolrouter calls it (replay upstream) and the model's finish is the answer.
body = raw("How many ecoweather Schneetage snow days at lat 789.012 lon 123.456 since 2022-09-01?", extra_body=EXECUTE)
tr = body["toolrouter"]
check(tr["mode"] == "execute" and tr["status"] == "answered", f"execute: {tr.get('status')}")
content = body["choices"][0]["message"]["content"]
check(content.startswith("Done: HTTP 200") and "days with snow" in content, f"the answer quotes the real response: {content!r}")
check(body["choices"][0]["finish_reason"] == "stop" and body["usage"]["total_tokens"] > 0, f"usage: {body['usage']}")
[sub] = tr["trace"]["subtasks"]
step = sub["run"]["steps"][0]
check(step["function"] == "schneetage_for_ecoweather" and step["outcome"]["ok"], f"the step: {step}")
check(step["arguments"] == {"is_from": "2022-09-01", "lon": 123.456, "lat": 789.012}, f"arguments: {step['arguments']}")
check(sub["recorded"] is not None and sub["calls"] == [{"function": "schneetage_for_ecoweather", "ok": True}], f"learned: {sub}")
check(sub["run"]["trace"] and sub["run"]["trace"][0]["candidates"], "the trace shows the candidates of each move")

# The same trace at /v1/traces/{id}; unknown ids get 404 in OpenAI's shape.
r = httpx.get(f"{base}/v1/traces/{tr['trace_id']}", headers=headers)
check(r.status_code == 200 and r.json() == tr, f"trace: {r.status_code} {r.text[:300]}")
r = httpx.get(f"{base}/v1/traces/{tr['trace_id']}", headers={"Authorization": f"Bearer {other_key}"})
check(r.status_code == 404, f"another key's trace: {r.status_code}")
r = httpx.get(f"{base}/v1/traces/0000000000000000", headers=headers)
check(r.status_code == 404 and r.json()["error"]["code"] == "trace_not_found", f"unknown trace: {r.text}")

# Streaming: the role at once, then the answer, the finish chunk with the trace, usage and [DONE].
chunks = list(client.chat.completions.create(model=MODEL, messages=user("ecoweather Schneetage snow days at lat 789.012 lon 123.456 from 2022-09-01"),
    stream=True, stream_options={"include_usage": True}, extra_body=EXECUTE))
check(chunks[0].choices[0].delta.role == "assistant", f"first chunk: {chunks[0]}")
text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
check("days with snow" in text, f"streamed answer: {text!r}")
check(chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0, f"usage chunk: {chunks[-1]}")
finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
check(len(finish) == 1 and finish[0].choices[0].finish_reason == "stop", "one finish chunk")
with client.chat.completions.stream(model=MODEL, messages=user("ecoweather Schneetage snow days lat 789.012 lon 123.456 2022-09-01"), extra_body=EXECUTE) as stream:
    final = stream.get_final_completion()
check("days with snow" in final.choices[0].message.content, f"stream helper: {final}")

# Two independent sub-tasks run in one wave; the model writes the answer from both results.
body = raw("ecoweather Niederschlag precipitation and Schneetage snow days at lat 789.012 lon 123.456 from 2022-09-01", extra_body=EXECUTE)
subs = body["toolrouter"]["trace"]["subtasks"]
check(len(subs) == 2 and [s["wave"] for s in subs] == [0, 0], f"one wave: {[(s['task'], s['wave']) for s in subs]}")
check([s["run"]["steps"][0]["function"] for s in subs] == ["niederschlag_for_ecoweather", "schneetage_for_ecoweather"], f"{subs}")
content = body["choices"][0]["message"]["content"]
check(content.startswith("Summary:") and "niederschlag_for_ecoweather" in content and "schneetage_for_ecoweather" in content, f"summary: {content!r}")

# A sub-task that needs the first one's result runs after it, its arguments completed from that output (Reverse Chain).
body = raw("ecoweather Niederschlag precipitation at lat 789.012 lon 123.456 from 2022-09-01, then Schneetage snow days at the same place", extra_body=EXECUTE)
subs = body["toolrouter"]["trace"]["subtasks"]
check([s["wave"] for s in subs] == [0, 1] and subs[1]["after"] == [0], f"two waves: {subs}")
second = subs[1]["run"]["steps"][0]
check(sorted(second["completed"]) == ["is_from", "lat", "lon"] and second["outcome"]["ok"], f"completed: {second}")
check(second["arguments"] == {"is_from": "2022-09-01", "lon": 123.456, "lat": 789.012}, f"{second['arguments']}")

# Arguments that break the schema go back to the model, which repairs them.
body = raw("repair-me: ecoweather Schneetage snow days at lat 789.012 lon 123.456 from 2022-09-01", extra_body=EXECUTE)
step = body["toolrouter"]["trace"]["subtasks"][0]["run"]["steps"][0]
check(step["repairs"] == 1 and step["outcome"]["ok"] and step["arguments"]["lon"] == 123.456, f"repaired step: {step}")

# A value nobody gives: the answer asks the user for exactly it.
body = raw("needs-input: ecoweather Schneetage snow days please", extra_body=EXECUTE)
tr = body["toolrouter"]
check(tr["status"] == "needs_input", f"status: {tr['status']}")
asked = sorted(n["parameter"] for n in tr["trace"]["needs"])
check(asked == ["is_from", "lat", "lon"], f"needs: {asked}")
content = body["choices"][0]["message"]["content"]
check("lat" in content and "Please provide" in content, f"question: {content!r}")
check(tr["trace"]["subtasks"][0]["run"]["trace"][-1]["note"].startswith("not called"), "nothing was called")

# Execute mode claims no more than it did: a request no API serves is
# `infeasible`, not `answered`, and a `finish` without its required answer
# goes back to the model like any invalid call.
body = raw("Tell me a joke about cats", extra_body=EXECUTE)
tr = body["toolrouter"]
check(tr["status"] == "infeasible", f"nothing called: {tr['status']}")
check(all(not s["run"]["steps"] for s in tr["trace"]["subtasks"]), "no step stood")
body = raw("finish-without-answer ecoweather Schneetage snow days at lat 789.012 lon 123.456 from 2022-09-01", extra_body=EXECUTE)
tr = body["toolrouter"]
check(body["choices"][0]["message"]["content"] == "Done after a repair." and tr["status"] == "answered", f"finish repaired: {body['choices'][0]['message']['content']!r}")
check(tr["trace"]["model_requests"] == 4, f"decompose, decide, finish, finish again: {tr['trace']['model_requests']}")

# The mode from a header; a failing model is a 502 in OpenAI's shape.
r = httpx.post(f"{base}/v1/chat/completions", headers={**headers, "x-toolrouter-mode": "execute"}, timeout=60,
               json={"model": MODEL, "messages": user("ecoweather Schneetage snow days lat 789.012 lon 123.456 2022-09-01")})
check(r.status_code == 200 and r.json()["toolrouter"]["mode"] == "execute", f"header mode: {r.text[:300]}")
try:
    client.chat.completions.create(model=MODEL, messages=user("model-fails"), extra_body=EXECUTE)
    check(False, "a failing model must fail the request")
except openai.APIStatusError as e:
    check(e.status_code == 502 and e.body["code"] == "upstream_error", f"{e.status_code}: {e.body}")

# LangChain: execute mode (invoke and stream) and plan mode through extra_body.
from langchain_openai import ChatOpenAI

llm = ChatOpenAI(base_url=f"{base}/v1", api_key=key, model=MODEL, max_retries=0, extra_body=EXECUTE)
msg = llm.invoke("ecoweather Schneetage snow days at lat 789.012 lon 123.456 since 2022-09-01")
check("days with snow" in msg.content, f"langchain execute: {msg}")
streamed = "".join(c.content for c in llm.stream("ecoweather Schneetage snow days at lat 789.012 lon 123.456 since 2022-09-01"))
check("days with snow" in streamed, f"langchain execute stream: {streamed!r}")
planner = ChatOpenAI(base_url=f"{base}/v1", api_key=key, model=MODEL, max_retries=0, extra_body={"toolrouter": {"mode": "plan"}})
msg = planner.invoke("Open-Meteo weather forecast for Berlin, latitude and longitude")
check(msg.tool_calls and msg.tool_calls[0]["name"] == "weather_forecast_for_open_meteo_forecast", f"langchain plan: {msg}")
print("ok (execute mode, openai", openai.__version__ + ")")
