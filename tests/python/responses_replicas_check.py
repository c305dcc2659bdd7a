"""`previous_response_id` across two toolrouter replicas sharing Redis,
with the official `openai` SDK against the scripted model server: a
response made on one replica is continued on the other (plain and
streamed), its conversation carried whole (the tool call and its output);
`store: false` keeps nothing; another key cannot continue it.

    python responses_replicas_check.py URL_A URL_B SCRIPTED_MODEL_URL API_KEY OTHER_KEY
"""

import json
import sys

import httpx
import openai
from openai import OpenAI

from checking import check

url_a, url_b, model_url, key, other_key = sys.argv[1:6]
a = OpenAI(base_url=f"{url_a}/v1", api_key=key, max_retries=0)
b = OpenAI(base_url=f"{url_b}/v1", api_key=key, max_retries=0)
MODEL = "scripted"
WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def seen():
    return httpx.get(f"{model_url}/seen").json()[-1]


# A tool call on A; its output sent to B with previous_response_id.
first = a.responses.create(model=MODEL, input="Weather in Berlin?", tools=[WEATHER], instructions="Be brief.")
call = next(o for o in first.output if o.type == "function_call")
check(first.store is True and call.name == "get_weather", f"first: {first}")
second = b.responses.create(model=MODEL, previous_response_id=first.id, tools=[WEATHER],
                            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 C"}])
check("Sunny, 21 C" in second.output_text and second.previous_response_id == first.id, f"second: {second}")
sent = seen()
check(sent["roles"] == ["user", "assistant", "tool"], f"the kept conversation, without the old instructions: {sent}")

# A third turn on A, streamed, continuing the second.
with a.responses.stream(model=MODEL, previous_response_id=second.id, input="hello") as stream:
    third = stream.get_final_response()
sent = seen()
check(sent["roles"] == ["user", "assistant", "tool", "assistant", "user"] and sent["last"] == "hello", f"third: {sent}")
check(third.store is True and third.output_text == "Hello from the scripted model.", f"third: {third}")
# ... and the streamed one continued on B.
fourth = b.responses.create(model=MODEL, previous_response_id=third.id, input="hello again")
check(seen()["messages"] == 7, f"fourth saw {seen()}")

# store: false keeps nothing; another key cannot continue someone's response.
unkept = a.responses.create(model=MODEL, input="hello", store=False)
check(unkept.store is False, f"store false: {unkept}")
for client, rid, why in [(b, unkept.id, "store: false"),
                         (OpenAI(base_url=f"{url_b}/v1", api_key=other_key, max_retries=0), first.id, "another key")]:
    try:
        client.responses.create(model=MODEL, previous_response_id=rid, input="more")
        check(False, f"{why}: must not be continued")
    except openai.NotFoundError as e:
        body = e.response.json()["error"]
        check(body["code"] == "previous_response_not_found" and body["param"] == "previous_response_id", f"{why}: {body}")
print("ok (previous_response_id across replicas)")
