"""A real OpenID provider (``tests.oidc``) per test module, the verifier under test on a clock the test
moves, and an HTTP client that counts what the verifier fetches from the issuer."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import httpx2
import pytest

from backend_client.tls import verifying_tls
from maya_tools.auth import JwtTokenVerifier
from tests.oidc import OpenIDProvider

RESOURCE = "https://maya.door.test/mcp"
OTHER_RESOURCE = "https://other.door.test/mcp"
# A resource per algorithm family besides RS256, whose tokens the module's provider signs with it.
FAMILIES = {alg: f"https://{alg.lower()}.door.test/mcp" for alg in ("ES256", "PS256", "EdDSA")}


class Clock:
    """Wall-clock seconds the test sets: the provider's clock is real, the verifier's is this."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Fetches:
    """Every request the verifier's HTTP client sends, by URL."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    async def record(self, request: httpx2.Request) -> None:
        self.urls.append(str(request.url))

    def count(self, url: str) -> int:
        return self.urls.count(url)


@pytest.fixture(scope="module")
def provider() -> Iterator[OpenIDProvider]:
    with OpenIDProvider(
        [RESOURCE, OTHER_RESOURCE], signing={url: alg for alg, url in FAMILIES.items()}
    ).running() as running:
        yield running


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fetches() -> Fetches:
    return Fetches()


@pytest.fixture
async def http(fetches: Fetches) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(
        verify=verifying_tls(), timeout=10.0, event_hooks={"request": [fetches.record]}
    ) as client:
        yield client


@pytest.fixture
async def client_http() -> AsyncIterator[httpx2.AsyncClient]:
    """The MCP client's own HTTP client, for the token requests (kept apart from the verifier's)."""
    async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10.0) as client:
        yield client


@pytest.fixture
def verifier(provider: OpenIDProvider, http: httpx2.AsyncClient, clock: Clock) -> JwtTokenVerifier:
    return JwtTokenVerifier(issuer=provider.issuer, resource=RESOURCE, http=http, clock=clock)
