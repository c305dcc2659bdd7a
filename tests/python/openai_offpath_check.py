"""Drives toolrouter's OpenAI face off the happy path with the official
`openai` SDK and `langchain-openai`, against the scripted model server
misbehaving on cue (see scripted_model.py): a repair that ends in text,
a model server that answers a stream with an HTML page or a plain JSON
completion, tool-call deltas at index 1, reasoning and logprobs in a
stream, arguments sent as a JSON object, usage over repairs, and plan
mode's calls checked as /v1/tools/call checks them.

    python openai_offpath_check.py TOOLROUTER_URL SCRIPTED_MODEL_URL API_KEY [ITEM...]

ITEMs (default: all) name the checks to run: repair-text, html-page,
ignores-stream, index-one, reasoning, object-arguments, usage, plan-checks,
langchain.
"""

import json
import sys

import httpx
import openai
from openai import OpenAI

from checking import check, user

base, model_url, key = sys.argv[1], sys.argv[2], sys.argv[3]
ONLY = set(sys.argv[4:])
client = OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=60)
MODEL = "scripted"
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}




def seen():
    return httpx.get(f"{model_url}/seen").json()


def streamed(text, **kw):
    with client.chat.completions.stream(model=MODEL, messages=user(text), **kw) as stream:
        return stream.get_final_completion()


# 2. A streamed repair that ends in text: the text is the answer.
def repair_text():
    final = streamed("repair-to-text weather in Berlin", tools=[WEATHER])
    message = final.choices[0].message
    check(message.content == "I could not make a valid call, sorry." and not message.tool_calls, f"repaired to text: {message}")
    check(final.choices[0].finish_reason == "stop", f"finish_reason: {final.choices[0].finish_reason}")


# 3. A model server answering a stream with an HTML page: a 502, never an empty answer.
def malformed_stream():
    for stream in (True, False):
        try:
            r = client.chat.completions.create(model=MODEL, messages=user("html-page hello"), stream=stream)
            if stream:
                list(r)
            check(False, f"an HTML page must fail (stream={stream})")
        except openai.APIStatusError as e:
            check(e.status_code == 502 and "text/html" in e.message, f"stream={stream}: {e.status_code} {e.message}")


# ... or with a plain JSON completion (it ignored `stream`): that completion, streamed.
def ignored_stream():
    final = streamed("ignores-stream hello")
    check(final.choices[0].message.content == "Hello from the scripted model.", f"a completion for a stream: {final}")
    final = streamed("ignores-stream weather in Berlin", tools=[WEATHER])
    call = final.choices[0].message.tool_calls[0]
    check(json.loads(call.function.arguments) == {"city": "Berlin"}, f"its tool call: {call}")


# ... and tool-call deltas that start at index 1: one call, no phantom at 0.
def index_one():
    final = streamed("index-one weather in Berlin", tools=[WEATHER], stream_options={"include_usage": True})
    calls = final.choices[0].message.tool_calls
    check(len(calls) == 1 and json.loads(calls[0].function.arguments) == {"city": "Berlin"}, f"index 1: {calls}")
    check(final.usage.total_tokens == 15, f"no repair was needed: {final.usage}")


# 6. Reasoning, logprobs and the system fingerprint survive streaming.
def reasoning():
    chunks = list(client.chat.completions.create(model=MODEL, messages=user("reasoning hello"), stream=True, logprobs=True))
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks if c.choices)
    check(reasoning == "The user greets me; I greet back.", f"reasoning_content: {reasoning!r}")
    check(any(c.choices and c.choices[0].logprobs and c.choices[0].logprobs.content for c in chunks), "logprobs streamed")
    check(all(c.system_fingerprint == "fp_scripted" for c in chunks), f"system_fingerprint: {[c.system_fingerprint for c in chunks]}")
    check("".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello from the scripted model.", "the text")


# 7. Arguments sent as a JSON object are a valid call, sent on as JSON text.
def object_arguments():
    r = client.chat.completions.with_raw_response.create(model=MODEL, messages=user("object-arguments weather in Berlin"), tools=[WEATHER])
    body = json.loads(r.text)
    args = body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    check(isinstance(args, str) and json.loads(args) == {"city": "Berlin"} and body["toolrouter"]["repairs"] == 0, f"object arguments: {body}")
    final = streamed("object-arguments weather in Berlin", tools=[WEATHER])
    check(json.loads(final.choices[0].message.tool_calls[0].function.arguments) == {"city": "Berlin"}, f"streamed: {final}")


# 8. Usage counts every model request, repairs included.
def usage():
    r = client.chat.completions.create(model=MODEL, messages=user("invalid-then-valid weather"), tools=[WEATHER])
    check(r.usage.total_tokens == 30 and r.usage.prompt_tokens == 20, f"usage over a repair: {r.usage}")
    final = streamed("invalid-then-valid weather", tools=[WEATHER], stream_options={"include_usage": True})
    check(final.usage.total_tokens == 30, f"streamed usage over a repair: {final.usage}")


# 4. Plan mode checks calls as /v1/tools/call does: an argument the API does
# not take is repaired, with the validator's message written for a model.
def plan_checks():
    r = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=user("extra-city Open-Meteo weather forecast for Berlin, latitude and longitude"),
        extra_body={"toolrouter": {"mode": "plan"}})
    body = json.loads(r.text)
    call = body["choices"][0]["message"]["tool_calls"][0]["function"]
    check(call["name"] == "weather_forecast_for_open_meteo_forecast", f"plan mode called: {call}")
    check(json.loads(call["arguments"]) == {"latitude": 52.52, "longitude": 13.41} and body["toolrouter"]["repairs"] == 1, f"repaired: {body['toolrouter']}")
    shown = seen()[-1]["last"]
    check("unknown parameter `city`" in shown and "parameters are:" in shown, f"the repair message: {shown}")
    r = httpx.post(f"{base}/v1/tools/call", json={"name": call["name"], "arguments": json.loads(call["arguments"])},
                   headers={"Authorization": f"Bearer {key}"}, timeout=30)
    check(r.status_code != 400, f"/v1/tools/call takes what plan mode accepted: {r.status_code} {r.text[:300]}")


# LangChain: a streamed repair that ends in text, and reasoning content.
def langchain():
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(base_url=f"{base}/v1", api_key=key, model=MODEL, max_retries=0)
    text = "".join(c.content for c in llm.bind_tools([WEATHER]).stream("repair-to-text weather in Berlin"))
    check(text == "I could not make a valid call, sorry.", f"langchain stream after a repair: {text!r}")
    msg = llm.bind_tools([WEATHER]).invoke("object-arguments weather in Berlin")
    check(msg.tool_calls and msg.tool_calls[0]["args"] == {"city": "Berlin"}, f"langchain object arguments: {msg}")


CHECKS = {"repair-text": repair_text, "html-page": malformed_stream, "ignores-stream": ignored_stream, "index-one": index_one, "reasoning": reasoning, "object-arguments": object_arguments, "usage": usage, "plan-checks": plan_checks, "langchain": langchain}
for item, run in CHECKS.items():
    if not ONLY or item in ONLY:
        run()
print("ok (openai", openai.__version__ + ")")
