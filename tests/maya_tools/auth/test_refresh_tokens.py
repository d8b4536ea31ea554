"""A host that signs in as Claude does (a public client, PKCE, ``offline_access`` besides the resource's
scopes) gets a refresh token from the provider; the resource server takes the token that carries
``offline_access``, answers the expired one with the 401 challenge, and takes the refreshed one.

The provider issues first tokens for 300 s and refreshed ones for 3600 s, so at one instant of the
server's (injected) clock the first has expired and the refreshed one has not: no sleep."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx2
import pytest

from maya_tools.auth.tokens import LEEWAY
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.maya_tools.auth.served import METADATA, RESOURCE, SCOPE_PARAM, Served, served
from tests.oidc import ADMIN, OpenIDProvider, claims_of

pytestmark = pytest.mark.anyio

CLAUDE_SCOPES = ("openid", "email", "maya.read", "maya.change", "offline_access")


@pytest.fixture(scope="module")
def provider() -> Iterator[OpenIDProvider]:
    with OpenIDProvider([RESOURCE], access_token_ttl=300, refreshed_token_ttl=3600).running() as running:
        yield running


@pytest.fixture
async def site(provider: OpenIDProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Served]:
    backend = ReferenceBackend(clock=ManualClock(), seed="demo")
    async with served(provider, backend, tmp_path / "cards.sqlite3", monkeypatch) as running:
        yield running


async def tools(site: Served, token: str) -> httpx2.Response:
    """``tools/list`` with ``token``: a 200 once it verifies, else the refusal."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    async with site.http(token, accept="application/json, text/event-stream") as http:
        return await http.post("/mcp", json=initialize)


async def test_a_refreshed_token_keeps_working_and_the_expired_one_gets_the_401_challenge(
    site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient
) -> None:
    host = await provider.register_client(client_http, scope=" ".join(CLAUDE_SCOPES))
    assert host.client_secret is None, "a public client, as hosts register (token_endpoint_auth_method none)"
    first = await provider.sign_in(client_http, ADMIN, scopes=CLAUDE_SCOPES, resource=RESOURCE, client=host)
    assert first.refresh_token is not None, "offline_access gives the host a refresh token"
    # offline_access is the provider's own scope: the access token for the resource carries the resource's.
    assert first.scope.split() == ["maya.read", "maya.change"]
    taken = await tools(site, first.access_token)
    assert taken.status_code == 200, taken.text

    # The server's clock just past the first token's life (and the leeway): it is refused with the
    # challenge that names the metadata and the scopes, so the host knows to refresh or sign in again.
    expired_at = claims_of(first.access_token)["exp"] + LEEWAY + 1
    assert site.runtime.verifier is not None
    site.runtime.verifier._clock = lambda: expired_at
    refused = await tools(site, first.access_token)
    assert refused.status_code == 401, refused.text
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token"')
    assert f'resource_metadata="{METADATA}"' in challenge and SCOPE_PARAM in challenge

    renewed = await provider.refresh(client_http, host, first.refresh_token, resource=RESOURCE)
    claims = claims_of(renewed.access_token)
    assert claims["aud"] == RESOURCE and claims["exp"] > expired_at + LEEWAY
    assert {"maya.read", "maya.change"} <= set(claims["scope"].split())
    again = await tools(site, renewed.access_token)
    assert again.status_code == 200, again.text
    assert first.refresh_token not in again.text and renewed.access_token not in again.text
