"""Honest outcomes (DESIGN.md properties 10 and 11): only reads before approval; after the call may
have reached Door, "nothing changed" only on Door's own refusal; anything unclear is settled by
reading Door back; a card whose executing server is gone is settled by another, never while it runs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import anyio
import httpx2
import pytest
from fastapi import FastAPI

from backend_client import DoorClient
from backend_client.models import PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from confirmation_cards import (
    ApprovalService,
    Card,
    CardNotFound,
    CardStatus,
    Planner,
    SqliteCardStore,
    token_fingerprint,
)
from confirmation_cards.approval import HOST, LEASE
from confirmation_cards.stores import AuditEntry
from reference_backend import seed
from reference_backend.clock import ManualClock
from tests.conftest import ADMIN_TOKEN, BASE_URL, auth

pytestmark = pytest.mark.anyio

PROD = seed.DEMO_CLUSTER_ID
PATCH_ROUTE = "PATCH /v1/public/clusters/{cluster_id}/node-pools/{pool}"
ADMIN = token_fingerprint(seed.DEMO_ADMIN_TOKEN)


async def _no_sleep(_: float) -> None:
    pass


class Recorder(httpx2.AsyncBaseTransport):
    """The ASGI app, with every request's method and path written down."""

    def __init__(self, app: FastAPI) -> None:
        self.inner = httpx2.ASGITransport(app=app)
        self.seen: list[tuple[str, str]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.seen.append((request.method, request.url.path))
        return await self.inner.handle_async_request(request)


@pytest.fixture
async def ops_admin(app: FastAPI) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE_URL) as client:
        yield client


async def fault(admin_plane: httpx2.AsyncClient, **spec: Any) -> None:
    response = await admin_plane.post("/_reference/faults", headers=auth(ADMIN_TOKEN), json=spec)
    assert response.status_code in (200, 201), response.text


async def pool_updates(admin: DoorClient) -> int:
    return sum(op.kind == "pool.update" for op in (await admin.get_cluster_state(PROD)).operations)


@pytest.fixture
def advancing(clock: ManualClock) -> Any:
    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        await anyio.lowlevel.checkpoint()

    return sleep


@pytest.fixture
def settling(store: SqliteCardStore, clock: ManualClock, advancing: Any) -> ApprovalService:
    """A service whose read-back waits pass on Door's simulated clock."""
    return ApprovalService(store, clock=clock.now, sleep=advancing, settle_window=10)


async def scale_card(admin: DoorClient, store: SqliteCardStore, clock: ManualClock, count: int = 4) -> Card:
    planner = Planner(admin, clock=clock.now, principal=ADMIN)
    return await store.create(
        await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=count))
    )


# --- 1. before approval, Door sees only GETs ---------------------------------------------------


@pytest.mark.parametrize("token", [seed.DEMO_ADMIN_TOKEN, seed.DEMO_MEMBER_TOKEN])
async def test_planning_every_action_sends_only_gets_to_door(app: FastAPI, clock: ManualClock, token: str) -> None:
    recorder = Recorder(app)
    async with DoorClient(BASE_URL, token, transport=recorder, sleep=_no_sleep) as door:
        planner = Planner(door, clock=clock.now, principal=token_fingerprint(token))
        await planner.add_node_pool("payments-prod", PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge"))
        await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
        await planner.relabel_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(labels={"a": "b"}))
        await planner.replace_node("payments-prod", "payments-prod-workers-abc12")
    assert recorder.seen and {method for method, _ in recorder.seen} == {"GET"}


# --- 2. no "nothing changed" once the request may have reached Door ------------------------------


@pytest.mark.parametrize("status", [503, 500])
async def test_an_error_after_the_change_three_times_ends_executed_once(
    admin: DoorClient,
    store: SqliteCardStore,
    clock: ManualClock,
    settling: ApprovalService,
    ops_admin: httpx2.AsyncClient,
    status: int,
) -> None:
    card = await scale_card(admin, store, clock)
    await fault(ops_admin, route=PATCH_ROUTE, status=status, count=3, when="after")

    done = await settling.approve(card.id, approver="ada", door=admin, principal=ADMIN)

    assert await pool_updates(admin) == 1
    assert done.status is CardStatus.EXECUTED
    assert done.result is not None and "Nothing was changed" not in done.result.message
    assert "took effect" in done.result.message and done.result.operation_id is not None


