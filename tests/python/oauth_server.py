"""An OAuth 2.1 authorization server for tests: the `mcp` SDK's own
authorization-server routes (`mcp.server.auth`: RFC 8414 metadata, dynamic
client registration, authorization with PKCE, token exchange) over a
provider that approves at once, as the user "alice" granted only
`tools:weather`, and issues RS256 JWTs (PyJWT) for the resource the client
names (RFC 8707). Its keys are at /jwks, named in its metadata.

    python oauth_server.py        # prints "listening on http://127.0.0.1:PORT"

Test-only endpoints:

    GET /test/mint?sub=&aud=&scope=&exp_in=&nbf_in=&key=known|unknown
        a token as asked (key "unknown": signed by a key the JWKS lacks)
    GET /test/jwks?mode=up|down|slow
        the JWKS answers, fails (502) or takes 30 s
"""

import asyncio
import secrets
import socket
import time

import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp.server.auth.provider import AuthorizationCode, construct_redirect_uri
from mcp.server.auth.routes import build_metadata, create_auth_routes
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthToken
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

GRANTED = ["tools:weather"]
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
UNKNOWN = rsa.generate_private_key(public_exponent=65537, key_size=2048)
KID = "test-key"
jwks_mode = {"mode": "up"}


def mint(issuer, sub, aud, scopes, exp_in=300, nbf_in=None, key=KEY, kid=KID):
    now = int(time.time())
    claims = {"iss": issuer, "sub": sub, "aud": aud, "iat": now, "exp": now + exp_in, "scope": " ".join(scopes)}
    if nbf_in is not None:
        claims["nbf"] = now + nbf_in
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


class Provider:
    """Approves every authorization request at once (the user said yes)."""

    def __init__(self, issuer):
        self.issuer = issuer
        self.clients = {}
        self.codes = {}

    async def get_client(self, client_id):
        return self.clients.get(client_id)

    async def register_client(self, client_info):
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client, params):
        code = secrets.token_urlsafe(24)
        scopes = [s for s in (params.scopes or []) if s in GRANTED]
        self.codes[code] = AuthorizationCode(
            code=code, scopes=scopes, expires_at=time.time() + 300, client_id=client.client_id,
            code_challenge=params.code_challenge, redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource, subject="alice")
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client, authorization_code):
        code = self.codes.get(authorization_code)
        return code if code and code.client_id == client.client_id else None

    async def exchange_authorization_code(self, client, authorization_code):
        self.codes.pop(authorization_code.code, None)
        token = mint(self.issuer, authorization_code.subject, authorization_code.resource, authorization_code.scopes)
        return OAuthToken(access_token=token, token_type="Bearer", expires_in=300,
                          scope=" ".join(authorization_code.scopes))

    async def load_refresh_token(self, client, refresh_token):
        return None

    async def exchange_refresh_token(self, client, refresh_token, scopes):
        raise NotImplementedError

    async def load_access_token(self, token):
        return None

    async def revoke_token(self, token):
        pass


def app_for(issuer):
    registration = ClientRegistrationOptions(enabled=True)
    revocation = RevocationOptions()
    metadata = build_metadata(AnyHttpUrl(issuer), None, registration, revocation).model_dump(
        mode="json", exclude_none=True)
    # The issuer exactly as tokens' `iss` name it (pydantic adds a trailing
    # slash, which RFC 8414's exact comparison in mcp 2.x refuses).
    metadata["issuer"] = issuer
    metadata["jwks_uri"] = f"{issuer}/jwks"

    async def server_metadata(request):
        return JSONResponse(metadata)

    async def jwks(request):
        if jwks_mode["mode"] == "down":
            return Response("upstream failure", status_code=502)
        if jwks_mode["mode"] == "slow":
            await asyncio.sleep(30)
        public = jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key(), as_dict=True)
        return JSONResponse({"keys": [{**public, "kid": KID, "use": "sig", "alg": "RS256"}]})

    async def test_mint(request):
        q = request.query_params
        nbf_in = int(q["nbf_in"]) if "nbf_in" in q else None
        key = UNKNOWN if q.get("key") == "unknown" else KEY
        kid = "rotated-away" if q.get("key") == "unknown" else KID
        token = mint(issuer, q.get("sub", "bob"), q["aud"], q.get("scope", "").split(),
                     int(q.get("exp_in", "300")), nbf_in, key, kid)
        return Response(token)

    async def test_jwks(request):
        jwks_mode["mode"] = request.query_params["mode"]
        return Response("ok")

    routes = [
        # Before the SDK's own metadata route: the same document, naming the JWKS.
        Route("/.well-known/oauth-authorization-server", server_metadata),
        Route("/jwks", jwks),
        Route("/test/mint", test_mint),
        Route("/test/jwks", test_jwks),
        *create_auth_routes(Provider(issuer), AnyHttpUrl(issuer), None, registration, revocation),
    ]
    return Starlette(routes=routes)


async def main():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    issuer = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app_for(issuer), log_level="warning"))
    print(f"listening on {issuer}", flush=True)
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main())
