"""Where the auth room keeps its state: the sealed Door tokens, and the short-lived records of the
browser sign-in (pending sign-ins, sessions, connect requests), in the card store's own database.

Two tables of their own next to the card store's, created when missing:

- ``maya_door_credentials``: one row per person (issuer, subject) with the sealed token (key id,
  nonce, ciphertext: never the token), a short fingerprint and what the check found;
- ``maya_web_records``: small JSON records by kind and the sha256 of their random id, each with an
  expiry. The id itself lives only in the person's cookie or link, so a copy of the database opens
  no session.

``credentials.open_database`` picks the engine like the card store's ``open_store``: a
``postgresql://`` URL (``storage_postgres``; every replica reads the same rows), else a SQLite file
(``SqliteAuthDatabase`` here). The SQLite engine
follows ``SqliteCardStore``: one connection behind a lock, each method's statements run inline.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from maya_tools.auth.sealing import Sealed

SCHEMA = """
CREATE TABLE IF NOT EXISTS maya_door_credentials (
    issuer       TEXT NOT NULL,
    subject      TEXT NOT NULL,
    key_id       TEXT NOT NULL,
    nonce        BLOB NOT NULL,
    ciphertext   BLOB NOT NULL,
    fingerprint  TEXT NOT NULL,
    info         TEXT NOT NULL,
    connected_at REAL NOT NULL,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX IF NOT EXISTS maya_door_credentials_key ON maya_door_credentials (key_id);
CREATE TABLE IF NOT EXISTS maya_web_records (
    kind       TEXT NOT NULL,
    id_hash    TEXT NOT NULL,
    data       TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (kind, id_hash)
);
CREATE INDEX IF NOT EXISTS maya_web_records_due ON maya_web_records (kind, expires_at);
"""

CREDENTIAL_COLUMNS = "issuer, subject, key_id, nonce, ciphertext, fingerprint, info, connected_at"


@dataclass(frozen=True)
class CredentialRow:
    """One person's stored Door token, sealed; ``info`` is ``ConnectionInfo`` as JSON (nothing secret)."""

    issuer: str
    subject: str
    sealed: Sealed
    fingerprint: str
    info: str
    connected_at: float


def row_of(values: tuple[Any, ...]) -> CredentialRow:
    issuer, subject, kid, nonce, ciphertext, fingerprint, info, connected_at = values
    sealed = Sealed(str(kid), bytes(nonce), bytes(ciphertext))
    return CredentialRow(str(issuer), str(subject), sealed, str(fingerprint), str(info), float(connected_at))


def values_of(row: CredentialRow) -> tuple[object, ...]:
    s = row.sealed
    return (row.issuer, row.subject, s.key_id, s.nonce, s.ciphertext, row.fingerprint, row.info, row.connected_at)


class AuthDatabase(Protocol):
    """The rows ``DoorCredentials``, ``BrowserSignIn`` and ``ConnectRequests`` keep."""

    async def put_credential(self, row: CredentialRow) -> None:
        """Insert or replace the person's row."""
        ...

    async def get_credential(self, issuer: str, subject: str) -> CredentialRow | None: ...

    async def delete_credential(self, issuer: str, subject: str) -> bool: ...

    async def credentials_not_sealed_with(self, key_id: str) -> list[CredentialRow]:
        """Every row whose key is not ``key_id``: what a re-encryption has left to move."""
        ...

    async def reseal(self, row: CredentialRow, sealed: Sealed) -> bool:
        """Replace ``row``'s sealed token with ``sealed`` if the row is still as read (no newer token)."""
        ...

    async def put_record(self, kind: str, id_hash: str, data: str, expires_at: float, now: float) -> None:
        """Save a record (replacing one with the same id) and drop the expired records of ``kind``."""
        ...

    async def put_record_bounded(
        self, kind: str, id_hash: str, data: str, expires_at: float, now: float, limit: int
    ) -> bool:
        """Like ``put_record``, in one transaction, only while fewer than ``limit`` unexpired records of
        ``kind`` exist: False (nothing written) when ``limit`` are already there."""
        ...

    async def purge_records(self, now: float) -> int:
        """Delete the records of every kind that have expired at ``now``; how many were deleted."""
        ...

    async def get_record(self, kind: str, id_hash: str, now: float) -> str | None:
        """The record's data, if it exists and has not expired at ``now``."""
        ...

    async def take_record(self, kind: str, id_hash: str, now: float) -> str | None:
        """Delete the record and return its data if it had not expired: true for exactly one caller."""
        ...

    async def update_record(self, kind: str, id_hash: str, data: str, now: float) -> bool:
        """Replace an unexpired record's data, keeping its expiry."""
        ...

    async def delete_record(self, kind: str, id_hash: str) -> bool: ...

    async def close(self) -> None: ...


class SqliteAuthDatabase:
    """The auth tables in a SQLite file (the card store's own file, or another), or ``":memory:"``."""

    def __init__(self, path: str | Path = ":memory:") -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        with self._lock:
            self._db.execute("PRAGMA busy_timeout = 5000")
            # Freed pages are zeroed: a replaced or deleted sealed token leaves no ciphertext behind.
            self._db.execute("PRAGMA secure_delete = ON")
            self._db.executescript("BEGIN IMMEDIATE;" + SCHEMA + "COMMIT;")

    async def close(self) -> None:
        with self._lock:
            self._db.close()

    async def put_credential(self, row: CredentialRow) -> None:
        with self._lock:
            self._db.execute(
                f"INSERT OR REPLACE INTO maya_door_credentials ({CREDENTIAL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                values_of(row),
            )

    async def get_credential(self, issuer: str, subject: str) -> CredentialRow | None:
        with self._lock:
            found = self._db.execute(
                f"SELECT {CREDENTIAL_COLUMNS} FROM maya_door_credentials WHERE issuer = ? AND subject = ?",
                (issuer, subject),
            ).fetchone()
        return None if found is None else row_of(found)

    async def delete_credential(self, issuer: str, subject: str) -> bool:
        with self._lock:
            cursor = self._db.execute(
                "DELETE FROM maya_door_credentials WHERE issuer = ? AND subject = ?", (issuer, subject)
            )
        return cursor.rowcount > 0

    async def credentials_not_sealed_with(self, key_id: str) -> list[CredentialRow]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {CREDENTIAL_COLUMNS} FROM maya_door_credentials WHERE key_id <> ? ORDER BY issuer, subject",
                (key_id,),
            ).fetchall()
        return [row_of(row) for row in rows]

    async def reseal(self, row: CredentialRow, sealed: Sealed) -> bool:
        with self._lock:
            cursor = self._db.execute(
                "UPDATE maya_door_credentials SET key_id = ?, nonce = ?, ciphertext = ? "
                "WHERE issuer = ? AND subject = ? AND key_id = ? AND nonce = ?",
                (
                    sealed.key_id,
                    sealed.nonce,
                    sealed.ciphertext,
                    row.issuer,
                    row.subject,
                    row.sealed.key_id,
                    row.sealed.nonce,
                ),
            )
        return cursor.rowcount > 0

    async def put_record(self, kind: str, id_hash: str, data: str, expires_at: float, now: float) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("DELETE FROM maya_web_records WHERE kind = ? AND expires_at <= ?", (kind, now))
                self._db.execute(
                    "INSERT OR REPLACE INTO maya_web_records (kind, id_hash, data, expires_at) VALUES (?, ?, ?, ?)",
                    (kind, id_hash, data, expires_at),
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    async def put_record_bounded(
        self, kind: str, id_hash: str, data: str, expires_at: float, now: float, limit: int
    ) -> bool:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("DELETE FROM maya_web_records WHERE kind = ? AND expires_at <= ?", (kind, now))
                (count,) = self._db.execute(
                    "SELECT count(*) FROM maya_web_records WHERE kind = ? AND id_hash <> ?", (kind, id_hash)
                ).fetchone()
                if count < limit:
                    self._db.execute(
                        "INSERT OR REPLACE INTO maya_web_records (kind, id_hash, data, expires_at) VALUES (?, ?, ?, ?)",
                        (kind, id_hash, data, expires_at),
                    )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        return bool(count < limit)

    async def purge_records(self, now: float) -> int:
        with self._lock:
            cursor = self._db.execute("DELETE FROM maya_web_records WHERE expires_at <= ?", (now,))
        return cursor.rowcount

    async def get_record(self, kind: str, id_hash: str, now: float) -> str | None:
        with self._lock:
            found = self._db.execute(
                "SELECT data FROM maya_web_records WHERE kind = ? AND id_hash = ? AND expires_at > ?",
                (kind, id_hash, now),
            ).fetchone()
        return None if found is None else str(found[0])

    async def take_record(self, kind: str, id_hash: str, now: float) -> str | None:
        with self._lock:
            found = self._db.execute(
                "DELETE FROM maya_web_records WHERE kind = ? AND id_hash = ? RETURNING data, expires_at",
                (kind, id_hash),
            ).fetchone()
        return None if found is None or float(found[1]) <= now else str(found[0])

    async def update_record(self, kind: str, id_hash: str, data: str, now: float) -> bool:
        with self._lock:
            cursor = self._db.execute(
                "UPDATE maya_web_records SET data = ? WHERE kind = ? AND id_hash = ? AND expires_at > ?",
                (data, kind, id_hash, now),
            )
        return cursor.rowcount > 0

    async def delete_record(self, kind: str, id_hash: str) -> bool:
        with self._lock:
            cursor = self._db.execute("DELETE FROM maya_web_records WHERE kind = ? AND id_hash = ?", (kind, id_hash))
        return cursor.rowcount > 0
