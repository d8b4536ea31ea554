"""A real ``maya-tools serve --transport streamable-http`` with OAuth (the embedded reference backend as
Door) and the real test provider, reached by the MCP SDK's own OAuth client
(``mcp.client.auth.OAuthClientProvider``): discovery of the resource metadata and of the issuer,
Dynamic Client Registration, PKCE authorization (the provider's login and consent by plain form
posts), token, ``tools/list``, a read and an approved change, in both protocol generations."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from mcp.client import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from backend_client.tls import verifying_tls
from maya_tools.auth import ConnectionInfo, Principal, open_credentials, parse_credential_keys
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN
from tests.maya_tools.conftest import Person
from tests.maya_tools.live import REF_ADMIN, Proc, base_env, free_port
from tests.oidc import ADMIN, MEMBER, SERVER_CLIENT_ID, SERVER_CLIENT_SECRET, OpenIDProvider, User

pytestmark = pytest.mark.anyio

MODES = ["legacy", "modern"]
CALLBACK = "http://127.0.0.1:9/mcp-client/callback"  # never fetched: the flow stops at the redirect to it
SCALE = {"cluster": "payments-prod", "pool": "workers", "count": 3}


@dataclass
class World:
    provider: OpenIDProvider
    server: Proc
    door: Proc
    public_url: str
    card_store: Path
    key: str

    @property
    def door_url(self) -> str:
        return f"http://127.0.0.1:{self.door.port}"

    def admin(self, method: str, path: str, **kwargs: Any) -> httpx2.Response:
        with httpx2.Client(verify=verifying_tls(), base_url=self.door_url, timeout=10) as http:
            return http.request(method, path, headers={"Authorization": f"Bearer {REF_ADMIN}"}, **kwargs)

    def door_requests(self) -> list[dict[str, Any]]:
        """Door's request log (``GET /_reference/requests``): method, path and status of each call."""
        return list(self.admin("GET", "/_reference/requests").json()["items"])

    @property
    def mcp_url(self) -> str:
        return self.public_url + "/mcp"

    async def connect_door(self, user: User, door_token: str) -> Principal:
        """Store ``door_token`` as ``user``'s own in the server's database, as ``/connect`` does."""
        person = Principal(issuer=self.provider.issuer, subject=user.sub, name=user.email)
        credentials = await open_credentials(self.card_store, parse_credential_keys(self.key))
        try:
            checked = ConnectionInfo(checked_at=datetime.now(UTC), organisations=(), clusters=())
            await credentials.put(person, door_token, checked=checked)
        finally:
            await credentials.close()
        return person


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("oauth-serve")
    port = free_port()
    public_url = f"http://127.0.0.1:{port}"
    key = secrets.token_hex(32)
    door_port = free_port()
    door = Proc(
        [
            "reference-backend",
            "--port",
            str(door_port),
            "--state",
            str(tmp / "door.sqlite3"),
            "--admin-token",
            REF_ADMIN,
            "--manual-clock",
        ],
        door_port,
        base_env(),
    )
    # the server's own confidential client signs people in on /connect and the approval page
    with OpenIDProvider([public_url + "/mcp"], redirect_uris=[public_url + "/auth/callback"]).running() as provider:
        env = {
            **base_env(),
            "DOOR_API_URL": f"http://127.0.0.1:{door_port}",
            "MAYA_CARD_STORE": str(tmp / "cards.sqlite3"),
            "MAYA_OAUTH_ISSUER": provider.issuer,
            "MAYA_PUBLIC_URL": public_url,
            "MAYA_OAUTH_CLIENT_ID": SERVER_CLIENT_ID,
            "MAYA_OAUTH_CLIENT_SECRET": SERVER_CLIENT_SECRET,
            "MAYA_CREDENTIAL_KEY": key,
        }
        server = Proc(["serve", "--transport", "streamable-http", "--port", str(port)], port, env)
        try:
            yield World(provider, server, door, public_url, tmp / "cards.sqlite3", key)
        finally:
            server.stop()
            door.stop()


