"""The card store keeps cards across restarts, consumes each once, and never forgets or rewrites history."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from backend_client import DoorClient
from backend_client.models import PublicNodePoolPatchRequest
from confirmation_cards import (
    ApprovalService,
    CardStatus,
    Planner,
    SqliteCardStore,
    render_markdown,
    render_text,
)
from confirmation_cards.store import AuditEntry
from reference_backend.clock import ManualClock
from tests.confirmation_cards.conftest import SECRETS

pytestmark = pytest.mark.anyio


async def test_a_pending_card_survives_reopening_the_store_and_can_then_be_approved(
    tmp_path: Path, planner: Planner, admin: DoorClient, clock: ManualClock
) -> None:
    path = tmp_path / "cards.sqlite3"
    first = SqliteCardStore(path)
    card = first.create(await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4)))
    first.close()

    reopened = SqliteCardStore(path)
    assert reopened.get(card.id) == card
    assert [c.id for c in reopened.list(CardStatus.PENDING)] == [card.id]

    done = await ApprovalService(reopened, clock=clock.now).approve(card.id, approver="ada", door=admin)
    assert done.status is CardStatus.EXECUTED
    assert [e.event for e in reopened.audit(card.id)] == ["created", "approved", "executed"]


async def test_a_card_moves_only_from_the_state_the_caller_expects(
    planner: Planner, store: SqliteCardStore, clock: ManualClock
) -> None:
    card = store.create(await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4)))
    claim = AuditEntry("approved", clock.now(), by="ada")

    first = store.transition(card.id, expected=CardStatus.PENDING, to=CardStatus.EXECUTING, entry=claim)
    second = store.transition(card.id, expected=CardStatus.PENDING, to=CardStatus.EXECUTING, entry=claim)

    assert first is not None and first.status is CardStatus.EXECUTING
    assert second is None
    assert [e.event for e in store.audit(card.id)] == ["created", "approved"]


async def test_a_card_id_can_be_saved_only_once(planner: Planner, store: SqliteCardStore) -> None:
    card = await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
    store.create(card)

    with pytest.raises(sqlite3.IntegrityError):
        store.create(card)


async def test_the_audit_table_refuses_updates_and_deletes(
    tmp_path: Path, planner: Planner, clock: ManualClock
) -> None:
    path = tmp_path / "cards.sqlite3"
    store = SqliteCardStore(path)
    store.create(await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4)))
    other_writer = sqlite3.connect(path)

    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        other_writer.execute("UPDATE audit SET by = 'mallory'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        other_writer.execute("DELETE FROM audit")
    other_writer.close()


async def test_no_token_appears_in_a_card_its_renderings_its_audit_or_the_store_file(
    tmp_path: Path, planner: Planner, admin: DoorClient, member: DoorClient, clock: ManualClock
) -> None:
    path = tmp_path / "cards.sqlite3"
    store = SqliteCardStore(path)
    service = ApprovalService(store, clock=clock.now)
    executed = store.create(
        await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
    )
    failed = store.create(
        await planner.relabel_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(labels={"a": "b"}))
    )
    assert (await service.approve(failed.id, approver="mel", door=member)).status is CardStatus.FAILED  # 403
    assert (await service.approve(executed.id, approver="ada", door=admin)).status is CardStatus.EXECUTED
    store.close()

    reopened = SqliteCardStore(path)
    seen = [path.read_bytes().decode("utf-8", "replace")]
    for card in reopened.list():
        seen += [card.model_dump_json(), render_text(card), render_markdown(card)]
        seen += [event.model_dump_json() for event in reopened.audit(card.id)]
    for text in seen:
        for secret in SECRETS:
            assert secret not in text


async def test_threads_racing_to_consume_one_card_succeed_exactly_once(
    tmp_path: Path, planner: Planner, clock: ManualClock
) -> None:
    store = SqliteCardStore(tmp_path / "cards.sqlite3")
    card = store.create(await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4)))

    def claim(n: int) -> bool:
        entry = AuditEntry("approved", clock.now(), by=f"user-{n}")
        return store.transition(card.id, expected=CardStatus.PENDING, to=CardStatus.EXECUTING, entry=entry) is not None

    with ThreadPoolExecutor(max_workers=16) as pool:
        wins = list(pool.map(claim, range(50)))

    assert wins.count(True) == 1
    assert [e.event for e in store.audit(card.id)] == ["created", "approved"]


async def test_the_card_reuse_lookups_are_one_indexed_query_each(tmp_path: Path) -> None:
    from confirmation_cards.store import FIND_ASKED, FIND_LIVE

    SqliteCardStore(tmp_path / "cards.sqlite3").close()
    db = sqlite3.connect(tmp_path / "cards.sqlite3")
    for sql, params in ((FIND_LIVE, ("d", "a", "p", "pending", "f", 0.0)), (FIND_ASKED, ("d", "a", "p", "pending"))):
        plan = " ".join(row[3] for row in db.execute("EXPLAIN QUERY PLAN " + sql, params))
        assert "USING INDEX cards_lookup" in plan and "SCAN cards" not in plan.replace("USING INDEX", ""), plan


async def test_a_store_written_before_the_lookup_columns_is_migrated_and_its_cards_found(
    tmp_path: Path, planner: Planner
) -> None:
    """Schema version 0 (no lease or lookup columns): opening it migrates in place, each step once."""
    from confirmation_cards import store as store_module

    pending_card = await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(store_module._SCHEMA)
    db.execute(
        "INSERT INTO cards (id, status, created_at, expires_at, data) VALUES (?, 'pending', 0, ?, ?)",
        (pending_card.id, pending_card.expires_at.timestamp(), pending_card.model_dump_json()),
    )
    db.commit()
    db.close()

    store = SqliteCardStore(path)
    found = store.find_asked(pending_card.principal, pending_card.action, pending_card.body_digest)
    assert found is not None and found.id == pending_card.id
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == len(store_module._MIGRATIONS)
    store.close()
    SqliteCardStore(path).close()  # a second open migrates nothing more


def test_get_card_and_the_sweeper_read_by_index_never_by_listing_every_card(tmp_path: Path) -> None:
    """Issue 10: with 10,000 cards, get_card (``expire_due``, ``get``, ``audit``) costs what it does with one.

    ``due`` is a search of the (status, expires_at) index, ``get`` of the primary key, ``audit`` of
    (card_id, seq); none of them scans the cards table. ``list`` (every card) is only for the CLI."""
    store = SqliteCardStore(tmp_path / "cards.sqlite3")
    queries = {
        "due": "SELECT id FROM cards WHERE status = ? AND expires_at <= ? ORDER BY expires_at",
        "get": "SELECT data FROM cards WHERE id = ?",
        "audit": "SELECT seq FROM audit WHERE card_id = ? ORDER BY seq",
    }
    for name, sql in queries.items():
        plan = " ".join(str(row[-1]) for row in store._db.execute(f"EXPLAIN QUERY PLAN {sql}", (1,) * sql.count("?")))
        assert "SEARCH" in plan and "SCAN" not in plan, f"{name}: {plan}"
    store.close()


def test_expire_due_and_get_never_list_the_cards(store: SqliteCardStore, clock: ManualClock) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("every card was listed")

    store.list = refuse  # type: ignore[method-assign]
    service = ApprovalService(store, clock=clock.now)
    assert service.expire_due() == []
    assert store.get("card_nothere") is None
