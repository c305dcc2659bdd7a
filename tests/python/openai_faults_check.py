"""The fault matrix of the model upstream, through the official `openai` SDK:
every way the scripted model server can misbehave (see scripted_model.py,
"fault:NAME"), plain and streamed, must reach the client as a status or a
stream event it can act on, within the request's time budget, and never
as a whole-looking answer.

    python openai_faults_check.py TOOLROUTER_URL SCRIPTED_MODEL_URL API_KEY BUDGET_S LLM_TIMEOUT_S

toolrouter runs with llm.timeout_ms = LLM_TIMEOUT_S, server.request_timeout_ms
= BUDGET_S, llm.max_attempts 2 and llm.max_retry_wait_ms 1500.
"""

import sys
import time

import httpx
import openai
from openai import OpenAI

from checking import check, user

base, model_url, key = sys.argv[1], sys.argv[2], sys.argv[3]
BUDGET, LLM_TIMEOUT = float(sys.argv[4]), float(sys.argv[5])
# The SDK's defaults (two retries): toolrouter must not let them multiply the wait.
client = OpenAI(base_url=f"{base}/v1", api_key=key, timeout=120)
once = client.with_options(max_retries=0)
MODEL = "scripted"


def model_requests(fault):
    """Requests the model server got for a fault so far."""
    return sum(1 for s in httpx.get(f"{model_url}/seen").json() if f"fault:{fault}" in s["last"])


def plain(fault, c=client):
    """(status or None, headers, text or None, seconds) of a plain request."""
    started = time.monotonic()
    try:
        r = c.chat.completions.with_raw_response.create(model=MODEL, messages=user(f"hello fault:{fault}"))
        answer = r.parse()
        return None, r.headers, answer.choices[0].message.content, time.monotonic() - started
    except openai.APIStatusError as e:
        return e.status_code, e.response.headers, None, time.monotonic() - started


def streamed(fault, c=client):
    """(status or error message or None, text, finish reasons, seconds) of a streamed request."""
    started = time.monotonic()
    text, finishes = "", []
    try:
        for chunk in c.chat.completions.create(model=MODEL, messages=user(f"hello fault:{fault}"), stream=True):
            for choice in chunk.choices:
                text += choice.delta.content or ""
                if choice.finish_reason:
                    finishes.append(choice.finish_reason)
        return None, text, finishes, time.monotonic() - started
    except openai.APIStatusError as e:
        return e.status_code, text, finishes, time.monotonic() - started
    except openai.APIError as e:  # an error event mid-stream
        return e.message, text, finishes, time.monotonic() - started


def within_budget(seconds, what):
    check(seconds < BUDGET + 1, f"{what}: {seconds:.1f} s, over the {BUDGET} s budget")


# A 500 every time: toolrouter retries once, then 502 with x-should-retry:
# false, so the SDK's own retries do not multiply the model requests.
status, headers, _, s = plain("500")
check(status == 502 and headers.get("x-should-retry") == "false", f"500: {status} {dict(headers)}")
check(model_requests("500") == 2, f"500: {model_requests('500')} model requests, expected 2")
status, text, _, s = streamed("500")
check(status == 502, f"500 streamed: {status}")
check(model_requests("500") == 4, "500 streamed: one retry, no SDK retries")

# 429 without Retry-After: a 429 the client may retry; with a long one, the
# 429 at once, its Retry-After passed on; with a short one, waited out.
status, headers, _, s = plain("429", once)
check(status == 429, f"429: {status}")
status, headers, _, s = plain("429-long", once)
check(status == 429 and headers.get("retry-after") == "30", f"429-long: {status} {dict(headers)}")
check(s < 1.5, f"429-long: the client waited {s:.1f} s for a 429 it could get at once")
check(model_requests("429-long") == 1, "429-long: not retried by toolrouter")
status, text, _, s = streamed("429-long", once)
check(status == 429, f"429-long streamed: {status}")
status, _, content, s = plain("429-once", once)
check(status is None and content and s >= 1, f"429-once: {status} {content!r} after {s:.1f} s")

# A hung model: one attempt of llm.timeout_ms, then 504, not retried by the SDK.
status, headers, _, s = plain("hang")
check(status == 504 and headers.get("x-should-retry") == "false", f"hang: {status} {dict(headers)}")
check(LLM_TIMEOUT - 0.5 < s < LLM_TIMEOUT + 2, f"hang: answered after {s:.1f} s")
check(model_requests("hang") == 1, f"hang: {model_requests('hang')} model requests")
status, _, _, s = streamed("hang")
check(status == 504, f"hang streamed: {status}")
within_budget(s, "hang streamed")

# Slow but within the timeout: a normal answer.
status, _, content, s = plain("slow")
check(status is None and content == "Hello from the scripted model.", f"slow: {status} {content!r}")
status, text, finishes, s = streamed("slow")
check(status is None and text == "Hello from the scripted model." and finishes == ["stop"], f"slow streamed: {status} {text!r}")

# Garbage and HTML: 502, plain and streamed.
for fault in ["garbage", "html-page"]:
    status, _, _, s = plain(fault)
    check(status == 502, f"{fault}: {status}")
    status, _, _, s = streamed(fault)
    check(status == 502, f"{fault} streamed: {status}")

# A plain JSON answer to a streamed request: read as its chunks.
status, text, finishes, s = streamed("ignores-stream")
check(status is None and text == "Hello from the scripted model." and finishes == ["stop"], f"ignores-stream: {status}")

# Early EOF and reset: plain, 502; streamed, the text so far then an error
# event, never a made-up finish_reason.
for fault, says in [("early-eof", "ended before the answer was finished"), ("reset", "the stream broke")]:
    status, _, _, s = plain(fault)
    check(status == 502, f"{fault}: {status}")
    status, text, finishes, s = streamed(fault)
    check(isinstance(status, str) and says in status, f"{fault} streamed: {status!r}")
    check(text == "The first words of an answer" and finishes == [], f"{fault} streamed: {text!r} {finishes}")
    within_budget(s, fault)

# The finish but no [DONE], the connection left open: a whole answer, soon.
status, text, finishes, s = streamed("no-done")
check(status is None and text == "Hello from the scripted model." and finishes == ["stop"], f"no-done: {status} {text!r}")
check(s < 4, f"no-done: {s:.1f} s for a whole answer")

print("ok")
