"""The verifier inside the MCP SDK's own resource-server middleware (``mcp.server.auth``): the SDK's
RFC 8707 resource check accepts what it verified, and refusals become the SDK's 401 and 403."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from maya_tools.auth import JwtTokenVerifier
from tests.maya_tools.auth.conftest import RESOURCE, Clock
from tests.oidc import ADMIN, MEMBER, OpenIDProvider

pytestmark = pytest.mark.anyio

METADATA = "https://maya.door.test/.well-known/oauth-protected-resource/mcp"


async def whoami(scope: Scope, receive: Receive, send: Send) -> None:
    await PlainTextResponse(scope["user"].access_token.principal.name)(scope, receive, send)


@pytest.fixture
async def mcp(verifier: JwtTokenVerifier) -> AsyncIterator[httpx2.AsyncClient]:
    guarded = RequireAuthMiddleware(whoami, ["maya.change"], AnyHttpUrl(METADATA))
    backend = BearerAuthBackend(verifier, resource_server_url=AnyHttpUrl(RESOURCE))
    app = Starlette(
        routes=[Route("/mcp", guarded, methods=["POST"])],
        middleware=[Middleware(AuthenticationMiddleware, backend=backend)],
    )
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="https://maya.door.test") as client:
        yield client


async def test_a_verified_token_passes_the_sdks_resource_check(
    provider: OpenIDProvider, mcp: httpx2.AsyncClient, client_http: httpx2.AsyncClient
) -> None:
    token = await provider.access_token(client_http, ADMIN)

    response = await mcp.post("/mcp", headers={"authorization": f"Bearer {token}"})

    assert (response.status_code, response.text) == (200, "admin@door.test")


async def test_a_refused_token_is_401_with_the_resource_metadata(
    provider: OpenIDProvider, mcp: httpx2.AsyncClient, client_http: httpx2.AsyncClient, clock: Clock
) -> None:
    token = await provider.access_token(client_http, ADMIN)
    clock.advance(3600)

    response = await mcp.post("/mcp", headers={"authorization": f"Bearer {token}"})

    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    assert f'resource_metadata="{METADATA}"' in response.headers["www-authenticate"]


async def test_a_token_without_the_scope_is_403(
    provider: OpenIDProvider, mcp: httpx2.AsyncClient, client_http: httpx2.AsyncClient
) -> None:
    token = await provider.access_token(client_http, MEMBER, scopes=["maya.read"])

    response = await mcp.post("/mcp", headers={"authorization": f"Bearer {token}"})

    assert response.status_code == 403
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]
