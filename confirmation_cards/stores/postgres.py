"""The card store in PostgreSQL, shared by every replica of a team's server (``MAYA_CARD_STORE=postgresql://…``).

It keeps every promise ``SqliteCardStore`` keeps, enforced by the database itself:

- **Single use.** Every state change is one guarded ``UPDATE … WHERE id = … AND status = <expected>
  RETURNING``, inside a transaction that first locks the row (``SELECT … FOR UPDATE``). Of fifty
  replicas approving one card at once, one moves it ``pending → executing``; the others wait on the
  row lock, then find it no longer pending and move nothing.
- **Append-only audit.** Triggers refuse ``UPDATE``, ``DELETE`` and ``TRUNCATE`` on the audit table
  for every client of the database, not only for this class.
- **Indexed lookups.** Card reuse, the expiry sweep and the lease sweep each read one index.
- **Versioned schema.** ``MIGRATIONS`` are applied in order at open, each once, under an advisory
  lock so replicas starting together migrate once; ``maya_schema_migrations`` records which ran.
  A later release appends a step and live stores are brought up to it.

A card's ``data`` is the card's own JSON text, byte for byte what the SQLite store keeps (``jsonb``
would reorder a card's labels). Neither table has a place for a token (DESIGN.md property 7).
Connections come from a psycopg 3 ``AsyncConnectionPool`` of ``pool_size`` connections; every
call awaits the network, never blocking the server's event loop.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import anyio
import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from confirmation_cards.models import AuditEvent, Card, CardApproval, CardStatus
from confirmation_cards.stores.base import (
    AUDIT_COLUMNS,
    AuditEntry,
    AuditObserver,
    Lease,
    audit_event,
    created_entry,
    lease_of,
    moved,
    notify,
    timestamp,
    with_approval,
)
from confirmation_cards.stores.postgres_schema import MIGRATIONS

MIGRATION_LOCK = 0x6D617961  # "maya": the advisory lock replicas migrate under
"""Replicas starting at once take this lock, so each migration step runs exactly once."""

FIND_LIVE = (
    "SELECT data FROM maya_cards WHERE digest = %s AND action = %s AND principal = %s AND status = %s "
    "AND fingerprint = %s AND expires_at > %s ORDER BY created_at DESC LIMIT 1"
)
FIND_ASKED = (
    "SELECT data FROM maya_cards WHERE digest = %s AND action = %s AND principal = %s "
    "ORDER BY status = %s DESC, created_at DESC LIMIT 1"
)


class StoreUnavailable(ConnectionError):
    """The card store's database could not be reached; the message names where, never a password."""


def where(url: str) -> str:
    """``host:port/database`` of a PostgreSQL URL, without its user or password."""
    parts = urlsplit(url)
    return f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path or '/'}"


class _Unmoved(Exception):
    """Roll a transition back: the card expired meanwhile, or its new state did not validate."""


