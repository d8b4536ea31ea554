"""The MCP server over the SDK's in-memory Client, on a reference backend whose clock the test drives."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import ElicitRequestParams, ElicitResult

from maya_tools.server import build_server
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_CLUSTER_ID
from tests.conftest import auth

MODES = ["legacy", "auto"]

Answer = Callable[[ElicitRequestParams], Awaitable[ElicitResult]]


class Person:
    """The human at the client: records every card shown and answers as told."""

    def __init__(self, action: str = "accept", before: Callable[[], Awaitable[None]] | None = None) -> None:
        self.action = action
        self.before = before
        self.messages: list[str] = []

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        self.messages.append(params.message)
        if self.before is not None:
            await self.before()
        if self.action == "accept":
            return ElicitResult(action="accept", content={"approve": True})
        if self.action == "accept-unticked":  # submits the form with `approve` cleared
            return ElicitResult(action="accept", content={"approve": False})
        return ElicitResult(action=self.action)  # type: ignore[arg-type]


@pytest.fixture
def card_store(tmp_path: Path) -> Path:
    return tmp_path / "cards.sqlite3"


@pytest.fixture
def settings(card_store: Path) -> Settings:
    # No wait after an opened link by default: a test that leaves the page undecided hears `pending` at
    # once. The tests of the wait itself (tests/maya_tools/channels/test_opened_links.py) set a bound.
    return Settings(card_store=str(card_store), door_token=DEMO_ADMIN_TOKEN, approver="tester", link_wait_seconds=0)


@pytest.fixture
def server(settings: Settings, backend: ReferenceBackend) -> MCPServer[Any]:
    return build_server(settings, backend=backend)


@pytest.fixture
def connect(server: MCPServer[Any]) -> Callable[..., Client]:
    def make(mode: str, person: Person | None = None) -> Client:
        return Client(server, mode=mode, elicitation_callback=person)

    return make


async def operations(door: httpx2.AsyncClient, cluster_id: str = DEMO_CLUSTER_ID) -> list[dict[str, Any]]:
    """Every operation Door recorded on the cluster: one per accepted mutation."""
    response = await door.get(f"/v1/public/clusters/{cluster_id}/state", headers=auth(DEMO_ADMIN_TOKEN))
    assert response.status_code == 200, response.text
    ops: list[dict[str, Any]] = response.json()["operations"]
    return ops


async def pool(door: httpx2.AsyncClient, name: str, cluster_id: str = DEMO_CLUSTER_ID) -> dict[str, Any] | None:
    response = await door.get(f"/v1/public/clusters/{cluster_id}/node-pools", headers=auth(DEMO_ADMIN_TOKEN))
    assert response.status_code == 200, response.text
    return next((p for p in response.json()["items"] if p["name"] == name), None)


from tests.maya_tools.live import live, shared_live, shared_world  # noqa: E402, F401 (real-process fixtures of the fault and hijack tests)
