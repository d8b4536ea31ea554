"""The policy's approvals in the card store (issue 28), on SQLite and on a real PostgreSQL server.

One approval per person per card, appended atomically (racing approvers from separate stores all
count, none is lost, nobody counts twice), only while the card is pending and live, and the
approvals table refuses every change by any writer of the database. Cards written before the
policy existed load with ``policy`` None.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta

import anyio
import psycopg
import pytest

from backend_client.models import PublicNodePoolPatchRequest
from confirmation_cards import Card, CardStatus, CardStore, Planner
from confirmation_cards.models import CardApproval
from confirmation_cards.policy import parse_policy
from confirmation_cards.stores import AuditEntry
from reference_backend.clock import ManualClock
from tests.confirmation_cards.conftest import SECRETS
from tests.confirmation_cards.test_store import Opener, dump, location, reopen, shared

pytestmark = pytest.mark.anyio

__all__ = ["location", "reopen", "shared"]  # the engine-parametrized fixtures of test_store

POLICY = parse_policy(
    {
        "rule": [
            {
                "name": "prod-four-eyes",
                "clusters": ["tag:prod"],
                "approvals": 2,
                "approvers": {"claim": "groups", "any_of": ["platform"]},
                "self_approval": False,
            }
        ]
    }
)


async def waiting_card(planner: Planner, store: CardStore) -> Card:
    planner._policy = POLICY
    card = await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
    assert card.policy is not None
    return await store.create(card)


def approval(who: str, clock: ManualClock) -> CardApproval:
    return CardApproval(principal=f"sub_{who}", subject=who, claims={"groups": ("platform",)}, at=clock.now())


def entry(who: str, clock: ManualClock) -> AuditEntry:
    return AuditEntry("approval", clock.now(), by=who, rule="prod-four-eyes")


async def test_one_person_approves_a_card_once_and_only_while_it_is_pending_and_live(
    shared: CardStore, planner: Planner, clock: ManualClock
) -> None:
    card = await waiting_card(planner, shared)

    first = await shared.add_approval(card.id, approval("bob", clock), entry=entry("bob", clock), live_at=clock.now())
    twice = await shared.add_approval(card.id, approval("bob", clock), entry=entry("bob", clock), live_at=clock.now())

    assert first is not None and [a.subject for a in first.approvals] == ["bob"]
    assert twice is None
    stored = await shared.get(card.id)
    assert stored is not None and [a.subject for a in stored.approvals] == ["bob"]
    assert [e.event for e in await shared.audit(card.id)] == ["created", "approval"]

    late = clock.now() + timedelta(minutes=11)
    assert await shared.add_approval(card.id, approval("eve", clock), entry=entry("eve", clock), live_at=late) is None
    moved = await shared.transition(
        card.id, expected=CardStatus.PENDING, to=CardStatus.DECLINED, entry=AuditEntry("declined", clock.now())
    )
    assert moved is not None
    assert (
        await shared.add_approval(card.id, approval("eve", clock), entry=entry("eve", clock), live_at=clock.now())
        is None
    )
    final = await shared.get(card.id)
    assert final is not None and [a.subject for a in final.approvals] == ["bob"]


async def test_no_token_appears_in_a_card_with_approvals_or_anywhere_in_the_store(
    location: str, shared: CardStore, planner: Planner, clock: ManualClock
) -> None:
    card = await waiting_card(planner, shared)
    await shared.add_approval(card.id, approval("bob", clock), entry=entry("bob", clock), live_at=clock.now())

    held = dump(location)
    if location.startswith("postgresql://"):
        with psycopg.connect(location, autocommit=True) as conn:
            held += repr(conn.execute("SELECT * FROM maya_approvals").fetchall())
    assert "sub_bob" in held
    for secret in SECRETS:
        assert secret not in held


async def test_racing_approvers_over_three_stores_all_count_and_nobody_twice(
    reopen: Opener, planner: Planner, clock: ManualClock
) -> None:
    stores = [await reopen() for _ in range(3)]
    card = await waiting_card(planner, stores[0])
    people = [f"p{i}" for i in range(12)]
    results: list[Card | None] = []

    async def approve(i: int, who: str) -> None:
        store = stores[i % 3]
        results.append(
            await store.add_approval(card.id, approval(who, clock), entry=entry(who, clock), live_at=clock.now())
        )

    async with anyio.create_task_group() as group:
        for i, who in enumerate(people * 2):  # each person twice, from different stores
            group.start_soon(approve, i, who)

    stored = await stores[0].get(card.id)
    assert stored is not None and sorted(a.subject for a in stored.approvals if a.subject) == sorted(people)
    assert sum(r is not None for r in results) == len(people)
    events = [e.event for e in await stores[0].audit(card.id)]
    assert events.count("approval") == len(people)


async def test_the_approvals_table_holds_one_row_per_person_per_card_for_every_writer(
    location: str, shared: CardStore, planner: Planner, clock: ManualClock
) -> None:
    card = await waiting_card(planner, shared)
    await shared.add_approval(card.id, approval("bob", clock), entry=entry("bob", clock), live_at=clock.now())
    again = (
        f"INSERT INTO approvals (card_id, principal, at, data) VALUES ('{card.id}', 'sub_bob', '2026-01-01', '{{}}')"
    )

    if location.startswith("postgresql://"):
        with psycopg.connect(location, autocommit=True) as conn, pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(again.replace("approvals", "maya_approvals").encode())
    else:
        db = sqlite3.connect(location)
        try:
            with pytest.raises(sqlite3.IntegrityError):
                db.execute(again)
        finally:
            db.close()


async def test_the_approvals_table_refuses_updates_and_deletes(
    location: str, shared: CardStore, planner: Planner, clock: ManualClock
) -> None:
    card = await waiting_card(planner, shared)
    await shared.add_approval(card.id, approval("bob", clock), entry=entry("bob", clock), live_at=clock.now())

    for sql in ("UPDATE approvals SET principal = 'sub_mallory'", "DELETE FROM approvals"):
        if location.startswith("postgresql://"):
            with psycopg.connect(location, autocommit=True) as conn, pytest.raises(psycopg.Error, match="append-only"):
                conn.execute(sql.replace("approvals", "maya_approvals").encode())
        else:
            db = sqlite3.connect(location)
            try:
                with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                    db.execute(sql)
            finally:
                db.close()


async def test_a_card_written_before_the_policy_existed_loads_with_no_policy(
    shared: CardStore, planner: Planner
) -> None:
    card = await shared.create(
        await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
    )
    older = json.loads(card.model_dump_json())
    del older["policy"], older["approvals"]  # the JSON an earlier release wrote

    loaded = Card.model_validate_json(json.dumps(older))

    assert loaded.policy is None and loaded.approvals == () and loaded == card
    assert await shared.get(card.id) == card
