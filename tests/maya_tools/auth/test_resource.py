"""``serve --auth oauth``'s HTTP app (``maya_tools.http.build_app``) in process, against the real test
provider: the resource metadata, each refusal's status and ``WWW-Authenticate``, the step-up 403
that makes no card, and the person's own Door token (never the MCP token) reaching Door."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult

from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN
from tests.maya_tools.auth.conftest import OTHER_RESOURCE
from tests.maya_tools.auth.served import METADATA, PUBLIC_URL, RESOURCE, SCOPE_PARAM, Served, served
from tests.oidc import ADMIN, MEMBER, OpenIDProvider, claims_of

pytestmark = pytest.mark.anyio

MODES = ["legacy", "modern"]
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
SCALE = {"cluster": "payments-prod", "pool": "workers", "count": 3}


def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def segment(value: dict[str, Any]) -> str:
    return b64(json.dumps(value).encode())


@pytest.fixture
def backend() -> ReferenceBackend:
    return ReferenceBackend(clock=ManualClock(), seed="demo")


@pytest.fixture
async def site(
    provider: OpenIDProvider, backend: ReferenceBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Served]:
    async with served(provider, backend, tmp_path / "cards.sqlite3", monkeypatch) as running:
        yield running


async def refused(site: Served, token: str | None) -> httpx2.Response:
    async with site.http(token) as http:
        return await http.post("/mcp", json=LIST, headers={"accept": "application/json, text/event-stream"})


# --- the metadata --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"])
async def test_the_protected_resource_metadata_names_the_resource_issuer_and_scopes(
    site: Served, provider: OpenIDProvider, path: str
) -> None:
    async with site.http() as http:
        response = await http.get(path)

    assert response.status_code == 200
    document = response.json()
    assert document["resource"] == RESOURCE
    assert document["authorization_servers"] == [provider.issuer]
    assert document["scopes_supported"] == ["maya.read", "maya.change"]
    assert document["bearer_methods_supported"] == ["header"]


# --- 401: each refusal ---------------------------------------------------------------------------


async def test_no_token_is_401_naming_the_metadata_and_the_scopes(site: Served) -> None:
    response = await refused(site, None)

    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge == f'Bearer resource_metadata="{METADATA}", {SCOPE_PARAM}'


async def assert_invalid_token(site: Served, token: str) -> None:
    response = await refused(site, token)
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token"')
    assert f'resource_metadata="{METADATA}"' in challenge and SCOPE_PARAM in challenge
    assert token not in response.text


async def test_an_expired_token_is_401(site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient) -> None:
    token = await provider.access_token(client_http, ADMIN)
    site.runtime.verifier._clock = lambda: claims_of(token)["exp"] + 3600  # type: ignore[union-attr]

    await assert_invalid_token(site, token)


async def test_a_token_for_another_resource_is_401(
    site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient
) -> None:
    token = await provider.access_token(client_http, ADMIN, resource=OTHER_RESOURCE)
    assert claims_of(token)["aud"] == OTHER_RESOURCE

    await assert_invalid_token(site, token)


async def test_another_issuers_token_is_401(site: Served, client_http: httpx2.AsyncClient) -> None:
    with OpenIDProvider([RESOURCE]).running() as other:
        token = await other.access_token(client_http, ADMIN)
    assert claims_of(token)["aud"] == RESOURCE  # for this very resource, from someone else

    await assert_invalid_token(site, token)


async def test_alg_none_is_401(site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient) -> None:
    token = await provider.access_token(client_http, ADMIN)
    header = jwt.get_unverified_header(token)

    await assert_invalid_token(site, f"{segment({**header, 'alg': 'none'})}.{segment(claims_of(token))}.")


async def test_an_hmac_token_signed_with_the_public_key_is_401(
    site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient
) -> None:
    token = await provider.access_token(client_http, ADMIN)
    header = jwt.get_unverified_header(token)
    jwk = next(k for k in (await provider.jwks(client_http))["keys"] if k["kid"] == header["kid"])
    public_pem = jwt.PyJWK(jwk).key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signing_input = f"{segment({**header, 'alg': 'HS256'})}.{segment(claims_of(token))}"
    forged = f"{signing_input}.{b64(hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest())}"

    await assert_invalid_token(site, forged)


# --- 403: scopes ---------------------------------------------------------------------------------


async def test_a_token_without_maya_change_gets_a_step_up_403_on_a_change_tool_and_no_card(
    site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient
) -> None:
    await site.connect_door(MEMBER, DEMO_MEMBER_TOKEN)
    token = await provider.access_token(client_http, MEMBER, scopes=["openid", "email", "maya.read"])

    async with site.http(token) as http:
        response = await http.post(
            "/mcp",
            json=call("scale_node_pool", SCALE),
            headers={"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28"},
        )

    assert response.status_code == 403
    assert response.headers["www-authenticate"] == (
        'Bearer error="insufficient_scope", error_description="Tool scale_node_pool needs scope maya.change: '
        f'sign in again granting it", resource_metadata="{METADATA}", {SCOPE_PARAM}'
    )
    assert await site.cards() == []
    assert site.door_bearers == []  # nothing reached Door


@pytest.mark.parametrize("mode", MODES)
async def test_a_read_token_reads_with_the_persons_own_door_token_but_cannot_change(
    site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient, mode: str
) -> None:
    await site.connect_door(MEMBER, DEMO_MEMBER_TOKEN)
    token = await provider.access_token(client_http, MEMBER, scopes=["openid", "email", "maya.read"])

    async with site.mcp(token, mode) as client:
        listed = await client.call_tool("list_clusters", {})
        assert not listed.is_error, listed.content
        with pytest.raises(MCPError):  # the SDK's client reports the HTTP 403 as an error response
            await client.call_tool("scale_node_pool", SCALE)

    assert await site.cards() == []
    assert site.door_bearers and set(site.door_bearers) == {f"Bearer {DEMO_MEMBER_TOKEN}"}
    assert not any(token in bearer for bearer in site.door_bearers)


async def test_a_token_with_neither_scope_is_403_on_any_call(
    site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient
) -> None:
    token = await provider.access_token(client_http, ADMIN, scopes=["openid", "email"])

    response = await refused(site, token)

    assert response.status_code == 403
    assert response.headers["www-authenticate"].startswith('Bearer error="insufficient_scope"')
    assert SCOPE_PARAM in response.headers["www-authenticate"]


# --- the person and their Door token -------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_without_a_connected_door_token_nothing_reaches_door_and_the_person_is_sent_to_connect(
    site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient, mode: str
) -> None:
    token = await provider.access_token(client_http, ADMIN)

    async with site.mcp(token, mode) as client:
        result = await client.call_tool("list_clusters", {})

    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert f"{PUBLIC_URL}/connect" in text and "Door" in text
    assert site.door_bearers == []
    assert DEMO_ADMIN_TOKEN not in text  # DOOR_TOKEN never serves a caller


@pytest.mark.parametrize("mode", MODES)
async def test_two_people_are_two_principals_who_cannot_see_each_others_cards(
    site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient, mode: str
) -> None:
    await site.connect_door(ADMIN, DEMO_ADMIN_TOKEN)
    member_person = await site.connect_door(MEMBER, DEMO_MEMBER_TOKEN)
    admin_token = await provider.access_token(client_http, ADMIN)
    member_token = await provider.access_token(client_http, MEMBER)

    async with site.mcp(member_token, mode) as member:  # no elicitation: the card stays pending
        planned = await member.call_tool("scale_node_pool", SCALE)
    assert planned.structured_content is not None, planned.content
    card_id = planned.structured_content["card"]["id"]
    (card,) = await site.cards()
    assert card.principal == member_person.key  # issuer + sub, never a token

    async with site.mcp(admin_token, mode) as admin:
        seen = await admin.call_tool("get_card", {"card_id": card_id})
        own = await admin.call_tool("scale_node_pool", SCALE)
    assert seen.is_error and card_id in seen.content[0].text  # type: ignore[union-attr]
    assert own.structured_content is not None

    async with site.mcp(member_token, mode) as member:
        mine = await member.call_tool("get_card", {"card_id": card_id})
        theirs = await member.call_tool("get_card", {"card_id": own.structured_content["card"]["id"]})
    assert not mine.is_error and mine.structured_content is not None
    assert theirs.is_error
    assert {f"Bearer {DEMO_ADMIN_TOKEN}", f"Bearer {DEMO_MEMBER_TOKEN}"} == set(site.door_bearers)
    assert not any(t in b for b in site.door_bearers for t in (admin_token, member_token))


# --- browser hosts (CORS) ------------------------------------------------------------------------

BROWSER_HOST = "https://chat.door.test"


@pytest.fixture
async def cors_site(
    provider: OpenIDProvider, backend: ReferenceBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Served]:
    extra = {"allowed_origins": (BROWSER_HOST, "https://other-host.door.test")}
    async with served(provider, backend, tmp_path / "cards.sqlite3", monkeypatch, **extra) as running:
        yield running


PREFLIGHT = {"access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type"}


async def test_a_preflight_of_an_allowed_origin_is_answered_without_a_token(cors_site: Served) -> None:
    async with cors_site.http() as http:
        response = await http.options("/mcp", headers={"origin": BROWSER_HOST, **PREFLIGHT})

    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == BROWSER_HOST
    allowed = {h.strip().lower() for h in response.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "mcp-session-id", "mcp-protocol-version", "last-event-id"} <= allowed
    assert "POST" in response.headers["access-control-allow-methods"]
    assert "access-control-allow-credentials" not in response.headers


async def test_an_allowed_origins_401_exposes_www_authenticate_and_the_session_headers(cors_site: Served) -> None:
    async with cors_site.http() as http:
        response = await http.post(
            "/mcp", json=LIST, headers={"origin": BROWSER_HOST, "accept": "application/json, text/event-stream"}
        )

    assert response.status_code == 401
    assert response.headers["access-control-allow-origin"] == BROWSER_HOST
    exposed = {h.strip().lower() for h in response.headers["access-control-expose-headers"].split(",")}
    assert {"www-authenticate", "mcp-session-id", "mcp-protocol-version"} <= exposed


async def test_an_allowed_origin_reaches_the_mcp_session_with_its_token(
    cors_site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient
) -> None:
    token = await provider.access_token(client_http, ADMIN)
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    async with cors_site.http(token) as http:
        response = await http.post(
            "/mcp", json=initialize, headers={"origin": BROWSER_HOST, "accept": "application/json, text/event-stream"}
        )

    assert response.status_code == 200, response.text
    assert response.headers["access-control-allow-origin"] == BROWSER_HOST
    assert "mcp-session-id" in response.headers  # the SDK's Origin check let the allowed origin through


@pytest.mark.parametrize("origin", ["https://evil.door.test", "https://chat.door.test.evil.test", "null"])
async def test_another_origin_gets_no_cors_headers(
    cors_site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient, origin: str
) -> None:
    token = await provider.access_token(client_http, ADMIN)
    async with cors_site.http() as http:
        preflight = await http.options("/mcp", headers={"origin": origin, **PREFLIGHT})
    async with cors_site.http(token) as http:
        post = await http.post(
            "/mcp", json=LIST, headers={"origin": origin, "accept": "application/json, text/event-stream"}
        )

    for response in (preflight, post):
        assert not [name for name in response.headers if name.lower().startswith("access-control-")]
    assert preflight.status_code == 401  # not answered as a preflight: it met the bearer check
    assert post.status_code == 403  # the SDK's Origin protection (DNS rebinding) still refuses it


async def test_the_connect_page_and_sign_in_are_served_next_to_mcp_without_a_bearer(site: Served) -> None:
    async with site.http() as http:
        connect = await http.get("/connect")
        login = await http.get("/auth/login", params={"return_to": "/connect"})

    assert connect.status_code in (302, 303), connect.text
    assert connect.headers["location"].startswith("/auth/login")
    assert login.status_code in (302, 303)
    assert login.headers["location"].startswith(site.provider.metadata["authorization_endpoint"])


async def test_a_session_belongs_to_the_person_not_to_one_of_their_tokens(
    site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient
) -> None:
    """A refreshed token of the same person keeps their MCP session; another person's is told it does not exist."""
    first = await provider.access_token(client_http, ADMIN)
    refreshed = await provider.access_token(client_http, ADMIN)
    other = await provider.access_token(client_http, MEMBER)
    assert first != refreshed
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    accept = {"accept": "application/json, text/event-stream"}
    async with site.http(first) as http:
        opened = await http.post("/mcp", json=initialize, headers=accept)
    session = opened.headers["mcp-session-id"]
    headers = {**accept, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}

    async with site.http(refreshed) as http:
        same_person = await http.post("/mcp", json=LIST, headers=headers)
    async with site.http(other) as http:
        other_person = await http.post("/mcp", json=LIST, headers=headers)

    assert same_person.status_code == 200, same_person.text
    assert other_person.status_code == 404


