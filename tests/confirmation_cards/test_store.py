"""The card store's contract, one suite run against SQLite and against a real PostgreSQL server.

Every promise the approval service builds on: cards survive reopening, move only from the state the
caller expects (so racing approvals consume a card once, also across separate connection pools as
replicas have), expire, carry leases and one-time links, are found by index, and the audit trail
refuses every change by any writer of the database. No token reaches the store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from backend_client import DoorClient
from backend_client.models import PublicNodePoolPatchRequest
from confirmation_cards import ApprovalService, Card, CardStatus, CardStore, Planner, render_markdown, render_text
from confirmation_cards.stores import AuditEntry, open_store
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.confirmation_cards.conftest import SECRETS

pytestmark = pytest.mark.anyio

KINDS = ["sqlite", "postgresql"]
Opener = Callable[[], Awaitable[CardStore]]


@pytest.fixture(params=KINDS)
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store lives: a SQLite file, or an empty schema on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "cards.sqlite3")
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
async def reopen(location: str) -> AsyncIterator[Opener]:
    """Open the store at ``location`` (again): each call is a new store, as a restarted or another replica opens it."""
    opened: list[CardStore] = []

    async def open_one() -> CardStore:
        store = await open_store(location, pool_size=20)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.close()


@pytest.fixture
async def shared(reopen: Opener) -> CardStore:
    return await reopen()


async def scale_card(planner: Planner, count: int = 4) -> Card:
    return await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=count))


def raw_execute(location: str, sql: str) -> None:
    """Run ``sql`` as another client of the database would, outside this package's code."""
    if location.startswith("postgresql://"):
        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute(sql.replace("audit", "maya_audit").encode())
        return
    db = sqlite3.connect(location)
    try:
        db.execute(sql)
        db.commit()
    finally:
        db.close()


def dump(location: str) -> str:
    """Every byte the store holds, as text."""
    if location.startswith("postgresql://"):
        with psycopg.connect(location, autocommit=True) as conn:
            rows = [conn.execute(f"SELECT * FROM {t}").fetchall() for t in ("maya_cards", "maya_audit")]
        return repr(rows)
    return Path(location).read_bytes().decode("utf-8", "replace")


async def test_a_pending_card_survives_reopening_the_store_and_can_then_be_approved(
    reopen: Opener, planner: Planner, admin: DoorClient, clock: ManualClock
) -> None:
    first = await reopen()
    card = await first.create(await scale_card(planner))
    await first.close()

    reopened = await reopen()
    assert await reopened.get(card.id) == card
    assert [c.id for c in await reopened.list(CardStatus.PENDING)] == [card.id]

    done = await ApprovalService(reopened, clock=clock.now).approve(card.id, approver="ada", door=admin)
    assert done.status is CardStatus.EXECUTED
    assert [e.event for e in await reopened.audit(card.id)] == ["created", "approved", "executed"]


async def test_a_card_moves_only_from_the_state_the_caller_expects(
    planner: Planner, shared: CardStore, clock: ManualClock
) -> None:
    card = await shared.create(await scale_card(planner))
    claim = AuditEntry("approved", clock.now(), by="ada")

    first = await shared.transition(card.id, expected=CardStatus.PENDING, to=CardStatus.EXECUTING, entry=claim)
    second = await shared.transition(card.id, expected=CardStatus.PENDING, to=CardStatus.EXECUTING, entry=claim)

    assert first is not None and first.status is CardStatus.EXECUTING
    assert second is None
    assert (await shared.get(card.id)) == first
    assert [e.event for e in await shared.audit(card.id)] == ["created", "approved"]


async def test_a_card_id_can_be_saved_only_once(planner: Planner, shared: CardStore) -> None:
    card = await scale_card(planner)
    await shared.create(card)

    with pytest.raises((sqlite3.IntegrityError, psycopg.errors.UniqueViolation)):
        await shared.create(card)
    assert [e.event for e in await shared.audit(card.id)] == ["created"]


async def test_an_expired_card_does_not_move_when_the_transition_asks_it_to_be_live(
    planner: Planner, shared: CardStore, clock: ManualClock
) -> None:
    card = await shared.create(await scale_card(planner))
    entry = AuditEntry("approved", clock.now(), by="ada")

    moved = await shared.transition(
        card.id, expected=CardStatus.PENDING, to=CardStatus.EXECUTING, entry=entry, live_at=card.expires_at
    )
    assert moved is None
    assert [c.id for c in await shared.list(CardStatus.PENDING)] == [card.id]
    assert await shared.due(card.expires_at - timedelta(seconds=1)) == []
    assert await shared.due(card.expires_at) == [card.id]


