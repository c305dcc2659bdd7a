"""A scripted OpenAI-compatible model server, for tests only.

    python scripted_model.py      # prints "listening on http://127.0.0.1:PORT"

POST /v1/chat/completions answers from the conversation (non-streaming):
- a `tool` message with an error    -> the same call with valid arguments
  (unless the user said "always-invalid")
- a `tool` message with a result    -> a text answer quoting it
- the user says "invalid-then-valid" or "always-invalid" -> a call whose
  `city` is a number (invalid), to the first tool named like "weather"
- a tool named like "weather" offered -> a valid call to it
- the user says "weather-and-time" -> after the weather tool's result, a
  call to the first tool named like "time"; after both, "The tools said: "
  and both results
- otherwise                         -> "Hello from the scripted model."
Execute mode's requests (recognised by their instructions or tools):
- "Split the user's request..."      -> sub-tasks: precipitation and snow
  days (the second `after` the first when the user says "same place")
- "Answer the user's request..."     -> "Summary: " + the results
- tools include `finish`             -> after a result, `finish` quoting it;
  else a call to the ecoweather API the sub-task names (with no arguments
  for "same place" or when the user says "needs-input"; with a `lon` of
  "east" when the user says "repair-me", repaired when shown the error)
- the user says "model-fails"        -> HTTP 500
The model `scripted-overlap` (the outage experiment,
scripts/outage-experiment.py): execute mode's sub-task is the whole
request; each decision calls the offered API whose name and description
share the most words with the request, those words counted × (1 − the
"failed for similar requests lately" share the description shows, as a
model told so would shy from it), (arguments: each required parameter's
example, else a value of its type), and `finish` once a call has
succeeded.
Tool search (route mode, a `tool_search` function offered):
- no tool named like "weather" offered, and the last message is not a
  search's result ({"found": ...}) -> a `tool_search` call whose query is
  "current weather for a city" (or the word after "search-query:" in the
  user's or the system's words); after the result, the first tool whose name holds that
  word (called with `{}`), else the weather tool if it was loaded, else
  "No tool was found."
- the user says "search-forever"    -> a `tool_search` call every time
Off the happy path, when the user says (route and plan modes):
- "repair-to-text"    -> an invalid call; once shown the error, a text answer
- "extra-city"        -> a call with an argument the API does not take (`city`)
                         besides valid ones; once shown the error, a valid call
- "object-arguments"  -> a valid call whose `arguments` is a JSON object
- "html-page"         -> 200 with an HTML page (streamed or not)
- "ignores-stream"    -> a plain JSON completion even to a streamed request
- "index-one"         -> streamed: the one tool call's deltas carry `index: 1`
- "reasoning"         -> streamed: `reasoning_content`, `logprobs` and
                         `system_fingerprint` in the chunks
- "finish-without-answer" (execute) -> `finish` without its `answer` first
Faults of the model server, when the user says "fault:NAME" (any mode):
- fault:500           -> HTTP 500, every time
- fault:429           -> HTTP 429 without Retry-After, every time
- fault:429-long      -> HTTP 429 with Retry-After: 30, every time
- fault:429-once      -> HTTP 429 with Retry-After: 1 the first time, then an answer
- fault:hang          -> no answer for 60 s
- fault:slow          -> the answer after 1 s
- fault:garbage       -> 200, `application/json`, a body that is not JSON
- fault:early-eof     -> streamed: the first pieces of text, then a clean close
                         (no finish_reason, no [DONE]); plain: a body cut short
- fault:reset         -> as early-eof, but the connection is reset (RST)
- fault:no-done       -> streamed: the whole answer and its finish_reason, no
                         [DONE], and the connection left open for 60 s
GET /v1/models lists one model, `scripted`.
GET /echo/headers answers the W3C trace headers it was sent, as an API
would receive them: {"traceparent": ..., "tracestate": ...}.
GET /seen lists what each request offered: {"tools": [names], "messages": n,
"last": the last message's text, "first": the first message's role and
text, "roles": every message's role, "traceparent": the W3C header it came with}.

Any request toolrouter forwards gets an answer, however odd its fields
(content as a list of parts or a number, `tools: null`, a string for
`stream_options`…): a list of parts is read as the text of its parts
where a message's text is read, other odd values as empty or absent.
Only "model-fails" gets an error status.
"""

import json
import re
import socket
import struct
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SEEN = []
# Requests seen per fault, for the faults that change with repetition.
FAULTS = {}


