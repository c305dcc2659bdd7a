"""toolrouter under LangChain: `ChatOpenAI` with `base_url` pointed at it.

    pip install langchain-openai
    toolrouter serve          # with llm.base_url naming your model server
    python examples/langchain_pipeline.py [BASE_URL] [API_KEY] [MODEL]
"""

import sys

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

base = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
key = sys.argv[2] if len(sys.argv) > 2 else "none"
model = sys.argv[3] if len(sys.argv) > 3 else "gpt-4o-mini"


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"Sunny and 21 C in {city}."


llm = ChatOpenAI(base_url=f"{base}/v1", api_key=key, model=model)
agent = llm.bind_tools([get_weather])

messages = [HumanMessage("What's the weather in Berlin?")]
reply = agent.invoke(messages)
messages.append(reply)
for call in reply.tool_calls:
    messages.append(ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"]))
if reply.tool_calls:
    print(agent.invoke(messages).content)
else:
    print(reply.content)

for chunk in llm.stream("Name three rivers."):
    print(chunk.content, end="", flush=True)
print()
