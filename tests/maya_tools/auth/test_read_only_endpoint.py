"""``/mcp/read-only`` (only the read tools, the same sign-in as ``/mcp``, a ``maya.read`` token enough)
and ``MAYA_OAUTH_CLIENTS`` (the OAuth clients a token may be issued to), through ``serve``'s HTTP app
in process, the real test provider and MCP clients of both protocol generations."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from maya_tools.settings import ConfigError, Settings, choose_auth
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN
from tests.maya_tools.auth.served import RESOURCE, Served, served
from tests.oidc import ADMIN, MEMBER, SERVER_CLIENT_ID, OpenIDProvider, claims_of

pytestmark = pytest.mark.anyio

MODES = ["legacy", "modern"]
SCALE = {"cluster": "payments-prod", "pool": "workers", "count": 3}
ACCEPT = {"accept": "application/json, text/event-stream"}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture
def backend() -> ReferenceBackend:
    return ReferenceBackend(clock=ManualClock(), seed="demo")


@pytest.fixture
async def site(
    provider: OpenIDProvider, backend: ReferenceBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Served]:
    async with served(provider, backend, tmp_path / "cards.sqlite3", monkeypatch) as running:
        yield running


@pytest.mark.parametrize("mode", MODES)
async def test_mcp_read_only_lists_only_the_read_tools_and_a_change_tool_there_is_unknown(
    site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient, mode: str
) -> None:
    await site.connect_door(MEMBER, DEMO_MEMBER_TOKEN)
    await site.connect_door(ADMIN, DEMO_ADMIN_TOKEN)
    reader = await provider.access_token(client_http, MEMBER, scopes=["openid", "email", "maya.read"])
    changer = await provider.access_token(client_http, ADMIN)  # maya.read and maya.change

    async with site.mcp(changer, mode) as client:
        everything = (await client.list_tools()).tools
    for token in (reader, changer):
        async with site.mcp(token, mode, path="/mcp/read-only") as client:
            tools = (await client.list_tools()).tools
            listed = await client.call_tool("list_clusters", {})
            assert not listed.is_error, listed.content
            with pytest.raises(MCPError) as refused:
                await client.call_tool("scale_node_pool", SCALE)
        assert refused.value.error.code == -32602
        assert refused.value.error.message.startswith('Unknown tool "scale_node_pool". This server\'s tools: ')
        assert refused.value.error.message.endswith(
            "This endpoint, /mcp/read-only, serves only the read tools and changes nothing; change tools are on /mcp."
        )
        assert tools and all(tool.annotations and tool.annotations.read_only_hint is True for tool in tools)
        hinted = {tool.name for tool in everything if tool.annotations and tool.annotations.read_only_hint is True}
        assert {tool.name for tool in tools} == hinted
    assert await site.cards() == []  # neither call made a card
    assert set(site.door_bearers) == {f"Bearer {DEMO_MEMBER_TOKEN}", f"Bearer {DEMO_ADMIN_TOKEN}"}


async def test_a_session_of_mcp_is_unknown_on_mcp_read_only(
    site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient
) -> None:
    token = await provider.access_token(client_http, ADMIN)
    async with site.http(token) as http:
        opened = await http.post("/mcp", json=INITIALIZE, headers=ACCEPT)
        session = opened.headers["mcp-session-id"]
        elsewhere = await http.post("/mcp/read-only", json=LIST, headers={**ACCEPT, "mcp-session-id": session})
        there = await http.post("/mcp", json=LIST, headers={**ACCEPT, "mcp-session-id": session})
    assert opened.status_code == 200 and there.status_code != 404
    assert elsewhere.status_code == 404


async def test_mcp_read_only_wants_the_same_sign_in_as_mcp(site: Served) -> None:
    async with site.http() as http:
        response = await http.post("/mcp/read-only", json=LIST, headers=ACCEPT)
        metadata = await http.get("/.well-known/oauth-protected-resource/mcp/read-only")
    assert response.status_code == 401
    assert (
        'resource_metadata="https://maya.door.test/.well-known/oauth-protected-resource/mcp"'
        in (response.headers["www-authenticate"])
    )
    assert metadata.status_code == 200 and metadata.json()["resource"] == RESOURCE


@pytest.mark.parametrize("mode", MODES)
async def test_a_token_of_a_client_not_in_maya_oauth_clients_is_403_naming_the_client_and_the_setting(
    provider: OpenIDProvider,
    backend: ReferenceBackend,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    client_http: httpx2.AsyncClient,
    mode: str,
) -> None:
    async with served(
        provider, backend, tmp_path / "cards.sqlite3", monkeypatch, oauth_clients=(SERVER_CLIENT_ID,)
    ) as site:
        await site.connect_door(ADMIN, DEMO_ADMIN_TOKEN)
        other = await provider.register_client(client_http)
        scopes = ["openid", "email", "maya.read", "maya.change"]
        outsider = (
            await provider.sign_in(client_http, ADMIN, scopes=scopes, resource=RESOURCE, client=other)
        ).access_token
        assert claims_of(outsider)["client_id"] == other.client_id != SERVER_CLIENT_ID
        async with site.http(outsider) as http:
            answers = [await http.post(path, json=LIST, headers=ACCEPT) for path in ("/mcp", "/mcp/read-only")]
        for answer in answers:
            assert answer.status_code == 403
            assert answer.json() == {
                "error": "access_denied",
                "error_description": f"OAuth client {other.client_id} may not use this server (MAYA_OAUTH_CLIENTS "
                "names the clients it allows): connect with an allowed client, or ask the server's operator to add "
                "this one",
            }
            assert 'error="access_denied"' in answer.headers["www-authenticate"]
        assert site.door_bearers == []  # the refused client reached nothing

        allowed = await provider.access_token(client_http, ADMIN)  # issued to SERVER_CLIENT_ID
        for path in ("/mcp", "/mcp/read-only"):
            async with site.mcp(allowed, mode, path=path) as client:
                listed = await client.call_tool("list_clusters", {})
                assert not listed.is_error, listed.content


def test_maya_oauth_clients_without_oauth_stops_the_server_saying_why() -> None:
    settings = Settings.from_env({"MAYA_OAUTH_CLIENTS": "claude, chatgpt"})
    assert settings.oauth_clients == ("claude", "chatgpt")
    with pytest.raises(ConfigError) as refused:
        choose_auth(settings, "streamable-http", "127.0.0.1", "door-token")
    assert str(refused.value).startswith(
        "MAYA_OAUTH_CLIENTS allows OAuth clients, but this server signs nobody in with OAuth (--auth door-token): set "
    )
