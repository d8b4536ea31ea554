"""``BindSessions`` fails closed (issue 26, point 8): a session whose owner it does not know, because it
never bound it or because it forgot it past its limit, is answered as a session that does not exist
(404), to every bearer, its own person's included; it never falls back to accepting whoever asks.

``serve``'s own HTTP app (``build_app``, ``--auth door-token``, the MCP SDK's streamable HTTP) in
process, with the owner limit made small. Sessions (``Mcp-Session-Id``) are 2025-11-25's: 2026-07-28
has none, so there is nothing of this to test in that generation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

import maya_tools.http
from maya_tools.http import build_app
from maya_tools.server import build_server
from maya_tools.settings import Settings, choose_auth
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:8000"
ACCEPT = {"accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
NOT_FOUND = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}


@pytest.fixture
async def http(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx2.AsyncClient]:
    monkeypatch.setattr(maya_tools.http, "SESSION_OWNERS", 2)
    settings = choose_auth(Settings(card_store=str(tmp_path / "cards.sqlite3")), "streamable-http", "127.0.0.1")
    backend = ReferenceBackend(clock=ManualClock(), seed="demo")
    server = build_server(settings, transport="streamable-http", backend=backend, page_url=URL)
    app = build_app(server, settings, host="127.0.0.1")
    async with (
        server.session_manager.run(),
        httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=URL) as client,
    ):
        yield client


def bearer(token: str) -> dict[str, str]:
    return {**ACCEPT, "authorization": f"Bearer {token}"}


async def open_session(http: httpx2.AsyncClient, token: str) -> str:
    response = await http.post("/mcp", json=INITIALIZE, headers=bearer(token))
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


async def list_on(http: httpx2.AsyncClient, token: str, session: str) -> httpx2.Response:
    headers = {**bearer(token), "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    return await http.post("/mcp", json=LIST, headers=headers)


async def test_a_forgotten_session_is_refused_to_everyone_and_a_remembered_one_still_serves_its_owner(
    http: httpx2.AsyncClient,
) -> None:
    first = await open_session(http, DEMO_ADMIN_TOKEN)
    second = await open_session(http, DEMO_ADMIN_TOKEN)
    third = await open_session(http, DEMO_ADMIN_TOKEN)  # past the limit of 2: the owner of `first` is forgotten

    other = await list_on(http, DEMO_MEMBER_TOKEN, first)
    own = await list_on(http, DEMO_ADMIN_TOKEN, first)

    for refused in (other, own):
        assert refused.status_code == 404, refused.text
        assert refused.json() == NOT_FOUND  # exactly the SDK's answer to a session that does not exist
    for kept in (second, third):
        served = await list_on(http, DEMO_ADMIN_TOKEN, kept)
        assert served.status_code == 200, served.text
        assert "scale_node_pool" in served.text
    assert (await list_on(http, DEMO_MEMBER_TOKEN, third)).status_code == 404  # another person's, as before
