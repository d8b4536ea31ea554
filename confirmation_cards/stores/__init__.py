"""Which card store ``MAYA_CARD_STORE`` names, opened: a SQLite file for one person, PostgreSQL for replicas."""

from __future__ import annotations

from pathlib import Path

from confirmation_cards.stores.base import AuditEntry, AuditObserver, CardStore, Lease
from confirmation_cards.stores.sqlite import SqliteCardStore

__all__ = ["AuditEntry", "AuditObserver", "CardStore", "Lease", "SqliteCardStore", "is_postgres", "open_store"]


def is_postgres(location: str) -> bool:
    """Whether ``MAYA_CARD_STORE`` names a PostgreSQL database rather than a SQLite file."""
    return location.startswith(("postgresql://", "postgres://"))


async def open_store(
    location: str | Path,
    *,
    pool_size: int = 10,
    connect_seconds: float = 30.0,
    replica: str | None = None,
    observer: AuditObserver | None = None,
) -> CardStore:
    """The store ``location`` names: a ``postgresql://`` URL (shared by replicas; its server is waited
    for up to ``connect_seconds``), else a SQLite file or ``":memory:"``. psycopg is imported only for
    PostgreSQL. Its audit rows record ``replica``; ``observer`` sees each one once committed."""
    if isinstance(location, str) and is_postgres(location):
        from confirmation_cards.stores.postgres import PostgresCardStore

        return await PostgresCardStore.open(
            location, pool_size=pool_size, connect_seconds=connect_seconds, replica=replica, observer=observer
        )
    return SqliteCardStore(location, replica=replica, observer=observer)