async def test_an_error_before_the_change_is_unknown_never_nothing_changed(
    admin: DoorClient,
    store: SqliteCardStore,
    clock: ManualClock,
    settling: ApprovalService,
    ops_admin: httpx2.AsyncClient,
) -> None:
    """A 5xx does not prove Door refused the request: read back for the window, then outcome_unknown."""
    card = await scale_card(admin, store, clock)
    await fault(ops_admin, route=PATCH_ROUTE, status=500, count=3, when="before")
    started = clock.now()

    done = await settling.approve(card.id, approver="ada", door=admin, principal=ADMIN)

    assert await pool_updates(admin) == 0
    assert done.status is CardStatus.OUTCOME_UNKNOWN
    assert done.result is not None and "Nothing was changed" not in done.result.message
    assert "get_cluster_operations" in done.result.message
    assert clock.now() - started == timedelta(seconds=10)  # the settle window, on Door's clock
    assert [event.event for event in await store.audit(card.id)] == ["created", "approved", "outcome_unknown"]


async def test_a_refusal_by_door_itself_says_nothing_changed(
    admin: DoorClient,
    store: SqliteCardStore,
    clock: ManualClock,
    settling: ApprovalService,
    ops_admin: httpx2.AsyncClient,
) -> None:
    card = await scale_card(admin, store, clock, count=10)
    credit = await ops_admin.put(
        f"/_reference/organisations/{seed.DEMO_ORGANISATION}", headers=auth(ADMIN_TOKEN), json={"credit": 0.0}
    )
    assert credit.status_code == 200, credit.text

    done = await settling.approve(card.id, approver="ada", door=admin, principal=ADMIN)

    assert done.status is CardStatus.FAILED and done.result is not None
    assert done.result.status_code == 402 and "Nothing was changed" in done.result.message
    assert await pool_updates(admin) == 0


# --- 5. cards whose executing server is gone -----------------------------------------------------


def dead_pid() -> int:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    return int(finished.stdout)


async def claim(store: SqliteCardStore, card: Card, clock: ManualClock, executor: str, *, sending: bool) -> None:
    now = clock.now()
    claimed = await store.claim(
        card.id,
        executor=executor,
        until=now + LEASE,
        entry=AuditEntry("approved", now, by="ada"),
        update={"approved_by": "ada", "approved_at": now},
        live_at=now,
    )
    assert claimed is not None
    if sending:
        assert await store.mark_sending(card.id, executor)


async def test_a_card_whose_server_died_before_sending_is_failed_and_nothing_was_sent(
    admin: DoorClient, store: SqliteCardStore, clock: ManualClock, settling: ApprovalService
) -> None:
    card = await scale_card(admin, store, clock)
    await claim(store, card, clock, f"{HOST}:{dead_pid()}:gone", sending=False)

    (settled,) = await settling.settle_orphans(admin)

    assert settled.status is CardStatus.FAILED
    assert settled.result is not None and "before its request was sent" in settled.result.message
    assert await pool_updates(admin) == 0
    assert [e.event for e in await store.audit(card.id)] == ["created", "approved", "recovered", "failed"]


async def test_a_card_whose_server_died_after_door_applied_it_is_settled_executed(
    admin: DoorClient, store: SqliteCardStore, clock: ManualClock, settling: ApprovalService
) -> None:
    card = await scale_card(admin, store, clock)
    await claim(store, card, clock, f"{HOST}:{dead_pid()}:gone", sending=True)
    # The dead server's request had reached Door: it applied the change with the card's key.
    await admin.update_node_pool(PROD, "workers", PublicNodePoolPatchRequest(count=4), idempotency_key=card.id)

    (settled,) = await settling.settle_orphans(admin)

    assert settled.status is CardStatus.EXECUTED
    assert await pool_updates(admin) == 1


async def test_a_card_whose_server_died_after_sending_without_effect_is_outcome_unknown(
    admin: DoorClient, store: SqliteCardStore, clock: ManualClock, settling: ApprovalService
) -> None:
    card = await scale_card(admin, store, clock)
    await claim(store, card, clock, f"{HOST}:{dead_pid()}:gone", sending=True)

    (settled,) = await settling.settle_orphans(admin)
    unreadable = await scale_card(admin, store, clock, count=5)
    await claim(store, unreadable, clock, f"{HOST}:{dead_pid()}:gone", sending=True)
    (blind,) = await settling.settle_orphans(None)  # no token of its own to read Door back with

    assert settled.status is CardStatus.OUTCOME_UNKNOWN and blind.status is CardStatus.OUTCOME_UNKNOWN
    assert await pool_updates(admin) == 0