class SwitchingPerson:
    """Answers the card's form, first switching the client's bearer (as a token refresh would)."""

    def __init__(self, http: httpx2.AsyncClient, token: str) -> None:
        self.http = http
        self.token = token

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.http.headers["authorization"] = f"Bearer {self.token}"
        return ElicitResult(action="accept", content={"approve": True})


@pytest.mark.parametrize(("user", "counts"), [(ADMIN, True), (MEMBER, False)], ids=["refreshed", "another-person"])
async def test_a_request_state_round_is_bound_to_the_person_not_to_one_token(
    site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient, user: Any, counts: bool
) -> None:
    """2026-07-28: the card's answer comes back with ``requestState``. Answered with a refreshed token of
    the same person it counts; answered with another person's token it is refused and nothing runs."""
    await site.connect_door(ADMIN, DEMO_ADMIN_TOKEN)
    await site.connect_door(MEMBER, DEMO_MEMBER_TOKEN)
    first = await provider.access_token(client_http, ADMIN)
    answering = await provider.access_token(client_http, user)
    async with site.http(first) as http:
        person = SwitchingPerson(http, answering)
        async with Client(streamable_http_client(RESOURCE, http_client=http), elicitation_callback=person) as client:
            if counts:
                done = await client.call_tool("scale_node_pool", SCALE)
            else:
                with pytest.raises(MCPError) as refused:
                    await client.call_tool("scale_node_pool", SCALE)

    if counts:
        assert done.structured_content is not None and done.structured_content["changed"] is True, done.content
    else:
        assert "requestState" in str(refused.value) or "Invalid" in str(refused.value), refused.value
        assert (await site.cards())[0].status.value == "pending"  # the answer changed nothing
        assert f"Bearer {DEMO_MEMBER_TOKEN}" not in site.door_bearers  # nothing ran for the member


async def test_a_deciding_tool_needs_maya_change_even_if_annotated_read_only(site: Served) -> None:
    """``stop_plan`` sends nothing to Door, and ``decide_card`` is app-only: a read-only annotation on
    either (a tempting one for ``stop_plan``) must not let a ``maya.read`` token decide (issue 26)."""
    from maya_tools.http import read_tools

    tools = {tool.name: tool for tool in site.server._tool_manager.list_tools()}
    assert "get_card" in read_tools(site.server) and not {"stop_plan", "decide_card"} & read_tools(site.server)
    for name in ("stop_plan", "decide_card"):
        annotations = tools[name].annotations
        assert annotations is not None
        tools[name].annotations = annotations.model_copy(update={"read_only_hint": True})

    assert not {"stop_plan", "decide_card"} & read_tools(site.server)