ECOWEATHER = {"is_from": "2022-09-01", "lon": 123.456, "lat": 789.012}
# Execute mode: the ecoweather APIs, by the word a sub-task names them with.
EXECUTABLE = {"niederschlag_for_ecoweather": "precipitation", "schneetage_for_ecoweather": "snow"}


def text(content):
    """A message content's text: a string as is, the `text` of a list's parts, else ""."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def executed(messages, tools, user, last):
    """Execute mode's requests; None for the others."""
    system = text(messages[0].get("content")) if messages and messages[0].get("role") == "system" else ""

    def call(name, arguments):
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{len(SEEN)}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}

    if system.startswith("Split the user's request"):
        if "precipitation" in user and "snow" in user:
            where = "at lat 789.012 lon 123.456 from 2022-09-01"
            same = "same place" in user
            subtasks = [{"task": f"ecoweather Niederschlag precipitation {where}", "after": []},
                        {"task": "ecoweather Schneetage snow days at the same place" if same else f"ecoweather Schneetage snow days {where}",
                         "after": [0] if same else []}]
        else:
            subtasks = [{"task": user, "after": []}]
        return {"role": "assistant", "content": json.dumps({"subtasks": subtasks})}
    if system.startswith("Answer the user's request"):
        return {"role": "assistant", "content": "Summary: " + text(last.get("content"))[:3000]}
    parts = [text(m.get("content")) for m in messages if m.get("role") == "user" and not text(m.get("content")).startswith("Notes")]
    part = parts[-1].lower() if parts else ""
    blank = "needs-input" in user or "same place" in part
    repair = last.get("role") == "tool" and text(last.get("content")).startswith("Error: invalid arguments for")
    # Execute mode's repair: the call being repaired is the message before the error.
    repaired = messages[-2] if repair and len(messages) >= 2 and isinstance(messages[-2], dict) else {}
    calls = repaired.get("tool_calls") if isinstance(repaired.get("tool_calls"), list) else []
    name = ((calls[0] if calls and isinstance(calls[0], dict) else {}).get("function") or {}).get("name")
    if name in EXECUTABLE and "finish" in tools:
        return call(name, {} if blank else ECOWEATHER)
    if "finish" not in tools:
        return None
    if "finish-without-answer" in user and any(m.get("role") == "tool" for m in messages):
        shown = text(last.get("content")).startswith("Error: invalid arguments for `finish`")
        return call("finish", {"answer": "Done after a repair."} if shown else {})
    if any(m.get("role") == "tool" for m in messages):
        return call("finish", {"answer": "Done: " + text(last.get("content"))[:300]})
    for name, word in EXECUTABLE.items():
        if name in tools and word in part:
            if "repair-me" in user:
                return call(name, {**ECOWEATHER, "lon": "east"})
            return call(name, {} if blank else ECOWEATHER)
    return call("finish", {"answer": "No offered API fits."})


WORD = __import__("re").compile(r"[a-z0-9]+")


def words(value):
    return set(WORD.findall(value.lower().replace("_", " ")))