@pytest.fixture
def fresh(world: World) -> World:
    """The world with Door reset to the demo seed (no operation running, the request log empty)."""
    response = world.admin("POST", "/_reference/reset", json={"seed": "demo"})
    assert response.status_code == 200, response.text
    return world


class Memory:
    """The SDK's ``TokenStorage``, in memory: one MCP client's registration and tokens."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class PersonAtTheBrowser:
    """The SDK's ``redirect_handler`` and ``callback_handler``: ``user`` opens the authorization URL,
    signs in and consents at the provider by its own form posts, and hands back the redirect's code."""

    def __init__(self, provider: OpenIDProvider, user: User, *, first_consent: str | None = None) -> None:
        self.provider = provider
        self.user = user
        self.first_consent = first_consent
        """The scopes the person grants at their first sign-in, fewer than asked (as a consent screen with
        boxes to untick lets them); later sign-ins grant what is asked."""
        self.opened: list[str] = []
        self._callback: asyncio.Future[dict[str, list[str]]] | None = None

    async def redirect(self, authorization_url: str) -> None:
        self.opened.append(authorization_url)
        params = {name: values[0] for name, values in parse_qs(urlsplit(authorization_url).query).items()}
        if self.first_consent is not None and len(self.opened) == 1:
            params["scope"] = self.first_consent
        callback = await self.provider._browse(self.user, params, params["redirect_uri"])
        self._callback = asyncio.get_running_loop().create_future()
        self._callback.set_result(callback)

    async def callback(self) -> AuthorizationCodeResult:
        assert self._callback is not None, "the authorization URL was never opened"
        got = await self._callback
        assert "error" not in got, got
        return AuthorizationCodeResult(code=got["code"][0], state=got["state"][0], iss=got.get("iss", [None])[0])


def oauth_client(
    world: World, user: User, storage: Memory, scope: str = "maya.read maya.change", first_consent: str | None = None
) -> OAuthClientProvider:
    browser = PersonAtTheBrowser(world.provider, user, first_consent=first_consent)
    provider = OAuthClientProvider(
        world.mcp_url,
        OAuthClientMetadata(
            client_name="maya-tools test client",
            redirect_uris=[CALLBACK],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            scope=scope,
        ),
        storage,
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
    )
    provider.browser = browser  # type: ignore[attr-defined]
    return provider


def client_for(auth: OAuthClientProvider, seen: list[str]) -> httpx2.AsyncClient:
    async def record(request: httpx2.Request) -> None:
        seen.append(f"{request.method} {request.url}")

    return httpx2.AsyncClient(verify=verifying_tls(), timeout=30.0, auth=auth, event_hooks={"request": [record]})


