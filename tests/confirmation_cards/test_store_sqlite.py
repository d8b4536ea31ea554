"""What only the SQLite store has: its file format, migrations by ``PRAGMA user_version`` and SQLite's query plans.

The promises every store keeps are in ``test_store.py``, run against SQLite and PostgreSQL alike."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from backend_client.models import PublicNodePoolPatchRequest
from confirmation_cards import ApprovalService, Planner, SqliteCardStore
from reference_backend.clock import ManualClock

pytestmark = pytest.mark.anyio


async def test_the_card_reuse_lookups_are_one_indexed_query_each(tmp_path: Path) -> None:
    from confirmation_cards.stores.sqlite import FIND_ASKED, FIND_LIVE

    await SqliteCardStore(tmp_path / "cards.sqlite3").close()
    db = sqlite3.connect(tmp_path / "cards.sqlite3")
    for sql, params in ((FIND_LIVE, ("d", "a", "p", "pending", "f", 0.0)), (FIND_ASKED, ("d", "a", "p", "pending"))):
        plan = " ".join(row[3] for row in db.execute("EXPLAIN QUERY PLAN " + sql, params))
        assert "USING INDEX cards_lookup" in plan and "SCAN cards" not in plan.replace("USING INDEX", ""), plan


async def test_a_store_written_before_the_lookup_columns_is_migrated_and_its_cards_found(
    tmp_path: Path, planner: Planner
) -> None:
    """Schema version 0 (no lease or lookup columns): opening it migrates in place, each step once."""
    from confirmation_cards.stores import sqlite as store_module

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
    found = await store.find_asked(pending_card.principal, pending_card.action, pending_card.body_digest)
    assert found is not None and found.id == pending_card.id
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == len(store_module._MIGRATIONS)
    await store.close()
    await SqliteCardStore(path).close()  # a second open migrates nothing more


async def test_get_card_and_the_sweeper_read_by_index_never_by_listing_every_card(tmp_path: Path) -> None:
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
    await store.close()


async def test_expire_due_and_get_never_list_the_cards(store: SqliteCardStore, clock: ManualClock) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("every card was listed")

    store.list = refuse  # type: ignore[method-assign]
    service = ApprovalService(store, clock=clock.now)
    assert await service.expire_due() == []
    assert await store.get("card_nothere") is None


async def test_a_store_whose_last_migration_fails_is_left_as_it_was_not_half_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schema and the migrations are one transaction: a failing step leaves a new file empty, and a
    store at an older version at that version, with its cards."""
    from confirmation_cards.stores import sqlite as store_module

    broken = (*store_module._MIGRATIONS, "ALTER TABLE no_such_table ADD COLUMN x TEXT")
    monkeypatch.setattr(store_module, "_MIGRATIONS", broken)
    path = tmp_path / "cards.sqlite3"
    with pytest.raises(sqlite3.OperationalError, match="no_such_table"):
        SqliteCardStore(path)
    db = sqlite3.connect(path)
    assert db.execute("SELECT name FROM sqlite_master").fetchall() == []
    assert db.execute("PRAGMA user_version").fetchone() == (0,)
    db.close()

    monkeypatch.setattr(store_module, "_MIGRATIONS", broken[:-1])
    await SqliteCardStore(path).close()  # made whole at the current version
    monkeypatch.setattr(store_module, "_MIGRATIONS", broken)
    with pytest.raises(sqlite3.OperationalError, match="no_such_table"):
        SqliteCardStore(path)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone() == (len(broken) - 1,)
    assert db.execute("SELECT count(*) FROM cards").fetchone() == (0,)
    db.close()