def overlapping(body, user, last):
    """Execute mode for the model `scripted-overlap`; see the module doc."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = text(messages[0].get("content")) if messages and messages[0].get("role") == "system" else ""
    if system.startswith("Split the user's request"):
        return {"role": "assistant", "content": json.dumps({"subtasks": [{"task": user, "after": []}]})}
    if system.startswith("Answer the user's request"):
        return {"role": "assistant", "content": "Summary: " + text(last.get("content"))[:3000]}
    if any(m.get("role") == "tool" for m in messages):
        arguments = {"answer": "Done: " + text(last.get("content"))[:300]}
    else:
        wanted = words(user)
        offered = [t["function"] for t in body.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("function"), dict)]
        apis = [f for f in offered if f.get("name") not in ("finish", "backtrack")]
        if not apis:
            arguments = {"answer": "No offered API fits."}
        else:
            def fit(f):
                description = f.get("description") or ""
                failed = re.search(r"; failed for similar requests lately: ([0-9.]+)", description)
                if failed:
                    description = description.replace(failed.group(0), "")
                shared = len(wanted & words(f["name"] + " " + description))
                return (shared * (1 - float(failed.group(1))) if failed else shared, f["name"])
            best = max(apis, key=fit)
            schema = best.get("parameters") or {}
            values = {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
            properties = schema.get("properties") or {}
            arguments = {}
            for name in schema.get("required") or []:
                spec = properties.get(name) or {}
                example = spec.get("example", spec.get("default"))
                arguments[name] = example if example is not None else values.get(spec.get("type"), "test")
            return {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{len(SEEN)}", "type": "function",
                    "function": {"name": best["name"], "arguments": json.dumps(arguments)}}]}
    return {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{len(SEEN)}", "type": "function",
            "function": {"name": "finish", "arguments": json.dumps(arguments)}}]}


def names(tools):
    """The names of the offered function tools (anything else is skipped)."""
    if not isinstance(tools, list):
        return []
    functions = [t.get("function") for t in tools if isinstance(t, dict)]
    return [f["name"] for f in functions if isinstance(f, dict) and isinstance(f.get("name"), str)]


def answer(body):
    messages = body.get("messages")
    messages = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
    tools = names(body.get("tools"))
    last_text = text(messages[-1].get("content"))[:2000] if messages else ""
    first = {"role": messages[0].get("role"), "text": text(messages[0].get("content"))[:2000]} if messages else None
    SEEN.append({"tools": tools, "messages": len(messages), "model": body.get("model"), "stream": bool(body.get("stream")),
                 "last": last_text, "first": first, "roles": [m.get("role") for m in messages]})
    user = " ".join(m.get("content") or "" for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str))
    last = messages[-1] if messages else {}
    if "model-fails" in user:
        return None
    if body.get("model") == "scripted-overlap":
        return completion(body, overlapping(body, user, last))
    # Catalog APIs it knows how to call (plan mode offers catalog APIs).
    known = {"weather_forecast_for_open_meteo_forecast": {"latitude": 52.52, "longitude": 13.41}}
    weather = next((t for t in tools if t in known), None) or next((t for t in tools if "weather" in t), None)

    def call(arguments, exact=False):
        if weather in known and arguments.get("city") == "Berlin" and not exact:
            arguments = known[weather]
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{len(SEEN)}", "type": "function", "function": {"name": weather, "arguments": json.dumps(arguments)}}]}

    message = executed(messages, tools, user, last)
    shown_error = last.get("role") == "tool" and "Error" in text(last.get("content"))
    # A search's result: toolrouter's tool search answered the last call.
    searched = last.get("role") == "tool" and text(last.get("content")).startswith('{"found"')
    # The system message may ask too (route mode narrows by the user's words only).
    instructions = " ".join(text(m.get("content")) for m in messages if m.get("role") == "system")
    asked = re.search(r"search-query:(\S+)", user + " " + instructions)
    if message is not None:
        pass
    elif "tool_search" in tools and ("search-forever" in user or (not weather and not searched)):
        query = asked.group(1) if asked else "current weather for a city"
        message = {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{len(SEEN)}", "type": "function",
                   "function": {"name": "tool_search", "arguments": json.dumps({"query": query})}}]}
    elif searched and asked and any(asked.group(1) in t for t in tools):
        found = next(t for t in tools if asked.group(1) in t)
        message = {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{len(SEEN)}", "type": "function",
                   "function": {"name": found, "arguments": "{}"}}]}
    elif searched and weather:
        message = call({"city": "Berlin"})
    elif searched:
        message = {"role": "assistant", "content": "No tool was found."}
    elif shown_error and "repair-to-text" in user:
        message = {"role": "assistant", "content": "I could not make a valid call, sorry."}
    elif weather and "extra-city" in user and not shown_error:
        message = call({"latitude": 52.52, "longitude": 13.41, "city": "Berlin"}, exact=True)
    elif shown_error:
        message = call({"city": 5} if "always-invalid" in user else {"city": "Berlin"})
    elif last.get("role") == "tool" and "weather-and-time" in user:
        results = [text(m.get("content")) for m in messages if m.get("role") == "tool"]
        clock = next((t for t in tools if "time" in t), None)
        if len(results) == 1 and clock:
            message = {"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{len(SEEN)}", "type": "function",
                       "function": {"name": clock, "arguments": json.dumps({"city": "Berlin"})}}]}
        else:
            message = {"role": "assistant", "content": "The tools said: " + " | ".join(results)}
    elif last.get("role") == "tool":
        message = {"role": "assistant", "content": f"The tool said: {text(last.get('content'))}"}
    elif weather and ("invalid-then-valid" in user or "always-invalid" in user or "repair-to-text" in user):
        message = call({"city": 5})
    elif weather:
        message = call({"city": "Berlin"})
    else:
        message = {"role": "assistant", "content": "Hello from the scripted model."}
    if "object-arguments" in user:
        for c in message.get("tool_calls") or []:
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    return completion(body, message)


def completion(body, message):
    """A chat completion answering `body` with `message`."""
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {"id": f"chatcmpl-{len(SEEN)}", "object": "chat.completion", "created": 1700000000, "model": body.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/seen":
            return self.send(200, SEEN)
        if self.path.startswith("/echo/headers"):
            return self.send(200, {"traceparent": self.headers.get("traceparent"), "tracestate": self.headers.get("tracestate")})
        if self.path == "/v1/models":
            return self.send(200, {"object": "list", "data": [{"id": "scripted", "object": "model", "created": 0, "owned_by": "scripted"}]})
        self.send(404, {"error": {"message": "no"}})

    def reset(self):
        """Closes the connection with a TCP reset instead of a clean close."""
        self.wfile.flush()
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def fault(self, name, body, result):
        """Misbehaves as `name` says; True when the request is answered."""
        FAULTS[name] = FAULTS.get(name, 0) + 1
        error = {"error": {"message": f"scripted {name}", "type": "server_error"}}
        if name == "500":
            self.send(500, error)
        elif name in ("429", "429-long") or (name == "429-once" and FAULTS[name] == 1):
            self.send_response(429)
            if name != "429":
                self.send_header("retry-after", "30" if name == "429-long" else "1")
            data = json.dumps(error).encode()
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif name in ("hang", "slow"):
            time.sleep(60 if name == "hang" else 1)
            return name == "hang"
        elif name == "garbage":
            data = b'{"choices": [{"message": '
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif name in ("early-eof", "reset") and not body.get("stream"):
            data = json.dumps(result).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            if name == "reset":
                self.reset()
            self.close_connection = True
        else:
            return False
        return True

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        if not isinstance(body, dict):
            return self.send(400, {"error": {"message": "the body must be a JSON object", "type": "invalid_request_error"}})
        result = answer(body)
        SEEN[-1]["traceparent"] = self.headers.get("traceparent")
        if result is None:
            return self.send(500, {"error": {"message": "the scripted model fails on purpose", "type": "server_error"}})
        said = " ".join(text(m.get("content")) for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user")
        fault = next((w[len("fault:"):] for w in said.split() if w.startswith("fault:")), None)
        if fault and self.fault(fault, body, result):
            return
        if "html-page" in said:
            page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(page)))
            self.end_headers()
            return self.wfile.write(page)
        if not body.get("stream") or "ignores-stream" in said:
            return self.send(200, result)
        # Streamed: content in three pieces, each tool call's arguments in two.
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        message = result["choices"][0]["message"]

        reasoning = "reasoning" in said
        extra = {"system_fingerprint": "fp_scripted"} if reasoning else {}

        def event(delta, finish=None, logprobs=None):
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            if logprobs is not None:
                choice["logprobs"] = logprobs
            chunk = {"id": result["id"], "object": "chat.completion.chunk", "created": result["created"],
                     "model": result["model"], "choices": [choice], **extra}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()

        event({"role": "assistant", "content": ""})
        if fault in ("early-eof", "reset"):
            event({"content": "The first words"})
            event({"content": " of an answer"})
            if fault == "reset":
                return self.reset()
            self.close_connection = True
            return
        if reasoning:
            event({"reasoning_content": "The user greets me; "})
            event({"reasoning_content": "I greet back."})
        content = message.get("content") or ""
        for i in range(0, len(content), max(1, len(content) // 3 + 1)):
            piece = content[i:i + len(content) // 3 + 1]
            lp = {"content": [{"token": piece, "logprob": -0.5, "bytes": None, "top_logprobs": []}]} if reasoning else None
            event({"content": piece}, logprobs=lp)
        first = 1 if "index-one" in said else 0
        for n, call in enumerate(message.get("tool_calls") or [], start=first):
            args = call["function"]["arguments"]
            event({"tool_calls": [{"index": n, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}]})
            if not isinstance(args, str):
                event({"tool_calls": [{"index": n, "function": {"arguments": args}}]})
                continue
            half = len(args) // 2
            event({"tool_calls": [{"index": n, "function": {"arguments": args[:half]}}]})
            event({"tool_calls": [{"index": n, "function": {"arguments": args[half:]}}]})
        event({}, result["choices"][0]["finish_reason"])
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            chunk = {"id": result["id"], "object": "chat.completion.chunk", "created": result["created"],
                     "model": result["model"], "choices": [], "usage": result["usage"]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        if fault == "no-done":
            self.wfile.flush()
            time.sleep(60)
            self.close_connection = True
            return
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