@pytest.mark.parametrize("mode", MODES)
async def test_the_sdks_oauth_client_signs_in_lists_reads_and_changes(fresh: World, mode: str) -> None:
    world = fresh
    since = world.admin("GET", "/_reference/requests").json()["next"]
    person = await world.connect_door(ADMIN, DEMO_ADMIN_TOKEN)
    storage = Memory()
    auth = oauth_client(world, ADMIN, storage)
    seen: list[str] = []
    kwargs = {"mode": "legacy"} if mode == "legacy" else {}
    answering = Person("accept")

    async with (
        client_for(auth, seen) as http,
        Client(
            streamable_http_client(world.mcp_url, http_client=http), elicitation_callback=answering, **kwargs
        ) as client,
    ):
        tools = await client.list_tools()
        listed = await client.call_tool("list_clusters", {})
        done = await client.call_tool("scale_node_pool", SCALE)
        assert done.structured_content is not None, done.content
        shown = await client.call_tool("get_card", {"card_id": done.structured_content["card"]["id"]})

    assert {"list_clusters", "scale_node_pool", "get_card"} <= {tool.name for tool in tools.tools}
    assert not listed.is_error and "payments-prod" in json.dumps(listed.structured_content)
    # discovery: the resource's metadata, then the issuer's, then registration, authorization and token
    assert any(url.startswith(f"GET {world.public_url}/.well-known/oauth-protected-resource") for url in seen)
    issuer = world.provider.issuer
    assert any(url.startswith(f"GET {issuer}/.well-known/") for url in seen), seen
    assert f"POST {world.provider.metadata['registration_endpoint']}" in seen
    assert f"POST {world.provider.metadata['token_endpoint']}" in seen
    assert storage.client is not None and storage.client.client_secret is None  # a public client, by DCR
    (opened,) = auth.browser.opened  # type: ignore[attr-defined]
    query = parse_qs(urlsplit(opened).query)
    assert query["code_challenge_method"] == ["S256"] and query["resource"] == [world.mcp_url]
    assert done.structured_content["changed"] is True and len(answering.messages) == 1
    assert shown.structured_content is not None
    (approved,) = [e for e in shown.structured_content["audit"] if e["event"] == "approved"]
    assert approved["by"].startswith(f"admin@door.test (sub admin, {person.key}) via ")
    assert storage.tokens is not None and storage.tokens.access_token not in json.dumps(shown.structured_content)
    # Door answered every call of the person's own token; an MCP access token would have been a 401 (R-AUTH-01)
    calls = [r for r in world.door_requests() if r["seq"] > since]
    assert calls and all(r["status"] < 400 for r in calls), calls
    assert any(r["method"] == "PATCH" and r["status"] == 202 for r in calls), calls


@pytest.mark.parametrize("mode", MODES)
async def test_a_member_is_refused_by_doors_rule_with_their_own_door_token(fresh: World, mode: str) -> None:
    """The member's change reaches Door with the member's own Door token, and Door's R-AUTH-03 refuses
    it as today: the server, which has no DOOR_TOKEN, never lends anyone another token."""
    world = fresh
    await world.connect_door(MEMBER, DEMO_MEMBER_TOKEN)
    auth = oauth_client(world, MEMBER, Memory())
    kwargs = {"mode": "legacy"} if mode == "legacy" else {}
    async with (
        client_for(auth, []) as http,
        Client(
            streamable_http_client(world.mcp_url, http_client=http), elicitation_callback=Person("accept"), **kwargs
        ) as client,
    ):
        failed = await client.call_tool("scale_node_pool", SCALE)

    # the first time Door's 403 fails the approved card; once the role is known, it is refused up front
    if failed.structured_content is not None:
        assert failed.structured_content["status"] == "failed"
        assert "R-AUTH-03" in failed.structured_content["message"]
    else:
        assert failed.is_error and "R-AUTH-03" in failed.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
async def test_a_read_only_sign_in_steps_up_when_the_person_asks_for_a_change(fresh: World, mode: str) -> None:
    """The person granted only ``maya.read`` at sign-in: reads work, and a change meets the 403
    ``insufficient_scope``; the SDK's client signs them in again for the scopes the challenge names
    (step-up) and retries, and the change then makes its card and is approved."""
    world = fresh
    await world.connect_door(ADMIN, DEMO_ADMIN_TOKEN)
    storage = Memory()
    auth = oauth_client(world, ADMIN, storage, first_consent="maya.read")
    kwargs = {"mode": "legacy"} if mode == "legacy" else {}
    async with (
        client_for(auth, []) as http,
        Client(
            streamable_http_client(world.mcp_url, http_client=http), elicitation_callback=Person("accept"), **kwargs
        ) as client,
    ):
        listed = await client.call_tool("list_clusters", {})
        assert storage.tokens is not None and "maya.change" not in (storage.tokens.scope or "")
        done = await client.call_tool("scale_node_pool", SCALE)

    assert not listed.is_error
    assert done.structured_content is not None and done.structured_content["changed"] is True, done.content
    _, second = auth.browser.opened  # type: ignore[attr-defined]
    assert set(parse_qs(urlsplit(second).query)["scope"][0].split()) >= {"maya.read", "maya.change"}
    assert "maya.change" in (storage.tokens.scope or "")
