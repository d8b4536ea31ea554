"""The card store in one SQLite file: where cards wait for a decision, and the append-only audit trail.

The promises are ``CardStore``'s (``stores/base.py``); here they hold through one connection
behind a lock and ``BEGIN IMMEDIATE`` transactions.

The audit table refuses UPDATE and DELETE by trigger, so "append-only" holds for every writer of
the file, not only for this class. Neither table has a place for a token (property 7).
"""

from __future__ import annotations

import builtins
import sqlite3
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cards (
    id         TEXT PRIMARY KEY,
    status     TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    data       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS cards_status ON cards (status, expires_at);
CREATE TABLE IF NOT EXISTS audit (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    card_id      TEXT NOT NULL,
    at           TEXT NOT NULL,
    event        TEXT NOT NULL,
    by           TEXT,
    status_code  INTEGER,
    operation_id TEXT,
    rule         TEXT,
    detail       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS audit_card ON audit (card_id, seq);
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
"""

# Versioned migrations (PRAGMA user_version): a store written by an older server is brought up to
# date at open, in order, each step once.
_MIGRATIONS: tuple[str, ...] = (
    # 1: who is executing a card, until when its lease runs, and whether its request may have been sent.
    """
    ALTER TABLE cards ADD COLUMN executor TEXT;
    ALTER TABLE cards ADD COLUMN lease_until REAL;
    ALTER TABLE cards ADD COLUMN sending INTEGER NOT NULL DEFAULT 0;
    """,
    # 2: the fields a card is reused and found by, as indexed columns (never a scan of every card).
    """
    ALTER TABLE cards ADD COLUMN principal TEXT;
    ALTER TABLE cards ADD COLUMN action TEXT;
    ALTER TABLE cards ADD COLUMN digest TEXT;
    ALTER TABLE cards ADD COLUMN fingerprint TEXT;
    UPDATE cards SET principal = json_extract(data, '$.principal'), action = json_extract(data, '$.action'),
        digest = json_extract(data, '$.body_digest'), fingerprint = json_extract(data, '$.target_fingerprint');
    CREATE INDEX cards_lookup ON cards (digest, action, principal, status, created_at);
    """,
    # 3: the sha256 of the card's one approval-page link secret (never the secret itself), so any
    # server on the store can verify a link; cleared when the link is used.
    """
    ALTER TABLE cards ADD COLUMN link_hash TEXT;
    """,
    # 4: the policy's approvals (MAYA_POLICY), append-only, one per person per card; a card's own
    # data carries them too (Card.approvals, Card.policy: None on older cards).
    """
    CREATE TABLE approvals (
        card_id   TEXT NOT NULL,
        principal TEXT NOT NULL,
        at        TEXT NOT NULL,
        data      TEXT NOT NULL,
        PRIMARY KEY (card_id, principal)
    );
    CREATE TRIGGER approvals_no_update BEFORE UPDATE ON approvals
    BEGIN SELECT RAISE(ABORT, 'approvals are append-only'); END;
    CREATE TRIGGER approvals_no_delete BEFORE DELETE ON approvals
    BEGIN SELECT RAISE(ABORT, 'approvals are append-only'); END;
    """,
    # 5: what the audit log's lines carry beyond the row (the card's status after it, Door's request
    # id, the replica that wrote it), and an index for reading the audit by time.
    """
    ALTER TABLE audit ADD COLUMN status TEXT;
    ALTER TABLE audit ADD COLUMN request_id TEXT;
    ALTER TABLE audit ADD COLUMN replica TEXT;
    CREATE INDEX audit_at ON audit (at);
    """,
)


def _statements(script: str) -> list[str]:
    """A migration step's statements, split where SQLite says one ends (a trigger's body holds ``;``)."""
    found: list[str] = []
    current = ""
    for piece in script.split(";"):
        current += piece + ";"
        if sqlite3.complete_statement(current):
            if current.strip(" \n;"):
                found.append(current.strip())
            current = ""
    return found


# The two lookups that reuse a card: one indexed SELECT each, never a scan of the store.
FIND_LIVE = (
    "SELECT data FROM cards INDEXED BY cards_lookup WHERE digest = ? AND action = ? AND principal IS ? AND status = ? "
    "AND fingerprint = ? AND expires_at > ? ORDER BY created_at DESC LIMIT 1"
)
FIND_ASKED = (
    "SELECT data FROM cards INDEXED BY cards_lookup WHERE digest = ? AND action = ? AND principal IS ? "
    "ORDER BY status = ? DESC, created_at DESC LIMIT 1"
)


class SqliteCardStore:
    """Cards and audit in one SQLite file (or ``":memory:"``), safe to share between threads and tasks.

    One connection behind a lock serialises this process; ``BEGIN IMMEDIATE`` and the status guard
    in every UPDATE keep two processes sharing the file from both consuming one card. The methods
    are coroutines to match ``CardStore`` (the PostgreSQL store awaits its network); each runs its
    statements inline, a local file's microseconds, never across an ``await``.
    """

    def __init__(
        self, path: str | Path = ":memory:", *, replica: str | None = None, observer: AuditObserver | None = None
    ) -> None:
        """``replica`` is recorded on every audit row this store writes; ``observer`` is handed each
        row once its transaction has committed (never one that was rolled back), in sequence order."""
        self._replica = replica
        self._observer = observer
        self._appended: list[tuple[AuditEvent, Card]] = []
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        with self._lock:
            self._db.execute("PRAGMA busy_timeout = 5000")
            self._create_and_migrate()

    def _create_and_migrate(self) -> None:
        """Schema and pending migrations in one write transaction: whole or not at all, one commit."""
        try:
            self._db.executescript("BEGIN IMMEDIATE;" + _SCHEMA)  # the script leaves its transaction open
            # Another process may have migrated meanwhile: the version is read under the write lock.
            version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
            for number, step in enumerate(_MIGRATIONS[version:], start=version + 1):
                for statement in _statements(step):
                    self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {number}")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    async def close(self) -> None:
        with self._lock:
            self._db.close()

    async def ping(self) -> None:
        with self._lock:
            self._db.execute("SELECT count(*) FROM cards WHERE status = ?", (CardStatus.EXECUTING.value,)).fetchone()

    async def create(self, card: Card) -> Card:
        if card.status is not CardStatus.PENDING:
            raise ValueError(f"a new card must be pending, not {card.status}")
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "INSERT INTO cards (id, status, created_at, expires_at, data, principal, action, digest, fingerprint) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        card.id,
                        card.status.value,
                        timestamp(card.created_at),
                        timestamp(card.expires_at),
                        card.model_dump_json(),
                        card.principal,
                        card.action,
                        card.body_digest,
                        card.target_fingerprint,
                    ),
                )
                self._append(card, created_entry(card))
            except BaseException:
                self._rollback()
                raise
            self._end(True)
        return card

    async def get(self, card_id: str) -> Card | None:
        with self._lock:
            row = self._db.execute("SELECT data FROM cards WHERE id = ?", (card_id,)).fetchone()
        return None if row is None else Card.model_validate_json(row[0])

    async def list(self, status: CardStatus | None = None) -> list[Card]:
        with self._lock:
            if status is None:
                rows = self._db.execute("SELECT data FROM cards ORDER BY created_at, id").fetchall()
            else:
                rows = self._db.execute(
                    "SELECT data FROM cards WHERE status = ? ORDER BY created_at, id", (CardStatus(status).value,)
                ).fetchall()
        return [Card.model_validate_json(row[0]) for row in rows]

    async def audit(self, card_id: str) -> builtins.list[AuditEvent]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {', '.join(AUDIT_COLUMNS)} FROM audit WHERE card_id = ? ORDER BY seq", (card_id,)
            ).fetchall()
        return [audit_event(row) for row in rows]

    async def audit_since(self, since: datetime) -> builtins.list[tuple[AuditEvent, Card]]:
        # ``at`` is UTC ISO 8601 text, which sorts as time does.
        columns = ", ".join(f"audit.{name}" for name in AUDIT_COLUMNS)
        with self._lock:
            rows = self._db.execute(
                f"SELECT {columns}, cards.data FROM audit JOIN cards ON cards.id = audit.card_id "
                "WHERE audit.at >= ? ORDER BY audit.seq",
                (since.astimezone(UTC).isoformat(),),
            ).fetchall()
        return [(audit_event(row[:-1]), Card.model_validate_json(row[-1])) for row in rows]

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
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                moved = self._transition(card_id, expected, to, entry, update or {}, live_at)
            except BaseException:
                self._rollback()
                raise
            self._end(moved is not None)
        return moved

    async def find_live(
        self, principal: str | None, action: str, digest: str, fingerprint: str, now: datetime
    ) -> Card | None:
        return self._one(FIND_LIVE, (digest, action, principal, CardStatus.PENDING.value, fingerprint, timestamp(now)))

    async def find_asked(self, principal: str | None, action: str, digest: str) -> Card | None:
        return self._one(FIND_ASKED, (digest, action, principal, CardStatus.PENDING.value))

    def _one(self, sql: str, params: tuple[Any, ...]) -> Card | None:
        with self._lock:
            row = self._db.execute(sql, params).fetchone()
        return None if row is None else Card.model_validate_json(row[0])

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
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                moved = self._transition(card_id, CardStatus.PENDING, CardStatus.EXECUTING, entry, update, live_at)
                if moved is not None:
                    self._db.execute(
                        "UPDATE cards SET executor = ?, lease_until = ?, sending = 0 WHERE id = ?",
                        (executor, timestamp(until), card_id),
                    )
            except BaseException:
                self._rollback()
                raise
            self._end(moved is not None)
        return moved

    async def advance(
        self, card_id: str, executor: str, *, update: Mapping[str, Any], entry: AuditEntry
    ) -> Card | None:
        status = CardStatus.EXECUTING.value
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT data FROM cards WHERE id = ? AND status = ? AND executor = ?", (card_id, status, executor)
                ).fetchone()
                after = None if row is None else moved(Card.model_validate_json(row[0]), update, CardStatus.EXECUTING)
                if after is not None:
                    self._db.execute("UPDATE cards SET data = ? WHERE id = ?", (after.model_dump_json(), card_id))
                    self._append(after, entry)
            except BaseException:
                self._rollback()
                raise
            self._end(after is not None)
        return after

    async def mark_sending(self, card_id: str, executor: str) -> bool:
        return self._guarded(
            "UPDATE cards SET sending = 1 WHERE id = ? AND status = ? AND executor = ?",
            (card_id, CardStatus.EXECUTING.value, executor),
            card_id,
            None,
        )

    async def renew(self, card_id: str, executor: str, until: datetime) -> bool:
        return self._guarded(
            "UPDATE cards SET lease_until = ? WHERE id = ? AND status = ? AND executor = ?",
            (timestamp(until), card_id, CardStatus.EXECUTING.value, executor),
            card_id,
            None,
        )

    async def leases(self) -> builtins.list[Lease]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, executor, lease_until, sending FROM cards WHERE status = ? ORDER BY created_at, id",
                (CardStatus.EXECUTING.value,),
            ).fetchall()
        return [lease_of(row) for row in rows]

    async def take_over(self, card_id: str, *, old: str | None, new: str, until: datetime, entry: AuditEntry) -> bool:
        return self._guarded(
            "UPDATE cards SET executor = ?, lease_until = ? WHERE id = ? AND status = ? AND executor IS ?",
            (new, timestamp(until), card_id, CardStatus.EXECUTING.value, old),
            card_id,
            entry,
        )

    async def add_approval(
        self, card_id: str, approval: CardApproval, *, entry: AuditEntry, live_at: datetime
    ) -> Card | None:
        pending = CardStatus.PENDING.value
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT data FROM cards WHERE id = ? AND status = ?", (card_id, pending)
                ).fetchone()
                after = None if row is None else with_approval(Card.model_validate_json(row[0]), approval, live_at)
                if after is not None:
                    self._db.execute(
                        "INSERT INTO approvals (card_id, principal, at, data) VALUES (?, ?, ?, ?)",
                        (
                            card_id,
                            approval.principal,
                            approval.at.astimezone(UTC).isoformat(),
                            approval.model_dump_json(),
                        ),
                    )
                    self._db.execute("UPDATE cards SET data = ? WHERE id = ?", (after.model_dump_json(), card_id))
                    self._append(after, entry)
            except sqlite3.IntegrityError:
                after = None  # that person's approval is there already: one per person
            except BaseException:
                self._rollback()
                raise
            self._end(after is not None)
        return after

    async def set_link(self, card_id: str, link_hash: str) -> bool:
        return self._guarded(
            "UPDATE cards SET link_hash = ? WHERE id = ? AND status = ?",
            (link_hash, card_id, CardStatus.PENDING.value),
            card_id,
            None,
        )

    async def has_link(self, card_id: str, link_hash: str) -> bool:
        with self._lock:
            row = self._db.execute(
                "SELECT 1 FROM cards WHERE id = ? AND status = ? AND link_hash = ?",
                (card_id, CardStatus.PENDING.value, link_hash),
            ).fetchone()
        return row is not None

    async def use_link(self, card_id: str, link_hash: str) -> bool:
        return self._guarded(
            "UPDATE cards SET link_hash = NULL WHERE id = ? AND status = ? AND link_hash = ?",
            (card_id, CardStatus.PENDING.value, link_hash),
            card_id,
            None,
        )

    def _guarded(self, sql: str, params: tuple[Any, ...], card_id: str, entry: AuditEntry | None) -> bool:
        """One guarded UPDATE (and its audit row), committed only when it hit exactly the card."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                hit = self._db.execute(sql, params).rowcount == 1
                if hit and entry is not None:
                    row = self._db.execute("SELECT data FROM cards WHERE id = ?", (card_id,)).fetchone()
                    self._append(Card.model_validate_json(row[0]), entry)
            except BaseException:
                self._rollback()
                raise
            self._end(hit)
        return hit

    async def due(self, now: datetime) -> builtins.list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id FROM cards WHERE status = ? AND expires_at <= ? ORDER BY expires_at",
                (CardStatus.PENDING.value, timestamp(now)),
            ).fetchall()
        return [row[0] for row in rows]

    # --- inside the lock and a transaction -----------------------------------------------------

    def _transition(
        self,
        card_id: str,
        expected: CardStatus,
        to: CardStatus,
        entry: AuditEntry,
        update: Mapping[str, Any],
        live_at: datetime | None,
    ) -> Card | None:
        row = self._db.execute(
            "SELECT data FROM cards WHERE id = ? AND status = ?", (card_id, expected.value)
        ).fetchone()
        if row is None:
            return None
        card = Card.model_validate_json(row[0])
        if live_at is not None and live_at >= card.expires_at:
            return None
        after = moved(card, update, to)
        cursor = self._db.execute(
            "UPDATE cards SET status = ?, data = ? WHERE id = ? AND status = ?",
            (to.value, after.model_dump_json(), card_id, expected.value),
        )
        if cursor.rowcount != 1:
            return None
        self._append(after, entry)
        return after

    def _append(self, card: Card, entry: AuditEntry) -> None:
        """Insert ``entry`` as a row of ``card`` (as it is once the row is written); the observer gets it at commit."""
        values = (
            card.id,
            entry.at.astimezone(UTC).isoformat(),
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
        cursor = self._db.execute(
            f"INSERT INTO audit ({', '.join(AUDIT_COLUMNS[1:])}) VALUES ({', '.join('?' * len(values))})", values
        )
        assert cursor.lastrowid is not None
        self._appended.append((audit_event((cursor.lastrowid, *values)), card))

    def _end(self, commit: bool) -> None:
        """Commit (then hand the rows to the observer, still under the lock so they leave in order) or roll back."""
        if not commit:
            self._rollback()
            return
        try:
            self._db.execute("COMMIT")
        except BaseException:
            self._rollback()  # what was appended was not kept, so nobody is told of it
            raise
        appended, self._appended = self._appended, []
        notify(self._observer, appended)

    def _rollback(self) -> None:
        self._appended = []
        self._db.execute("ROLLBACK")
