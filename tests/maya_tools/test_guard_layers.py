"""Each layer of the MCP Apps card's secret holds on its own (issue 19), on SQLite and on PostgreSQL.

``decide_card`` puts three layers between a caller and ``lifecycle.decide``: the card lookup finds
only the caller's own card, the secret refuses any other principal, and spending it lets one press
through; behind them the store moves a pending card once. Each test sets up the order of events in
which the layer it names is the only one left, so that removing that layer alone fails it, where
``test_app_card.py`` would not notice (the other layers refuse first). The ``requestState``
principal binding has its own in ``test_guard_layers_live.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult

from confirmation_cards import CardStatus, token_fingerprint
from maya_tools.channels.app_card import REFUSED
from maya_tools.channels.app_secret import spend_app_secret
from maya_tools.runtime import Runtime, open_runtime
from maya_tools.server import MayaServer, build_server
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN
from tests.maya_tools.conftest import MODES, operations
from tests.maya_tools.test_app_card import apps_client, decide, show

pytestmark = pytest.mark.anyio

OWNER = token_fingerprint(DEMO_ADMIN_TOKEN)  # the principal of the in-memory server below: its DOOR_TOKEN
OTHER = token_fingerprint(DEMO_MEMBER_TOKEN)


@pytest.fixture(params=["sqlite", "postgresql"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """The server's settings on a SQLite file or on an empty PostgreSQL schema (as replicas share one)."""
    store = str(tmp_path / "cards.sqlite3")
    if request.param == "postgresql":
        store = str(request.getfixturevalue("postgres_url"))
    # No sweep after the first: a test that moves the clock past expiry decides who reads the card first.
    return Settings(card_store=store, door_token=DEMO_ADMIN_TOKEN, approver="tester", sweep_seconds=3600)


@pytest.fixture
async def replica(settings: Settings, backend: ReferenceBackend) -> AsyncIterator[Runtime]:
    """A second server's runtime on the same card store and Door, as another replica (or process) opens it."""
    async with open_runtime(settings, "memory", backend=backend) as runtime:
        yield runtime


def server_runtime(server: MCPServer[Any]) -> Runtime:
    """The runtime a running server opened (its approval pages hold it while it runs)."""
    assert isinstance(server, MayaServer) and server.pages.runtime is not None
    return server.pages.runtime


def refused(result: CallToolResult) -> bool:
    return result.is_error and REFUSED in str(result.content)


async def status_of(replica: Runtime, card_id: str) -> CardStatus:
    return (await replica.service.get(card_id)).status


async def test_two_presses_that_verify_before_either_decides_spend_the_secret_once(
    server: MCPServer[Any], replica: Runtime, door: httpx2.AsyncClient
) -> None:
    """The order a race of two presses produces: both check the secret while the card is still
    pending, before either reaches ``lifecycle.decide``. The store's status guard cannot tell them
    apart yet (the card is pending for both), so spending the secret is what lets only the first on."""
    async with apps_client(server, "legacy") as client:
        _, card_id, secret = await show(client)
        card = await replica.service.get(card_id, principal=OWNER)
        first = await spend_app_secret(replica, card, OWNER, secret)
        second = await spend_app_secret(replica, card, OWNER, secret)
        assert (first, second) == (True, False), "one secret, one press"
        assert await status_of(replica, card_id) is CardStatus.PENDING, "the second press met a pending card"
        # The view presses again with the spent secret: refused before any decision, nothing changes.
        late = await decide(client, card_id, secret, "approve")
    assert refused(late)
    assert await status_of(replica, card_id) is CardStatus.PENDING
    assert await operations(door) == []


@pytest.mark.parametrize("settings", ["postgresql"], indirect=True)
@pytest.mark.parametrize("mode", MODES)
async def test_fifty_concurrent_presses_of_the_view_one_decides_and_the_rest_are_refused(
    server: MCPServer[Any], replica: Runtime, door: httpx2.AsyncClient, mode: str
) -> None:
    """Real concurrency through the SDK ``Client``: on PostgreSQL every store call awaits the network,
    so presses interleave between checking the secret and claiming the card (on SQLite they do not,
    which is why ``test_app_card.py``'s fifty presses pass without the spend). Every press but the one
    that spent the secret is refused, none is told "already executed" (which is what a press that got
    past an unspent secret hears from the store's status guard)."""
    async with apps_client(server, mode) as client:
        _, card_id, secret = await show(client)
        results: list[CallToolResult] = []

        async def press() -> None:
            results.append(await decide(client, card_id, secret))

        async with anyio.create_task_group() as group:
            for _ in range(50):
                group.start_soon(press)
    decided = [r for r in results if not r.is_error]
    assert len(decided) == 1 and sum(refused(r) for r in results) == 49, [str(r.content)[:120] for r in decided]
    assert decided[0].structured_content is not None and decided[0].structured_content["status"] == "executed"
    assert [op["kind"] for op in await operations(door)] == ["pool.update"]
    assert await status_of(replica, card_id) is CardStatus.EXECUTED


async def test_the_secret_refuses_another_principal_even_when_the_lookup_finds_the_card(
    server: MCPServer[Any], replica: Runtime, door: httpx2.AsyncClient
) -> None:
    """The secret's own principal check, with a card lookup that does not filter by principal (as a
    replica's ``service.get(card_id)`` does): another principal holding the very secret spends nothing."""
    async with apps_client(server, "auto") as client:
        _, card_id, secret = await show(client)
        card = await replica.service.get(card_id)  # no principal: the lookup layer is out of the way
        assert card.principal == OWNER
        assert not await spend_app_secret(replica, card, OTHER, secret)
        assert await status_of(replica, card_id) is CardStatus.PENDING and await operations(door) == []
        done = await decide(client, card_id, secret)  # the refusal spent nothing: the owner's press decides
    assert done.structured_content is not None and done.structured_content["status"] == "executed"


async def test_another_principal_s_call_does_not_even_read_the_owner_s_card(
    server: MCPServer[Any],
    settings: Settings,
    backend: ReferenceBackend,
    replica: Runtime,
    clock: ManualClock,
) -> None:
    """The card lookup's own layer, which the secret's check would otherwise hide (both answer
    ``REFUSED``): another principal's call, even with the very secret, finds no card, so it cannot
    move one either. An overdue card is not expired by a stranger's call; its owner finds it expired."""
    other = build_server(dataclasses.replace(settings, door_token=DEMO_MEMBER_TOKEN), backend=backend)
    async with apps_client(server, "auto") as mine, apps_client(other, "auto") as theirs:
        _, card_id, secret = await show(mine)
        for runtime in (server_runtime(server), server_runtime(other), replica):
            await runtime.swept.wait()  # each store user's sweep at start is over: it expires nothing later
        clock.advance(11 * 60)  # past the 10-minute expiry; nothing has read the card since
        assert refused(await decide(theirs, card_id, secret))
        stored = await replica.store.get(card_id)
        assert stored is not None and stored.status is CardStatus.PENDING, "a stranger's call moved the card"
        assert [e.event for e in await replica.store.audit(card_id)] == ["created"]
        read = await mine.call_tool("get_card", {"card_id": card_id})
    assert read.structured_content is not None and read.structured_content["card"]["status"] == "expired"
