"""Where cards wait for a decision, and the append-only audit trail of what became of them.

Single use (DESIGN.md property 3) is a guarded state change: ``transition`` moves a card only from
the state the caller expects, in one transaction, and says whether it did. Fifty concurrent
approvals of one card therefore see one ``pending → executing`` and forty-nine refusals.

The audit table refuses UPDATE and DELETE by trigger, so "append-only" holds for every writer of
the file, not only for this class. Neither table has a place for a token (property 7).
"""

from __future__ import annotations

import builtins
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from confirmation_cards.models import AuditEvent, AuditKind, Card, CardStatus

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


@dataclass(frozen=True)
class AuditEntry:
    """An audit row to append, before the store gives it a sequence number."""

    event: AuditKind
    at: datetime
    by: str | None = None
    status_code: int | None = None
    operation_id: str | None = None
    rule: str | None = None
    detail: str = ""


class CardStore(Protocol):
    """What the approval service needs from a store of cards."""

    def create(self, card: Card) -> Card:
        """Save a new pending card and audit ``created``; a card id can be saved once."""
        ...

    def get(self, card_id: str) -> Card | None: ...

    def list(self, status: CardStatus | None = None) -> list[Card]: ...

    def audit(self, card_id: str) -> builtins.list[AuditEvent]: ...

    def transition(
        self,
        card_id: str,
        *,
        expected: CardStatus,
        to: CardStatus,
        entry: AuditEntry,
        update: Mapping[str, Any] | None = None,
        live_at: datetime | None = None,
    ) -> Card | None:
        """Move a card from ``expected`` to ``to`` and append ``entry``, atomically.

        ``update`` sets other card fields at the same time. With ``live_at``, a card that has
        expired by then does not move. Returns the card as it is now, or None when it did not move.
        """
        ...

    def due(self, now: datetime) -> builtins.list[str]:
        """Ids of pending cards whose expiry has passed at ``now``."""
        ...


def _ts(when: datetime) -> float:
    return when.astimezone(UTC).timestamp()


class SqliteCardStore:
    """Cards and audit in one SQLite file (or ``":memory:"``), safe to share between threads and tasks.

    One connection behind a lock serialises this process; ``BEGIN IMMEDIATE`` and the status guard
    in every UPDATE keep two processes sharing the file from both consuming one card.
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        with self._lock:
            self._db.execute("PRAGMA busy_timeout = 5000")
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def create(self, card: Card) -> Card:
        if card.status is not CardStatus.PENDING:
            raise ValueError(f"a new card must be pending, not {card.status}")
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "INSERT INTO cards (id, status, created_at, expires_at, data) VALUES (?, ?, ?, ?, ?)",
                    (card.id, card.status.value, _ts(card.created_at), _ts(card.expires_at), card.model_dump_json()),
                )
                self._append(
                    card.id,
                    AuditEntry(
                        "created",
                        card.created_at,
                        detail=f"{card.action} {card.method} {card.path} body sha256 {card.body_digest}",
                    ),
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        return card

    def get(self, card_id: str) -> Card | None:
        with self._lock:
            row = self._db.execute("SELECT data FROM cards WHERE id = ?", (card_id,)).fetchone()
        return None if row is None else Card.model_validate_json(row[0])

    def list(self, status: CardStatus | None = None) -> list[Card]:
        with self._lock:
            if status is None:
                rows = self._db.execute("SELECT data FROM cards ORDER BY created_at, id").fetchall()
            else:
                rows = self._db.execute(
                    "SELECT data FROM cards WHERE status = ? ORDER BY created_at, id", (CardStatus(status).value,)
                ).fetchall()
        return [Card.model_validate_json(row[0]) for row in rows]

    def audit(self, card_id: str) -> builtins.list[AuditEvent]:
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, card_id, at, event, by, status_code, operation_id, rule, detail "
                "FROM audit WHERE card_id = ? ORDER BY seq",
                (card_id,),
            ).fetchall()
        names = ("seq", "card_id", "at", "event", "by", "status_code", "operation_id", "rule", "detail")
        return [AuditEvent.model_validate(dict(zip(names, row, strict=True))) for row in rows]

    def transition(
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
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT" if moved is not None else "ROLLBACK")
        return moved

    def due(self, now: datetime) -> builtins.list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id FROM cards WHERE status = ? AND expires_at <= ? ORDER BY expires_at",
                (CardStatus.PENDING.value, _ts(now)),
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
        # Re-validated rather than model_copy'd, so an update can never smuggle in a malformed field.
        moved = Card.model_validate({**card.model_dump(), **update, "status": to})
        cursor = self._db.execute(
            "UPDATE cards SET status = ?, data = ? WHERE id = ? AND status = ?",
            (to.value, moved.model_dump_json(), card_id, expected.value),
        )
        if cursor.rowcount != 1:
            return None
        self._append(card_id, entry)
        return moved

    def _append(self, card_id: str, entry: AuditEntry) -> None:
        self._db.execute(
            "INSERT INTO audit (card_id, at, event, by, status_code, operation_id, rule, detail) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                card_id,
                entry.at.astimezone(UTC).isoformat(),
                entry.event,
                entry.by,
                entry.status_code,
                entry.operation_id,
                entry.rule,
                entry.detail,
            ),
        )
