"""A host that follows the spec's URL-mode order answers ``accept`` as soon as it opened the link; the
call then waits for what the page decides and returns it (``maya_tools/channels/opened_links.py``).

The person presses the page's button only once the server says it waits (its first progress
notification), so the outcome can only come from the wait: no sleep, no race. On 2025-11-25 the
client also hears ``notifications/elicitation/complete`` with the card's id; 2026-07-28 has no such
notification and its retry carries the outcome."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession
from mcp_types import ElicitCompleteNotification, ElicitRequestParams, ElicitRequestURLParams, ElicitResult

from maya_tools.channels import link_wait
from maya_tools.server import build_server
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from tests.maya_tools.conftest import MODES, operations
from tests.maya_tools.test_approval_page import SCALE, UrlOnlyClient, press

pytestmark = pytest.mark.anyio


@dataclass
class SpecOrderHost:
    """Opens the link and answers ``accept`` at once; the person decides later, when told to."""

    button: str | None
    urls: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)
    told_to_decide: anyio.Event = field(default_factory=anyio.Event)

    async def elicit(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        assert isinstance(params, ElicitRequestURLParams)
        self.urls.append(params.url)
        return ElicitResult(action="accept")

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.waiting.append(message or "")
        self.told_to_decide.set()

    async def notified(self, message: Any) -> None:
        if isinstance(message, ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)

    async def person(self) -> None:
        await self.told_to_decide.wait()
        if self.button is not None:
            page = await press(self.urls[-1], self.button)
            assert page.status_code == 200, page.text


def waiting_server(settings: Settings, backend: ReferenceBackend, seconds: float) -> MCPServer[Any]:
    return build_server(dataclasses.replace(settings, link_wait_seconds=seconds), backend=backend)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("button", ["approve", "decline"])
async def test_a_spec_order_host_learns_what_the_page_decided(
    settings: Settings,
    backend: ReferenceBackend,
    door: httpx2.AsyncClient,
    mode: str,
    button: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No store polling within the test's minute: only the page's own signal can wake the call.
    monkeypatch.setattr(link_wait, "POLL_SECONDS", 600.0)
    sent: list[str] = []
    send = ServerSession.send_elicit_complete

    async def spy(self: ServerSession, elicitation_id: str, related_request_id: Any = None) -> None:
        sent.append(elicitation_id)  # what the server sent, whether or not the client surfaces it
        await send(self, elicitation_id, related_request_id)

    monkeypatch.setattr(ServerSession, "send_elicit_complete", spy)
    host = SpecOrderHost(button)
    server = waiting_server(settings, backend, 600)
    with anyio.fail_after(20):
        async with (
            UrlOnlyClient(server, mode=mode, elicitation_callback=host.elicit, message_handler=host.notified) as client,
            anyio.create_task_group() as group,
        ):
            group.start_soon(host.person)
            result = await client.call_tool(*SCALE, progress_callback=host.progress)
    data = result.structured_content
    assert data is not None, result
    assert host.waiting and "Waiting for your decision on the approval page" in host.waiting[0]
    if button == "approve":
        assert data["status"] == "executed" and data["changed"] is True, data
        assert [op["kind"] for op in await operations(door)] == ["pool.update"]
    else:
        assert data["status"] == "declined" and data["changed"] is False, data
        assert await operations(door) == []
    card_id = data["card"]["id"]
    assert host.completed == ([card_id] if mode == "legacy" else [])
    assert sent == host.completed, "2026-07-28 has no elicitation/complete: the server sends none there"


@pytest.mark.parametrize("mode", MODES)
async def test_the_wait_is_bounded_and_an_undecided_card_stays_pending(
    settings: Settings, backend: ReferenceBackend, door: httpx2.AsyncClient, mode: str
) -> None:
    """``MAYA_LINK_WAIT_SECONDS`` bounds the wait: the person never decides, the call answers
    ``pending`` (the card still approvable until it expires) and nothing is said complete."""
    host = SpecOrderHost(None)
    server = waiting_server(settings, backend, 0.2)
    with anyio.fail_after(30):
        async with UrlOnlyClient(
            server, mode=mode, elicitation_callback=host.elicit, message_handler=host.notified
        ) as client:
            result = await client.call_tool(*SCALE, progress_callback=host.progress)
    data = result.structured_content
    assert data is not None and data["status"] == "pending" and data["changed"] is False, result
    assert "expires unapproved at" in data["message"]
    assert host.waiting, "the caller that asked for progress heard that the call waits"
    assert host.completed == [] and await operations(door) == []
