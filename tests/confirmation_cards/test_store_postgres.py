"""What only the PostgreSQL store has: versioned migrations replicas apply once, and PostgreSQL's query plans.

The promises every store keeps are in ``test_store.py``, run against SQLite and PostgreSQL alike."""

from __future__ import annotations

import anyio
import psycopg
import pytest

from confirmation_cards.stores import postgres as store_postgres
from confirmation_cards.stores.postgres import FIND_ASKED, FIND_LIVE, PostgresCardStore, StoreUnavailable
from tests.maya_tools.live import free_port

pytestmark = pytest.mark.anyio


def versions(url: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [row[0] for row in conn.execute("SELECT version FROM maya_schema_migrations ORDER BY version")]


async def test_three_replicas_starting_at_once_on_an_empty_database_migrate_it_once(postgres_url: str) -> None:
    stores: list[PostgresCardStore] = []

    async def start() -> None:
        stores.append(await PostgresCardStore.open(postgres_url, pool_size=2))

    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(start)
    assert versions(postgres_url) == list(range(1, len(store_postgres.MIGRATIONS) + 1))
    for store in stores:
        await store.ping()
        await store.close()


async def test_a_later_release_migrates_a_live_store_in_place_each_step_once(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await PostgresCardStore.open(postgres_url)
    await first.close()
    later = (*store_postgres.MIGRATIONS, "ALTER TABLE maya_cards ADD COLUMN note TEXT NOT NULL DEFAULT ''")
    monkeypatch.setattr(store_postgres, "MIGRATIONS", later)

    migrated = await PostgresCardStore.open(postgres_url)
    assert await migrated.migrate() == len(later)  # a second run applies nothing more
    await migrated.close()
    assert versions(postgres_url) == list(range(1, len(later) + 1))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SELECT note FROM maya_cards").fetchall()


async def test_a_database_that_cannot_be_reached_fails_the_open_naming_it(postgres_url: str) -> None:
    port = free_port()  # nothing listens there
    unreachable = f"postgresql://maya:hunter2-secret@127.0.0.1:{port}/cards"
    with pytest.raises(StoreUnavailable, match=rf"127\.0\.0\.1:{port}/cards did not accept a connection") as caught:
        await PostgresCardStore.open(unreachable, connect_seconds=0.5)
    assert "hunter2" not in str(caught.value) and "MAYA_CARD_STORE" in str(caught.value)


async def test_every_lookup_reads_an_index_never_the_whole_cards_table(postgres_url: str) -> None:
    """Reuse (``find_live``, ``find_asked``), the expiry sweep, ``get`` and ``audit`` each search an
    index (sequential scans disabled, so the plan shows what the indexes can serve)."""
    await (await PostgresCardStore.open(postgres_url)).close()  # only the schema is wanted
    queries = {
        "find_live": (FIND_LIVE, ("d", "a", "p", "pending", "f", 0.0), "maya_cards_lookup"),
        "find_asked": (FIND_ASKED, ("d", "a", "p", "pending"), "maya_cards_lookup"),
        "due": (
            "SELECT id FROM maya_cards WHERE status = %s AND expires_at <= %s ORDER BY expires_at",
            ("pending", 0.0),
            "maya_cards_due",
        ),
        "get": ("SELECT data FROM maya_cards WHERE id = %s", ("x",), "maya_cards_pkey"),
        "audit": ("SELECT seq FROM maya_audit WHERE card_id = %s ORDER BY seq", ("x",), "maya_audit_card"),
    }
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        for name, (sql, params, index) in queries.items():
            plan = " ".join(row[0] for row in conn.execute(f"EXPLAIN {sql}".encode(), params))
            assert index in plan and "Seq Scan" not in plan, f"{name}: {plan}"

