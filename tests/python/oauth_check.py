"""OAuth through the `mcp` SDK's own client flow: toolrouter's `/mcp`
answers 401 with its challenge; the SDK reads the protected resource
metadata, the authorization server's metadata, registers, authorizes with
PKCE (the "browser" here follows the authorization URL to its redirect),
exchanges the code for a token for toolrouter's resource and calls tools
with it. The token's scope `tools:weather` puts it under the policy that
allows weather APIs only.

    python oauth_check.py URL      # toolrouter, its [server.oauth] on the server of oauth_server.py

Runs with the `mcp` SDK 1.x (httpx) and 2.x (httpx2), whose client
flows differ in their transport and callback types.

Exits non-zero with a message on the first failed check.
"""

import asyncio
import sys
from urllib.parse import parse_qs, urlparse

from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.shared.auth import OAuthClientMetadata
from pydantic import AnyUrl

try:  # mcp 2.x
    import httpx2 as httpx
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult

    def connect(url, auth):
        return streamable_http_client(url, http_client=httpx.AsyncClient(auth=auth, timeout=60))

    def code_result(code, state):
        return AuthorizationCodeResult(code=code, state=state)
except ImportError:  # mcp 1.x
    import httpx
    from mcp.client.streamable_http import streamablehttp_client

    def connect(url, auth):
        return streamablehttp_client(url, auth=auth, timeout=60)

    def code_result(code, state):
        return code, state


def field(result, new, old):
    """A result's field under its 2.x name, else its 1.x one."""
    return getattr(result, new) if hasattr(result, new) else getattr(result, old)

from policy_check import BROAD, SNOW, SNOW_ARGS, check, permitted


class Memory(TokenStorage):
    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


async def main(url):
    redirected = {}

    async def browser(authorization_url):
        """The user's browser: the server approves at once and redirects back."""
        async with httpx.AsyncClient() as http:
            answer = await http.get(authorization_url, follow_redirects=False)
        check(answer.status_code in (302, 303, 307), f"the authorization redirects: {answer.status_code} {answer.text}")
        query = parse_qs(urlparse(answer.headers["location"]).query)
        redirected.update(code=query["code"][0], state=query.get("state", [None])[0])

    async def callback():
        return code_result(redirected["code"], redirected["state"])

    storage = Memory()
    metadata = OAuthClientMetadata(client_name="toolrouter oauth check",
                                   redirect_uris=[AnyUrl("http://127.0.0.1:9/callback")],
                                   grant_types=["authorization_code", "refresh_token"], response_types=["code"])
    auth = OAuthClientProvider(server_url=f"{url}/mcp", client_metadata=metadata, storage=storage,
                               redirect_handler=browser, callback_handler=callback)
    async with connect(f"{url}/mcp", auth) as (read, write, *_):
        async with ClientSession(read, write) as session:
            await session.initialize()
            check(storage.tokens is not None and storage.client_info is not None,
                  "the SDK registered and got a token")
            check(storage.tokens.scope == "tools:weather", f"the token's scope: {storage.tokens.scope}")
            found = await session.call_tool("search_tools", {"query": BROAD, "k": 10})
            results = field(found, "structured_content", "structuredContent")["results"]
            check(results and all(permitted(r) for r in results),
                  f"the token's policy: weather APIs only: {[(r['name'], r['category']) for r in results]}")
            called = await session.call_tool("call_api", {"name": SNOW, "arguments": SNOW_ARGS})
            text = "".join(getattr(c, "text", "") for c in called.content)
            check(not field(called, "is_error", "isError") and "days with snow" in text, f"a weather API is called: {text}")
    print("oauth ok")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
