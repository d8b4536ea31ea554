"""The test provider (``provider.mjs``) behaves as its header says: PKCE required, its own login form
checks the password, registration is open, tokens are JWTs for the resource with the configured TTL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest

from backend_client.tls import verifying_tls
from tests.oidc import ADMIN, REDIRECT_URI, SERVER_CLIENT_ID, OpenIDProvider, SignInRefused, claims_of

pytestmark = pytest.mark.anyio

RESOURCE = "https://maya.door.test/mcp"


@pytest.fixture(scope="module")
def provider() -> Iterator[OpenIDProvider]:
    with OpenIDProvider([RESOURCE], access_token_ttl=120).running() as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10.0) as client:
        yield client


async def test_an_authorization_request_without_pkce_is_refused(
    provider: OpenIDProvider, http: httpx2.AsyncClient
) -> None:
    params = {
        "response_type": "code",
        "client_id": SERVER_CLIENT_ID,
        "redirect_uri": REDIRECT_URI,
        "scope": "maya.read",
    }

    response = await http.get(provider.metadata["authorization_endpoint"], params={**params, "resource": RESOURCE})

    assert response.is_redirect and response.headers["location"].startswith(REDIRECT_URI)
    callback = parse_qs(urlsplit(response.headers["location"]).query)
    assert callback["error"] == ["invalid_request"]
    assert "PKCE" in callback["error_description"][0]


async def test_a_wrong_password_is_refused_at_the_login_form(
    provider: OpenIDProvider, http: httpx2.AsyncClient
) -> None:
    with pytest.raises(SignInRefused, match="403"):
        await provider.sign_in(http, replace(ADMIN, password="guess"), scopes=["maya.read"], resource=RESOURCE)


async def test_tokens_carry_the_resource_the_scopes_and_the_configured_lifetime(
    provider: OpenIDProvider, http: httpx2.AsyncClient
) -> None:
    client = await provider.register_client(http)
    tokens = await provider.sign_in(http, ADMIN, scopes=["openid", "maya.read"], resource=RESOURCE, client=client)

    claims = claims_of(tokens.access_token)
    assert (claims["aud"], claims["scope"], claims["client_id"]) == (RESOURCE, "maya.read", client.client_id)
    assert claims["exp"] - claims["iat"] == tokens.expires_in == 120