async def test_the_audit_table_refuses_updates_and_deletes(location: str, shared: CardStore, planner: Planner) -> None:
    card = await shared.create(await scale_card(planner))
    refused = (sqlite3.DatabaseError, psycopg.errors.RaiseException)
    statements = ["UPDATE audit SET by = 'mallory'", "DELETE FROM audit"]
    if location.startswith("postgresql://"):
        statements.append("TRUNCATE audit")
    for sql in statements:
        with pytest.raises(refused, match="append-only"):
            raw_execute(location, sql)
    assert [e.event for e in await shared.audit(card.id)] == ["created"]


async def test_no_token_appears_in_a_card_its_renderings_its_audit_or_the_store(
    location: str, reopen: Opener, planner: Planner, admin: DoorClient, member: DoorClient, clock: ManualClock
) -> None:
    store = await reopen()
    service = ApprovalService(store, clock=clock.now)
    executed = await store.create(await scale_card(planner))
    failed = await store.create(
        await planner.relabel_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(labels={"a": "b"}))
    )
    assert (await service.approve(failed.id, approver="mel", door=member)).status is CardStatus.FAILED  # 403
    assert (await service.approve(executed.id, approver="ada", door=admin)).status is CardStatus.EXECUTED
    await store.close()

    reopened = await reopen()
    seen = [dump(location)]
    for card in await reopened.list():
        seen += [card.model_dump_json(), render_text(card), render_markdown(card)]
        seen += [event.model_dump_json() for event in await reopened.audit(card.id)]
    assert len(seen) == 1 + 2 * 3 + 3 + 3  # the store, two cards rendered three ways, six audit rows
    for text in seen:
        for secret in SECRETS:
            assert secret not in text


async def test_fifty_racing_claims_over_three_stores_consume_one_card_exactly_once(
    reopen: Opener, planner: Planner, clock: ManualClock
) -> None:
    """Three stores on one database stand for three replicas: each with its own connections."""
    stores = [await reopen() for _ in range(3)]
    card = await stores[0].create(await scale_card(planner))
    wins: list[str] = []

    async def claim(n: int) -> None:
        now = clock.now()
        moved = await stores[n % 3].claim(
            card.id,
            executor=f"replica-{n % 3}:{n}",
            until=now + timedelta(seconds=30),
            entry=AuditEntry("approved", now, by=f"user-{n}"),
            update={"approved_by": f"user-{n}", "approved_at": now},
            live_at=now,
        )
        if moved is not None:
            wins.append(moved.approved_by or "")

    async with anyio.create_task_group() as group:
        for n in range(50):
            group.start_soon(claim, n)

    assert len(wins) == 1
    [lease] = await stores[1].leases()
    assert lease.card_id == card.id and lease.executor is not None and lease.executor.endswith(wins[0][5:])
    assert [e.event for e in await stores[2].audit(card.id)] == ["created", "approved"]
    assert (await stores[2].get(card.id)).approved_by == wins[0]  # type: ignore[union-attr]


async def test_a_lease_is_renewed_marked_sending_and_taken_over_only_from_its_holder(
    planner: Planner, shared: CardStore, clock: ManualClock
) -> None:
    card = await shared.create(await scale_card(planner))
    now = clock.now()
    claimed = await shared.claim(
        card.id,
        executor="a:1:x",
        until=now + timedelta(seconds=30),
        entry=AuditEntry("approved", now, by="ada"),
        update={"approved_by": "ada", "approved_at": now},
        live_at=now,
    )
    assert claimed is not None and claimed.status is CardStatus.EXECUTING
    assert not await shared.renew(card.id, "b:2:y", now + timedelta(seconds=90))  # not the holder
    assert await shared.renew(card.id, "a:1:x", now + timedelta(seconds=60))
    assert not await shared.mark_sending(card.id, "b:2:y")
    [lease] = await shared.leases()
    assert (lease.executor, lease.until, lease.sending) == ("a:1:x", now + timedelta(seconds=60), False)
    assert await shared.mark_sending(card.id, "a:1:x")

    recovered = AuditEntry("recovered", now, by="b:2:y", detail="its executor a:1:x is gone")
    assert not await shared.take_over(card.id, old="c:3:z", new="b:2:y", until=now, entry=recovered)
    assert await shared.take_over(card.id, old="a:1:x", new="b:2:y", until=now, entry=recovered)
    assert not await shared.take_over(card.id, old="a:1:x", new="d:4:w", until=now, entry=recovered)
    [lease] = await shared.leases()
    assert (lease.executor, lease.sending) == ("b:2:y", True)
    assert [e.event for e in await shared.audit(card.id)] == ["created", "approved", "recovered"]


