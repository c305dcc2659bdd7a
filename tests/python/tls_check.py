"""toolrouter over TLS with real clients, trusting only the test's own
certificate (CA_PEM):

    python tls_check.py openai URL CA_PEM KEY   # the openai SDK: models, a chat refused without a model
    python tls_check.py mcp URL CA_PEM KEY      # the mcp SDK over streamable HTTP: initialize, tools/list
    python tls_check.py serves URL CERT_PEM     # exits 0 when the listener presents CERT_PEM
"""

import asyncio
import hashlib
import ssl
import sys
from urllib.parse import urlparse

from checking import check


def openai_check(url, ca, key):
    import httpx
    from openai import APIConnectionError, APIStatusError, OpenAI

    client = OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, http_client=httpx.Client(verify=ca))
    models = client.models.list()
    check(models.object == "list", f"models over TLS: {models}")
    try:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        check(False, "a chat without a model server must fail")
    except APIStatusError as e:
        check(e.status_code == 503, f"no model: {e.status_code} {e}")
    # A client that does not trust the certificate is refused by its own TLS check.
    untrusting = OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
    try:
        untrusting.models.list()
        check(False, "a client without the CA must not connect")
    except APIConnectionError:
        pass
    print("ok (openai over TLS)")


async def mcp_check(url, ca, key):
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60, verify=ca)
    async with streamable_http_client(f"{url}/mcp", http_client=client) as (read, write, *_):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            names = {t.name for t in tools.tools}
            check("search_tools" in names, f"tools over TLS: {names}")
    print("ok (mcp over TLS)")


def serves(url, cert_file):
    """Whether the listener's leaf certificate is the one in `cert_file`."""
    parsed = urlparse(url)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    import socket

    with socket.create_connection((parsed.hostname, parsed.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            served = tls.getpeercert(binary_form=True)
    with open(cert_file) as f:
        wanted = ssl.PEM_cert_to_DER_cert(f.read())
    same = hashlib.sha256(served).digest() == hashlib.sha256(wanted).digest()
    print("same" if same else "other")
    sys.exit(0 if same else 1)


mode = sys.argv[1]
if mode == "openai":
    openai_check(*sys.argv[2:5])
elif mode == "mcp":
    asyncio.run(mcp_check(*sys.argv[2:5]))
elif mode == "serves":
    serves(*sys.argv[2:4])
else:
    check(False, f"unknown mode {mode}")
