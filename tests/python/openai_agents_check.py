"""Runs an OpenAI Agents SDK agent with two function tools through
toolrouter, against the scripted model server: once on the SDK's Responses
model (`/v1/responses`), once on its Chat Completions model
(`/v1/chat/completions`), and streamed on the Responses model. The agent
must call both tools in turn (the scripted model asks for the weather, then
the time) and answer with both results. Then an agent whose weather tool
is deferred (`function_tool(defer_loading=True)`) beside a `ToolSearchTool`:
toolrouter runs the search, the agent calls the tool found and answers.

    python openai_agents_check.py TOOLROUTER_URL API_KEY
"""

import asyncio
import sys

from agents import (Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, ToolSearchTool, function_tool,
                    set_tracing_disabled)
from openai import AsyncOpenAI

from checking import check

base, key = sys.argv[1], sys.argv[2]
set_tracing_disabled(True)  # the SDK would export traces to OpenAI
client = AsyncOpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
CALLS = []


@function_tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    CALLS.append(("weather", city))
    return f"Sunny in {city}, 21 C"


@function_tool
def get_time(city: str) -> str:
    """The local time in a city."""
    CALLS.append(("time", city))
    return f"It is 14:05 in {city}"


@function_tool(defer_loading=True)
def get_weather_deferred(city: str) -> str:
    """Current weather for a city."""
    CALLS.append(("deferred weather", city))
    return f"Rainy in {city}, 12 C"


def agent(model):
    return Agent(name="assistant", instructions="Answer with the tools.", tools=[get_weather, get_time], model=model)


async def main():
    for name, model in [("responses", OpenAIResponsesModel(model="scripted", openai_client=client)),
                        ("chat", OpenAIChatCompletionsModel(model="scripted", openai_client=client))]:
        CALLS.clear()
        result = await Runner.run(agent(model), "weather-and-time in Berlin")
        check(CALLS == [("weather", "Berlin"), ("time", "Berlin")], f"{name}: tools called {CALLS}")
        out = result.final_output
        check("Sunny in Berlin" in out and "14:05 in Berlin" in out, f"{name}: final output {out!r}")
    CALLS.clear()
    streamed = Runner.run_streamed(agent(OpenAIResponsesModel(model="scripted", openai_client=client)),
                                   "weather-and-time in Berlin")
    kinds = [event.type async for event in streamed.stream_events()]
    check(CALLS == [("weather", "Berlin"), ("time", "Berlin")], f"streamed: tools called {CALLS}")
    check("raw_response_event" in kinds and "14:05" in streamed.final_output, f"streamed: {streamed.final_output!r}")
    # Deferred tools and the hosted tool search: toolrouter searches, the agent calls what it found.
    CALLS.clear()
    searching = Agent(name="assistant", instructions="Answer with the tools.", tools=[ToolSearchTool(), get_weather_deferred],
                      model=OpenAIResponsesModel(model="scripted", openai_client=client))
    result = await Runner.run(searching, "Weather in Berlin?")
    kinds = [item.type for item in result.new_items]
    check(CALLS == [("deferred weather", "Berlin")] and "Rainy in Berlin" in result.final_output, f"searched: {CALLS} {result.final_output!r}")
    check(kinds[:2] == ["tool_search_call_item", "tool_search_output_item"], f"search items: {kinds}")


asyncio.run(main())
import agents  # noqa: E402

print("ok (openai-agents", agents.__version__ + ")")