async def test_a_card_its_own_live_process_is_executing_is_never_taken_over(
    admin: DoorClient, store: SqliteCardStore, clock: ManualClock, advancing: Any
) -> None:
    """Two services on one store in one live process: the other never settles a running execution,
    however far its lease has lapsed; a foreign host's card is taken over only once its lease lapsed."""
    executing = ApprovalService(store, clock=clock.now)
    other = ApprovalService(store, clock=clock.now, sleep=advancing, settle_window=4)
    card = await scale_card(admin, store, clock)
    foreign = await scale_card(admin, store, clock, count=5)
    entered, release = anyio.Event(), anyio.Event()

    class Held:
        def __getattr__(self, name: str) -> Any:
            return getattr(admin, name)

        async def update_node_pool(self, *args: Any, **kwargs: Any) -> Any:
            entered.set()
            await release.wait()
            return await admin.update_node_pool(*args, **kwargs)

    await claim(store, foreign, clock, "another-host:1:x", sending=False)
    assert await other.orphans() == []  # the foreign host's lease still runs

    async with anyio.create_task_group() as group:
        result: list[Card] = []

        async def approve() -> None:
            done = await executing.approve(card.id, approver="ada", door=Held(), principal=ADMIN)  # type: ignore[arg-type]
            result.append(done)

        group.start_soon(approve)
        await entered.wait()
        clock.advance(3600)  # far past both leases
        assert [lease.card_id for lease in await other.orphans()] == [foreign.id]
        settled = await other.settle_orphans(admin)
        assert [c.id for c in settled] == [foreign.id] and settled[0].status is CardStatus.FAILED
        release.set()
    assert result[0].status is CardStatus.EXECUTED and await pool_updates(admin) == 1


# --- 3. bound to the principal that planned the card --------------------------------------------


async def test_another_principal_can_neither_approve_nor_decline_nor_read_a_card(
    admin: DoorClient, store: SqliteCardStore, clock: ManualClock, settling: ApprovalService
) -> None:
    card = await scale_card(admin, store, clock)
    other = token_fingerprint(seed.DEMO_MEMBER_TOKEN)

    with pytest.raises(CardNotFound):
        await settling.approve(card.id, approver="mel", door=admin, principal=other)
    with pytest.raises(CardNotFound):
        await settling.decline(card.id, by="mel", principal=other)
    with pytest.raises(CardNotFound):
        await settling.get(card.id, principal=other)

    assert (await settling.get(card.id, principal=ADMIN)).status is CardStatus.PENDING
    assert await pool_updates(admin) == 0


@pytest.mark.parametrize("where", ["before sending", "after sending"])
async def test_an_approval_cancelled_midway_never_says_nothing_changed_once_sent(
    admin: DoorClient, store: SqliteCardStore, clock: ManualClock, where: str
) -> None:
    """A cancellation (client gone, server stopping) inside the approval: before the call left the card is
    failed with nothing sent; after, it is outcome_unknown, never "nothing was changed"."""
    service = ApprovalService(store, clock=clock.now)
    card = await scale_card(admin, store, clock)
    entered = anyio.Event()

    class Held:
        def __getattr__(self, name: str) -> Any:
            return getattr(admin, name)

        async def get_cluster(self, *args: Any) -> Any:
            if where == "before sending":
                entered.set()
                await anyio.sleep_forever()
            return await admin.get_cluster(*args)

        async def update_node_pool(self, *args: Any, **kwargs: Any) -> Any:
            entered.set()
            await anyio.sleep_forever()

    async with anyio.create_task_group() as group:

        async def approve() -> None:
            await service.approve(card.id, approver="ada", door=Held(), principal=ADMIN)  # type: ignore[arg-type]

        group.start_soon(approve)
        await entered.wait()
        group.cancel_scope.cancel()

    done = await store.get(card.id)
    assert done is not None and done.result is not None
    if where == "before sending":
        assert done.status is CardStatus.FAILED and "nothing was changed" in done.result.message
    else:
        assert done.status is CardStatus.OUTCOME_UNKNOWN and "nothing was changed" not in done.result.message
    assert await pool_updates(admin) == 0
