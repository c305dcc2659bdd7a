"""Policies through the real clients: a key its policy limits to weather
APIs (category Weather, and the ecoweather tool of category Energy) and to
its own route-mode tools not named *delete* sees and calls only those, on
every face; a key no policy names sees everything.

    python policy_check.py openai URL LIMITED_KEY FREE_KEY MODEL_URL   # openai SDK, HTTP endpoints
    python policy_check.py anthropic URL LIMITED_KEY FREE_KEY          # anthropic SDK
    python policy_check.py mcp URL LIMITED_KEY FREE_KEY                # mcp SDK over streamable HTTP
    python policy_check.py consent URL LIMITED_KEY FREE_KEY            # execute mode's consent, openai SDK
    python policy_check.py mcp-consent URL LIMITED_KEY FREE_KEY        # consent through MCP elicitation
    python policy_check.py mcp-stdio TOOLROUTER CONFIG OTHER_API       # `toolrouter mcp` under mcp.stdio_policy

The server's config makes the snow-days API destructive (`access.destructive`)
with a consent timeout of 2 s.

Exits non-zero with a message on the first failed check.
"""

import asyncio
import sys

try:
    import httpx
except ImportError:  # the mcp 2.x environment has httpx's successor alone
    import httpx2 as httpx

SNOW = "schneetage_for_ecoweather"
SNOW_ARGS = {"is_from": "2022-09-01", "lon": 123.456, "lat": 789.012}
BROAD = "exchange rate of the euro, currency conversion, and the weather forecast"
WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
DELETE_TOOL = {"type": "function", "function": {"name": "delete_calendar_event", "description": "Delete an event.",
    "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}}


def permitted(api):
    """What the policy allows of a search result or an API's detail."""
    return api["category"] == "Weather" or api["tool"].lower() == "ecoweather"


def check(cond, message):
    if not cond:
        print(f"FAILED: {message}", file=sys.stderr)
        sys.exit(1)


def search(url, key, query, k=10, after=None):
    body = {"query": query, "k": k}
    if after:
        body["after"] = after
    return httpx.post(f"{url}/v1/tools/search", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def detail(url, key, function):
    r = httpx.get(f"{url}/v1/apis/{function}", headers={"Authorization": f"Bearer {key}"}, timeout=60)
    check(r.status_code == 200, f"/v1/apis/{function}: {r.status_code} {r.text[:200]}")
    return r.json()


def other_api(url, free):
    """An API outside the weather category that the free key finds."""
    found = search(url, free, BROAD).json()["data"]
    others = [d["name"] for d in found if not permitted(d)]
    check(others, f"the free key finds APIs beyond weather: {[(d['name'], d['category']) for d in found]}")
    return others[0]


def openai_face(url, limited, free, model_url):
    import openai

    other = other_api(url, free)
    found = search(url, limited, BROAD)
    check(found.status_code == 200, f"search: {found.text[:300]}")
    data = found.json()["data"]
    check(data and all(permitted(d) for d in data), f"the limited key finds weather APIs only: {[(d['name'], d['category']) for d in data]}")
    check(other not in [d["name"] for d in found.json()["data"]], "the other API is not found")

    headers = {"Authorization": f"Bearer {limited}"}
    refused = httpx.post(f"{url}/v1/tools/call", json={"name": other, "arguments": {}}, headers=headers, timeout=60)
    error = refused.json().get("error", {})
    check(refused.status_code == 403 and error.get("type") == "permission_error" and error.get("code") == "tool_not_allowed",
          f"calling another API is refused: {refused.status_code} {refused.text[:300]}")
    check("weather-desk" in error.get("message", ""), f"the refusal names the policy: {error}")
    allowed = httpx.post(f"{url}/v1/tools/call", json={"name": SNOW, "arguments": SNOW_ARGS}, headers=headers, timeout=60)
    check(allowed.status_code == 200 and "days with snow" in allowed.text, f"a weather API is called: {allowed.text[:300]}")
    cue = search(url, limited, "snow days", after=other)
    check(cue.status_code == 400 and "unknown function" in cue.text, f"a cue outside the policy is unknown: {cue.text[:300]}")
    shown = httpx.get(f"{url}/v1/apis/{other}", headers=headers, timeout=60)
    check(shown.status_code == 404, f"the console does not show it: {shown.status_code}")

    client = openai.OpenAI(base_url=f"{url}/v1", api_key=limited, max_retries=0)
    free_client = openai.OpenAI(base_url=f"{url}/v1", api_key=free, max_retries=0)
    ask = [{"role": "user", "content": "What's the weather in Paris?"}]
    for c, offered in [(client, ["get_weather"]), (free_client, ["get_weather", "delete_calendar_event"])]:
        c.chat.completions.create(model="scripted", messages=ask, tools=[WEATHER_TOOL, DELETE_TOOL])
        seen = httpx.get(f"{model_url}/seen", timeout=10).json()[-1]
        check(sorted(seen["tools"]) == sorted(offered), f"route mode offers {offered}: {seen['tools']}")
    try:
        client.chat.completions.create(model="scripted", messages=ask, tools=[WEATHER_TOOL, DELETE_TOOL],
                                       tool_choice={"type": "function", "function": {"name": "delete_calendar_event"}})
        check(False, "forcing a tool the policy denies is refused")
    except openai.PermissionDeniedError as e:
        check(e.status_code == 403 and "delete_calendar_event" in str(e), f"403 naming the tool: {e}")

    plan = client.chat.completions.create(
        model="scripted", extra_body={"toolrouter": {"mode": "plan"}},
        messages=[{"role": "user", "content": "repair-to-text Open-Meteo weather forecast for Berlin, latitude and longitude, "
                                              "and the euro to dollar exchange rate"}])
    check(plan.choices, "plan mode answers")
    steps = plan.model_dump()["toolrouter"]["plan"]
    for step in steps:
        method = detail(url, free, step["name"])["method"]
        effect = "read_only" if method in ("GET", "HEAD", "OPTIONS") and step["name"] != SNOW else "destructive"
        check(step["effect"] == effect, f"plan mode says what a call does: {step['name']} {method} {step['effect']}")
    offered = httpx.get(f"{model_url}/seen", timeout=10).json()[-1]["tools"]
    check(offered, "plan mode offers catalog tools")
    details = [detail(url, free, name) for name in offered]
    check(all(permitted(d) for d in details), f"plan mode offers weather APIs only: {[(d['function'], d['category']) for d in details]}")
    print("openai ok")


def anthropic_face(url, limited, free):
    import anthropic

    tools = [{"name": t["function"]["name"], "description": t["function"]["description"],
              "input_schema": t["function"]["parameters"]} for t in (WEATHER_TOOL, DELETE_TOOL)]
    client = anthropic.Anthropic(base_url=url, api_key=limited, max_retries=0)
    ask = [{"role": "user", "content": "What's the weather in Paris?"}]
    answer = client.messages.create(model="scripted", max_tokens=256, messages=ask, tools=tools)
    check(answer.content, "the limited key is answered")
    try:
        client.messages.create(model="scripted", max_tokens=256, messages=ask, tools=tools,
                               tool_choice={"type": "tool", "name": "delete_calendar_event"})
        check(False, "forcing a tool the policy denies is refused")
    except anthropic.PermissionDeniedError as e:
        check(e.status_code == 403 and e.body["error"]["type"] == "permission_error", f"Anthropic's 403: {e.body}")
    free_client = anthropic.Anthropic(base_url=url, api_key=free, max_retries=0)
    forced = free_client.messages.create(model="scripted", max_tokens=256, messages=ask, tools=tools,
                                         tool_choice={"type": "tool", "name": "delete_calendar_event"})
    check(forced.content, "the free key may force it")
    print("anthropic ok")


async def weather_only(session, face):
    """`search_tools` of a session under the weather policy: its results."""
    found = await session.call_tool("search_tools", {"query": BROAD, "k": 10})
    results = found.structured_content["results"]
    check(results and all(permitted(r) for r in results),
          f"{face}: search_tools finds weather APIs only: {[(r['name'], r['category']) for r in results]}")
    return results


async def mcp_face(url, limited, free):
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    other = other_api(url, free)

    async def session_for(key):
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
        return streamable_http_client(f"{url}/mcp", http_client=http)

    async with await session_for(limited) as (read, write, *_):
        async with ClientSession(read, write) as session:
            await session.initialize()
            results = await weather_only(session, "http")
            listed = [t.name for t in (await session.list_tools()).tools]
            check(set(listed) - {"search_tools", "plan", "call_api"} <= {r["name"] for r in results},
                  f"tools/list holds the fixed tools and what was found: {listed}")
            refused = await session.call_tool("call_api", {"name": other, "arguments": {}})
            text = "".join(getattr(c, "text", "") for c in refused.content)
            check(refused.is_error and "not allowed" in text and "weather-desk" in text, f"call_api refuses: {text}")
            try:
                by_name = await session.call_tool(other, {})
                text = "".join(getattr(c, "text", "") for c in by_name.content)
                check(by_name.is_error and "is a catalog API" not in text, f"by name: {text}")
            except Exception as e:  # a JSON-RPC error: an unknown tool
                check("is a catalog API" not in str(e), f"an unknown tool, not a hint that it exists: {e}")
            called = await session.call_tool("call_api", {"name": SNOW, "arguments": SNOW_ARGS})
            text = "".join(getattr(c, "text", "") for c in called.content)
            check(not called.is_error and "days with snow" in text, f"a weather API is called: {text}")
    print("mcp ok")


def consent_face(url, limited, free):
    import time

    import openai

    client = openai.OpenAI(base_url=f"{url}/v1", api_key=free, max_retries=0, timeout=60)
    headers = {"Authorization": f"Bearer {free}"}

    def execute(text):
        r = client.chat.completions.with_raw_response.create(
            model="scripted", messages=[{"role": "user", "content": text}],
            extra_body={"toolrouter": {"mode": "execute", "decompose": False}})
        body = r.parse()
        return body.choices[0].message.content, body.model_dump()["toolrouter"]

    def consent(cid, key=free, allow=None):
        auth = {"Authorization": f"Bearer {key}"}
        if allow is None:
            return httpx.get(f"{url}/v1/consents/{cid}", headers=auth, timeout=30)
        return httpx.post(f"{url}/v1/consents/{cid}", json={"allow": allow}, headers=auth, timeout=30)

    ask = "How many ecoweather Schneetage snow days at lat 789.012 lon 123.456 since 2022-09-01?"
    content, report = execute(ask)
    check(report["status"] == "needs_consent", f"a destructive call stops the run: {report['status']} {content}")
    pending = report["trace"]["pending_consent"]
    check(len(pending) == 1 and pending[0]["function"] == SNOW and pending[0]["state"] == "pending", f"{pending}")
    cid = pending[0]["id"]
    check(cid in content and "consent" in content, f"the answer asks: {content}")
    check(consent(cid).json()["state"] == "pending", "GET shows it pending")
    check(consent(cid, key=limited).status_code == 404, "another key never sees it")
    check(consent(cid, allow=True).json()["state"] == "allowed", "confirmed")
    again = consent(cid, allow=False)
    check(again.status_code == 409 and again.json()["error"]["code"] == "consent_decided", f"decided once: {again.text}")
    content, report = execute(ask)
    check(report["status"] == "answered" and "days with snow" in content, f"run on consent: {report['status']} {content}")
    check(consent(cid).json()["state"] == "used", "a consent is used once")

    # The same call again (the scripted model calls it with the same
    # arguments): asked anew, refused, not made; the refusal holds.
    _, report = execute(ask)
    rid = report["trace"]["pending_consent"][0]["id"]
    check(rid != cid, "a used consent is not used again")
    check(consent(rid, allow=False).json()["state"] == "refused", "refused")
    content, report = execute(ask)
    check(report["status"] != "answered" and "days with snow" not in content, f"not made when refused: {report['status']} {content}")
    check(not report["trace"]["pending_consent"], "a refused call is not asked again at once")

    # Once the refusal has lapsed (its timeout, twice), asked anew; not
    # answered in time, refused.
    time.sleep(4.5)
    _, report = execute(ask)
    lid = report["trace"]["pending_consent"][0]["id"]
    time.sleep(2.5)
    check(consent(lid).json()["state"] == "refused", "refused after the timeout")
    check(consent(lid, allow=True).status_code == 409, "too late to confirm")
    content, report = execute(ask)
    check(report["status"] != "answered" and "days with snow" not in content, f"not made after the timeout: {content}")
    bad = httpx.post(f"{url}/v1/consents/{lid}", json={"allow": "yes"}, headers=headers, timeout=30)
    check(bad.status_code == 400, f"a bad body is a 400: {bad.text}")
    print("consent ok")


async def mcp_consent_face(url, free):
    import httpx2
    import mcp.types as types
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    asked = []

    def answering(result):
        async def callback(context, params):
            asked.append(params.message)
            return result
        return callback

    async def call_snow(callback):
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {free}"}, timeout=60)
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, *_):
            kwargs = {"elicitation_callback": callback} if callback else {}
            async with ClientSession(read, write, **kwargs) as session:
                await session.initialize()
                result = await session.call_tool("call_api", {"name": SNOW, "arguments": SNOW_ARGS})
                return result.is_error, "".join(getattr(c, "text", "") for c in result.content)

    error, text = await call_snow(answering(types.ElicitResult(action="decline")))
    check(error and "refused the call" in text, f"declined: {text}")
    check(asked and SNOW in asked[-1] and "change or delete" in asked[-1], f"the user is told what: {asked}")
    error, text = await call_snow(answering(types.ElicitResult(action="accept", content={"allow": False})))
    check(error and "did not allow" in text, f"not allowed: {text}")
    error, text = await call_snow(answering(types.ElicitResult(action="cancel")))
    check(error and "dismissed" in text, f"dismissed: {text}")
    error, text = await call_snow(answering(types.ElicitResult(action="accept", content={"allow": True})))
    check(not error and "days with snow" in text, f"allowed: {text}")
    before = len(asked)
    error, text = await call_snow(None)
    check(not error and "days with snow" in text and len(asked) == before, "a client that cannot be asked decides")
    print("mcp-consent ok")


async def mcp_stdio_face(toolrouter, config, other):
    """`toolrouter mcp` over stdio (the environment passed on), its config
    putting it under the weather policy (`mcp.stdio_policy`)."""
    import os

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=toolrouter, args=["--config", config, "mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await weather_only(session, "stdio")
            refused = await session.call_tool("call_api", {"name": other, "arguments": {}})
            text = "".join(getattr(c, "text", "") for c in refused.content)
            check(refused.is_error and "not allowed" in text and "weather-desk" in text, f"stdio: call_api refuses: {text}")
            called = await session.call_tool("call_api", {"name": SNOW, "arguments": SNOW_ARGS})
            text = "".join(getattr(c, "text", "") for c in called.content)
            check(not called.is_error and "days with snow" in text, f"stdio: a weather API is called: {text}")
    print("mcp-stdio ok")


def main():
    face, url = sys.argv[1], sys.argv[2]
    if face == "mcp-stdio":
        asyncio.run(mcp_stdio_face(url, sys.argv[3], sys.argv[4]))
        return
    if face == "openai":
        openai_face(url, sys.argv[3], sys.argv[4], sys.argv[5])
    elif face == "anthropic":
        anthropic_face(url, sys.argv[3], sys.argv[4])
    elif face == "mcp-consent":
        asyncio.run(mcp_consent_face(url, sys.argv[4]))
    elif face == "consent":
        consent_face(url, sys.argv[3], sys.argv[4])
    elif face == "mcp":
        asyncio.run(mcp_face(url, sys.argv[3], sys.argv[4]))
    else:
        check(False, f"unknown face {face}")


if __name__ == "__main__":
    main()