async def test_an_executing_card_advances_only_for_its_executor_and_only_while_executing(
    planner: Planner, shared: CardStore, clock: ManualClock
) -> None:
    """A plan's step state is written through ``advance``: a server that lost the card writes nothing."""
    card = await shared.create(await scale_card(planner))
    now = clock.now()
    step = AuditEntry("step", now, by="a:1:x", detail="step 1 sending")
    assert await shared.advance(card.id, "a:1:x", update={"approved_by": "ada"}, entry=step) is None  # still pending
    await shared.claim(
        card.id,
        executor="a:1:x",
        until=now + timedelta(seconds=30),
        entry=AuditEntry("approved", now, by="ada"),
        update={},
        live_at=now,
    )
    assert await shared.advance(card.id, "b:2:y", update={"approved_by": "eve"}, entry=step) is None
    advanced = await shared.advance(card.id, "a:1:x", update={"approved_by": "ada"}, entry=step)
    assert advanced is not None and advanced.status is CardStatus.EXECUTING
    assert await shared.get(card.id) == advanced
    assert [e.event for e in await shared.audit(card.id)] == ["created", "approved", "step"]


async def test_a_link_is_spent_once_replaced_by_a_newer_one_and_dies_with_the_pending_card(
    planner: Planner, shared: CardStore, clock: ManualClock
) -> None:
    card = await shared.create(await scale_card(planner))
    assert await shared.set_link(card.id, "old")
    assert await shared.set_link(card.id, "new")
    assert not await shared.has_link(card.id, "old") and await shared.has_link(card.id, "new")

    spent: list[bool] = []

    async def use() -> None:
        spent.append(await shared.use_link(card.id, "new"))

    async with anyio.create_task_group() as group:
        for _ in range(20):
            group.start_soon(use)
    assert spent.count(True) == 1
    assert not await shared.has_link(card.id, "new")

    assert await shared.set_link(card.id, "again")
    await shared.transition(
        card.id,
        expected=CardStatus.PENDING,
        to=CardStatus.DECLINED,
        entry=AuditEntry("declined", clock.now(), by="ada"),
    )
    assert not await shared.has_link(card.id, "again") and not await shared.use_link(card.id, "again")
    assert not await shared.set_link(card.id, "late")


async def test_reuse_finds_only_the_same_principals_live_card_for_the_same_request_and_state(
    planner: Planner, shared: CardStore, clock: ManualClock, backend: ReferenceBackend
) -> None:
    mine = await shared.create((await scale_card(planner)).model_copy(update={"principal": "tok_mine"}))
    key: dict[str, Any] = {"action": mine.action, "digest": mine.body_digest}
    now = clock.now()

    live = await shared.find_live("tok_mine", fingerprint=mine.target_fingerprint, now=now, **key)
    assert live == mine
    assert await shared.find_live("tok_other", fingerprint=mine.target_fingerprint, now=now, **key) is None
    assert await shared.find_live("tok_mine", fingerprint="another state", now=now, **key) is None
    assert await shared.find_live("tok_mine", fingerprint=mine.target_fingerprint, now=mine.expires_at, **key) is None
    assert await shared.find_asked("tok_mine", **key) == mine
    assert await shared.find_asked("tok_other", **key) is None
    assert await shared.get("card_nothere") is None


async def test_the_approval_service_works_the_same_on_either_store(
    shared: CardStore, planner: Planner, admin: DoorClient, clock: ManualClock, backend: ReferenceBackend
) -> None:
    """Approve, decline, expire and the sweep, end to end on the store under test."""
    service = ApprovalService(shared, clock=clock.now)
    approved = await shared.create(await scale_card(planner, 4))
    declined = await shared.create(await scale_card(planner, 5))
    expiring = await shared.create(await scale_card(planner, 6))
    seq = backend.last_request_seq
    done = await service.approve(approved.id, approver="ada", door=admin)
    assert done.status is CardStatus.EXECUTED and done.result is not None and done.result.operation_id
    assert [r["method"] for r in backend.requests_since(seq) if r["method"] != "GET"] == ["PATCH"]

    assert (await service.decline(declined.id, by="ada")).status is CardStatus.DECLINED
    clock.advance((expiring.expires_at - clock.now()).total_seconds())
    assert [c.id for c in await service.expire_due()] == [expiring.id]
    assert (await service.approve(expiring.id, approver="ada", door=admin)).status is CardStatus.EXPIRED
    assert await service.orphans() == []
    statuses = {c.id: c.status for c in await shared.list()}
    assert statuses == {
        approved.id: CardStatus.EXECUTED,
        declined.id: CardStatus.DECLINED,
        expiring.id: CardStatus.EXPIRED,
    }