class PostgresCardStore:
    """Cards and audit in PostgreSQL; open with ``await PostgresCardStore.open(url, pool_size=…)``."""

    def __init__(
        self,
        pool: AsyncConnectionPool[psycopg.AsyncConnection[TupleRow]],
        *,
        replica: str | None = None,
        observer: AuditObserver | None = None,
    ) -> None:
        self._pool = pool
        self._replica = replica
        self._observer = observer

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        pool_size: int = 10,
        connect_seconds: float = 30.0,
        replica: str | None = None,
        observer: AuditObserver | None = None,
    ) -> PostgresCardStore:
        """Connect (waiting up to ``connect_seconds`` for the server), then create or migrate the schema.

        ``replica`` is recorded on every audit row this store writes; ``observer`` is handed each row
        once its transaction has committed (never one that was rolled back).

        Raises ``StoreUnavailable`` naming ``host:port/db`` when no connection is made, and
        ``psycopg.Error`` when a migration fails; a cancelled open closes its pool and stays cancelled."""
        pool: AsyncConnectionPool[psycopg.AsyncConnection[TupleRow]] = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True, "application_name": "maya-tools"},
            open=False,
            timeout=connect_seconds,
            name="maya-tools cards",
        )
        try:
            await pool.open(wait=True, timeout=connect_seconds)
        except Exception as error:
            await pool.close()
            raise StoreUnavailable(
                f"The PostgreSQL card store at {where(url)} did not accept a connection within {connect_seconds:g} s "
                f"({type(error).__name__}). Check that the server runs, that MAYA_CARD_STORE names it, and that "
                "its user may connect."
            ) from error
        except BaseException:
            with anyio.CancelScope(shield=True):
                await pool.close()
            raise
        store = cls(pool, replica=replica, observer=observer)
        try:
            await store.migrate()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await pool.close()
            raise
        return store

    async def migrate(self) -> int:
        """Apply the steps this database has not run yet, in order; returns the schema version."""
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS maya_schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            row = await (await conn.execute("SELECT coalesce(max(version), 0) FROM maya_schema_migrations")).fetchone()
            version = int(row[0]) if row is not None else 0
            for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
                await conn.execute(step.encode())  # bytes: run as one multi-statement script
                await conn.execute("INSERT INTO maya_schema_migrations (version) VALUES (%s)", (number,))
                version = number
        return version

    async def close(self) -> None:
        await self._pool.close()

    async def ping(self) -> None:
        async with self._pool.connection() as conn:
            await conn.execute("SELECT 1 FROM maya_cards WHERE status = %s LIMIT 1", (CardStatus.EXECUTING.value,))

    # --- reads ---------------------------------------------------------------------------------

    async def get(self, card_id: str) -> Card | None:
        return await self._one("SELECT data FROM maya_cards WHERE id = %s", (card_id,))

    async def list(self, status: CardStatus | None = None) -> builtins.list[Card]:
        async with self._pool.connection() as conn:
            if status is None:
                cursor = await conn.execute("SELECT data FROM maya_cards ORDER BY created_at, id")
            else:
                cursor = await conn.execute(
                    "SELECT data FROM maya_cards WHERE status = %s ORDER BY created_at, id", (CardStatus(status).value,)
                )
            rows = await cursor.fetchall()
        return [Card.model_validate_json(row[0]) for row in rows]

    async def audit(self, card_id: str) -> builtins.list[AuditEvent]:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {', '.join(AUDIT_COLUMNS)} FROM maya_audit WHERE card_id = %s ORDER BY seq", (card_id,)
            )
            rows = await cursor.fetchall()
        return [audit_event(row) for row in rows]

    async def audit_since(self, since: datetime) -> builtins.list[tuple[AuditEvent, Card]]:
        columns = ", ".join(f"a.{name}" for name in AUDIT_COLUMNS)
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {columns}, c.data FROM maya_audit a JOIN maya_cards c ON c.id = a.card_id "
                "WHERE a.at >= %s ORDER BY a.seq",
                (since.astimezone(UTC),),
            )
            rows = await cursor.fetchall()
        return [(audit_event(row[:-1]), Card.model_validate_json(row[-1])) for row in rows]

    async def due(self, now: datetime) -> builtins.list[str]:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT id FROM maya_cards WHERE status = %s AND expires_at <= %s ORDER BY expires_at",
                (CardStatus.PENDING.value, timestamp(now)),
            )
            return [row[0] for row in await cursor.fetchall()]

    async def find_live(
        self, principal: str | None, action: str, digest: str, fingerprint: str, now: datetime
    ) -> Card | None:
        return await self._one(
            FIND_LIVE, (digest, action, principal or "", CardStatus.PENDING.value, fingerprint, timestamp(now))
        )

    async def find_asked(self, principal: str | None, action: str, digest: str) -> Card | None:
        return await self._one(FIND_ASKED, (digest, action, principal or "", CardStatus.PENDING.value))

    async def leases(self) -> builtins.list[Lease]:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT id, executor, lease_until, sending FROM maya_cards WHERE status = %s ORDER BY created_at, id",
                (CardStatus.EXECUTING.value,),
            )
            rows = await cursor.fetchall()
        return [lease_of(row) for row in rows]

    async def has_link(self, card_id: str, link_hash: str) -> bool:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT 1 FROM maya_cards WHERE id = %s AND status = %s AND link_hash = %s",
                (card_id, CardStatus.PENDING.value, link_hash),
            )
            return await cursor.fetchone() is not None

    async def _one(self, sql: str, params: tuple[Any, ...]) -> Card | None:
        async with self._pool.connection() as conn:
            row = await (await conn.execute(sql, params)).fetchone()
        return None if row is None else Card.model_validate_json(row[0])

    # --- writes --------------------------------------------------------------------------------

    async def create(self, card: Card) -> Card:
        if card.status is not CardStatus.PENDING:
            raise ValueError(f"a new card must be pending, not {card.status}")
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO maya_cards (id, status, created_at, expires_at, data, principal, action, digest, "
                "fingerprint) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    card.id,
                    card.status.value,
                    timestamp(card.created_at),
                    timestamp(card.expires_at),
                    card.model_dump_json(),
                    card.principal or "",
                    card.action,
                    card.body_digest,
                    card.target_fingerprint,
                ),
            )
            appended = [await self._append(conn, card, created_entry(card))]
        notify(self._observer, appended)
        return card

    async def transition(
        self,
        card_id: str,
        *,
        expected: CardStatus,
        to: CardStatus,
        entry: AuditEntry,
        update: Mapping[str, Any] | None = None,
        live_at: datetime | None = None,
    ) -> Card | None:
        return await self._move(card_id, expected, to, entry, update or {}, live_at, lease=None)

    async def claim(
        self,
        card_id: str,
        *,
        executor: str,
        until: datetime,
        entry: AuditEntry,
        update: Mapping[str, Any],
        live_at: datetime,
    ) -> Card | None:
        return await self._move(
            card_id,
            CardStatus.PENDING,
            CardStatus.EXECUTING,
            entry,
            update,
            live_at,
            lease=(executor, timestamp(until)),
        )

    async def advance(
        self, card_id: str, executor: str, *, update: Mapping[str, Any], entry: AuditEntry
    ) -> Card | None:
        async with self._pool.connection() as conn, conn.transaction():
            cursor = await conn.execute(
                "SELECT data FROM maya_cards WHERE id = %s AND status = %s AND executor = %s FOR UPDATE",
                (card_id, CardStatus.EXECUTING.value, executor),
            )
            row = await cursor.fetchone()
            if row is None:
                return None
            after = moved(Card.model_validate_json(row[0]), update, CardStatus.EXECUTING)
            await conn.execute("UPDATE maya_cards SET data = %s WHERE id = %s", (after.model_dump_json(), card_id))
            appended = [await self._append(conn, after, entry)]
        notify(self._observer, appended)
        return after

    async def mark_sending(self, card_id: str, executor: str) -> bool:
        return await self._guarded(
            "UPDATE maya_cards SET sending = true WHERE id = %s AND status = %s AND executor = %s RETURNING id",
            (card_id, CardStatus.EXECUTING.value, executor),
            card_id,
            None,
        )

    async def renew(self, card_id: str, executor: str, until: datetime) -> bool:
        return await self._guarded(
            "UPDATE maya_cards SET lease_until = %s WHERE id = %s AND status = %s AND executor = %s RETURNING id",
            (timestamp(until), card_id, CardStatus.EXECUTING.value, executor),
            card_id,
            None,
        )

    async def take_over(self, card_id: str, *, old: str | None, new: str, until: datetime, entry: AuditEntry) -> bool:
        return await self._guarded(
            "UPDATE maya_cards SET executor = %s, lease_until = %s WHERE id = %s AND status = %s "
            "AND executor IS NOT DISTINCT FROM %s RETURNING id",
            (new, timestamp(until), card_id, CardStatus.EXECUTING.value, old),
            card_id,
            entry,
        )

    async def add_approval(
        self, card_id: str, approval: CardApproval, *, entry: AuditEntry, live_at: datetime
    ) -> Card | None:
        try:
            async with self._pool.connection() as conn, conn.transaction():
                cursor = await conn.execute(
                    "SELECT data FROM maya_cards WHERE id = %s AND status = %s FOR UPDATE",
                    (card_id, CardStatus.PENDING.value),
                )
                row = await cursor.fetchone()
                after = None if row is None else with_approval(Card.model_validate_json(row[0]), approval, live_at)
                if after is None:
                    raise _Unmoved
                await conn.execute(
                    "INSERT INTO maya_approvals (card_id, principal, at, data) VALUES (%s, %s, %s, %s)",
                    (card_id, approval.principal, approval.at.astimezone(UTC), approval.model_dump_json()),
                )
                await conn.execute("UPDATE maya_cards SET data = %s WHERE id = %s", (after.model_dump_json(), card_id))
                appended = [await self._append(conn, after, entry)]
        except (_Unmoved, psycopg.errors.UniqueViolation):
            return None
        notify(self._observer, appended)
        return after

    async def set_link(self, card_id: str, link_hash: str) -> bool:
        return await self._guarded(
            "UPDATE maya_cards SET link_hash = %s WHERE id = %s AND status = %s RETURNING id",
            (link_hash, card_id, CardStatus.PENDING.value),
            card_id,
            None,
        )

    async def use_link(self, card_id: str, link_hash: str) -> bool:
        return await self._guarded(
            "UPDATE maya_cards SET link_hash = NULL WHERE id = %s AND status = %s AND link_hash = %s RETURNING id",
            (card_id, CardStatus.PENDING.value, link_hash),
            card_id,
            None,
        )

    async def _guarded(self, sql: str, params: tuple[Any, ...], card_id: str, entry: AuditEntry | None) -> bool:
        """One guarded UPDATE and, when it hit the card, its audit row, in one transaction."""
        appended = []
        async with self._pool.connection() as conn, conn.transaction():
            hit = await (await conn.execute(sql, params)).fetchone() is not None
            if hit and entry is not None:
                cursor = await conn.execute("SELECT data FROM maya_cards WHERE id = %s", (card_id,))
                row = await cursor.fetchone()
                assert row is not None  # the UPDATE above just hit it, in this transaction
                appended.append(await self._append(conn, Card.model_validate_json(row[0]), entry))
        notify(self._observer, appended)
        return hit

    async def _move(
        self,
        card_id: str,
        expected: CardStatus,
        to: CardStatus,
        entry: AuditEntry,
        update: Mapping[str, Any],
        live_at: datetime | None,
        *,
        lease: tuple[str, float] | None,
    ) -> Card | None:
        try:
            async with self._pool.connection() as conn, conn.transaction():
                cursor = await conn.execute(
                    "SELECT data FROM maya_cards WHERE id = %s AND status = %s FOR UPDATE", (card_id, expected.value)
                )
                row = await cursor.fetchone()
                if row is None:
                    return None
                card = Card.model_validate_json(row[0])
                if live_at is not None and live_at >= card.expires_at:
                    raise _Unmoved
                after = moved(card, update, to)
                executor, until = lease if lease is not None else (None, None)
                cursor = await conn.execute(
                    "UPDATE maya_cards SET status = %s, data = %s, "
                    "executor = CASE WHEN %s THEN %s ELSE executor END, "
                    "lease_until = CASE WHEN %s THEN %s ELSE lease_until END, "
                    "sending = CASE WHEN %s THEN false ELSE sending END "
                    "WHERE id = %s AND status = %s RETURNING id",
                    (
                        to.value,
                        after.model_dump_json(),
                        lease is not None,
                        executor,
                        lease is not None,
                        until,
                        lease is not None,
                        card_id,
                        expected.value,
                    ),
                )
                if await cursor.fetchone() is None:
                    raise _Unmoved
                appended = [await self._append(conn, after, entry)]
        except _Unmoved:
            return None
        notify(self._observer, appended)
        return after

    async def _append(
        self, conn: psycopg.AsyncConnection[TupleRow], card: Card, entry: AuditEntry
    ) -> tuple[AuditEvent, Card]:
        """Insert ``entry`` as a row of ``card`` (as it is once the row is written), for the observer at commit."""
        values = (
            card.id,
            entry.at.astimezone(UTC),
            entry.event,
            entry.by,
            entry.status_code,
            entry.operation_id,
            entry.rule,
            entry.detail,
            card.status.value,
            entry.request_id,
            self._replica,
        )
        cursor = await conn.execute(
            f"INSERT INTO maya_audit ({', '.join(AUDIT_COLUMNS[1:])}) VALUES ({', '.join(['%s'] * len(values))}) "
            "RETURNING seq",
            values,
        )
        row = await cursor.fetchone()
        assert row is not None
        return audit_event((row[0], *values)), card
