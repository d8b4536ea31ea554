"""Where the world is kept: in memory, or in an SQLite file that survives a restart.

The world is written as JSON documents, one row per organisation, token, cluster, pool (with its
workers), operation, inventory snapshot and idempotency entry. The backend marks what a change
touched and ``commit`` writes exactly those rows in one transaction, so scaling one pool of a large
world rewrites one pool row and one operation row, never the world.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reference_backend.world import Doc, encode_doc

TABLES = ("meta", "organisations", "tokens", "clusters", "pools", "operations", "inventory", "idempotency")

Key = tuple[str, str]


class Store:
    """The persistence of one backend; ``MemoryStore`` when there is no file."""

    def load(self, table: str) -> Iterator[tuple[str, Any]]:
        return iter(())

    def write(self, upserts: dict[Key, Doc], deletes: set[Key]) -> None:
        """Write the changed rows in one transaction (a no-op in memory)."""

    def clear(self) -> None:
        """Forget every row (a reset)."""

    @property
    def empty(self) -> bool:
        return True

    @property
    def persistent(self) -> bool:
        """Whether ``write`` keeps anything: when not, the backend need not build the rows at all."""
        return False

    def close(self) -> None:
        """Release the file."""


class MemoryStore(Store):
    """State that lives only as long as the process."""


class SqliteStore(Store):
    """An SQLite file (stdlib ``sqlite3``), committed before any accepted mutation is answered."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # The backend runs on one event loop thread; uvicorn may start it on another than the caller's.
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        # A deleted row's bytes are overwritten, not left in a free page (a migrated token row).
        self._db.execute("PRAGMA secure_delete=ON")
        for table in TABLES:
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, doc TEXT NOT NULL)")

    @property
    def persistent(self) -> bool:
        return True

    @property
    def empty(self) -> bool:
        row = self._db.execute("SELECT COUNT(*) FROM meta").fetchone()
        return bool(row[0] == 0)

    def load(self, table: str) -> Iterator[tuple[str, Any]]:
        for key, doc in self._db.execute(f"SELECT key, doc FROM {table}"):
            yield key, json.loads(doc)

    def write(self, upserts: dict[Key, Doc], deletes: set[Key]) -> None:
        if not upserts and not deletes:
            return
        with self._transaction():
            for (table, key), doc in upserts.items():
                self._db.execute(
                    f"INSERT INTO {table} (key, doc) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET doc = excluded.doc",
                    (key, encode_doc(doc).decode()),
                )
            for table, key in deletes:
                self._db.execute(f"DELETE FROM {table} WHERE key = ?", (key,))

    def clear(self) -> None:
        with self._transaction():
            for table in TABLES:
                self._db.execute(f"DELETE FROM {table}")

    def close(self) -> None:
        self._db.close()

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._db.execute("COMMIT" if exc_type is None else "ROLLBACK")
