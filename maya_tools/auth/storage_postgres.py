"""The auth tables in PostgreSQL, next to the card store's: every replica reads the same sealed Door
tokens and browser sessions, so a person signed in through one replica is signed in on all.

The tables are created when missing, under an advisory lock of their own so replicas starting
together create them once (the card store's migrations keep their own lock and version table).
Connections come from a psycopg 3 ``AsyncConnectionPool``, as in ``confirmation_cards.stores.postgres``.
"""

from __future__ import annotations

import anyio
import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from confirmation_cards.stores.postgres import where
from maya_tools.auth.sealing import Sealed
from maya_tools.auth.storage import CREDENTIAL_COLUMNS, CredentialRow, row_of, values_of

SCHEMA = """
CREATE TABLE IF NOT EXISTS maya_door_credentials (
    issuer       TEXT NOT NULL,
    subject      TEXT NOT NULL,
    key_id       TEXT NOT NULL,
    nonce        BYTEA NOT NULL,
    ciphertext   BYTEA NOT NULL,
    fingerprint  TEXT NOT NULL,
    info         TEXT NOT NULL,
    connected_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX IF NOT EXISTS maya_door_credentials_key ON maya_door_credentials (key_id);
CREATE TABLE IF NOT EXISTS maya_web_records (
    kind       TEXT NOT NULL,
    id_hash    TEXT NOT NULL,
    data       TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (kind, id_hash)
);
CREATE INDEX IF NOT EXISTS maya_web_records_due ON maya_web_records (kind, expires_at);
"""

SCHEMA_LOCK = 0x6D617961_61757468  # "maya" "auth"
"""Replicas starting at once take this lock, so the tables are created once."""

RECORDS_LOCK = 0x6D617961  # "maya": with the kind's hash, the lock of a bounded write of that kind
"""Held by ``put_record_bounded`` until its transaction ends."""

Pool = AsyncConnectionPool[psycopg.AsyncConnection[TupleRow]]


class AuthDatabaseUnavailable(ConnectionError):
    """The database could not be reached; the message names ``host:port/db``, never a password."""


class PostgresAuthDatabase:
    """Open with ``await PostgresAuthDatabase.open(url)``."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    @classmethod
    async def open(cls, url: str, *, pool_size: int = 5, connect_seconds: float = 30.0) -> PostgresAuthDatabase:
        pool: Pool = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={"autocommit": True, "application_name": "maya-tools auth"},
            open=False,
            timeout=connect_seconds,
            name="maya-tools auth",
        )
        try:
            await pool.open(wait=True, timeout=connect_seconds)
            async with pool.connection() as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                await conn.execute(SCHEMA.encode())  # bytes: run as one multi-statement script
        except (PoolTimeout, psycopg.OperationalError) as error:
            await pool.close()
            raise AuthDatabaseUnavailable(
                f"The PostgreSQL database at {where(url)} did not accept a connection within {connect_seconds:g} s "
                f"({type(error).__name__}). Check that the server runs, that MAYA_CARD_STORE names it, and that "
                "its user may connect."
            ) from error
        except BaseException:
            with anyio.CancelScope(shield=True):
                await pool.close()
            raise
        return cls(pool)

    async def close(self) -> None:
        await self._pool.close()

    async def put_credential(self, row: CredentialRow) -> None:
        async with self._pool.connection() as conn:
            await conn.execute(
                f"INSERT INTO maya_door_credentials ({CREDENTIAL_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (issuer, subject) DO UPDATE SET key_id = excluded.key_id, nonce = excluded.nonce, "
                "ciphertext = excluded.ciphertext, fingerprint = excluded.fingerprint, info = excluded.info, "
                "connected_at = excluded.connected_at",
                values_of(row),
            )

    async def get_credential(self, issuer: str, subject: str) -> CredentialRow | None:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {CREDENTIAL_COLUMNS} FROM maya_door_credentials WHERE issuer = %s AND subject = %s",
                (issuer, subject),
            )
            found = await cursor.fetchone()
        return None if found is None else row_of(found)

    async def delete_credential(self, issuer: str, subject: str) -> bool:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "DELETE FROM maya_door_credentials WHERE issuer = %s AND subject = %s", (issuer, subject)
            )
            return cursor.rowcount > 0

    async def credentials_not_sealed_with(self, key_id: str) -> list[CredentialRow]:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                f"SELECT {CREDENTIAL_COLUMNS} FROM maya_door_credentials WHERE key_id <> %s ORDER BY issuer, subject",
                (key_id,),
            )
            rows = await cursor.fetchall()
        return [row_of(row) for row in rows]

    async def reseal(self, row: CredentialRow, sealed: Sealed) -> bool:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "UPDATE maya_door_credentials SET key_id = %s, nonce = %s, ciphertext = %s "
                "WHERE issuer = %s AND subject = %s AND key_id = %s AND nonce = %s",
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
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute("DELETE FROM maya_web_records WHERE kind = %s AND expires_at <= %s", (kind, now))
            await conn.execute(
                "INSERT INTO maya_web_records (kind, id_hash, data, expires_at) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (kind, id_hash) DO UPDATE SET data = excluded.data, expires_at = excluded.expires_at",
                (kind, id_hash, data, expires_at),
            )

    async def put_record_bounded(
        self, kind: str, id_hash: str, data: str, expires_at: float, now: float, limit: int
    ) -> bool:
        async with self._pool.connection() as conn, conn.transaction():
            # One writer of ``kind`` at a time (until commit), so concurrent starts cannot pass the bound together.
            await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (RECORDS_LOCK, kind))
            await conn.execute("DELETE FROM maya_web_records WHERE kind = %s AND expires_at <= %s", (kind, now))
            cursor = await conn.execute(
                "SELECT count(*) FROM maya_web_records WHERE kind = %s AND id_hash <> %s", (kind, id_hash)
            )
            found = await cursor.fetchone()
            if found is None or int(found[0]) >= limit:
                return False
            await conn.execute(
                "INSERT INTO maya_web_records (kind, id_hash, data, expires_at) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (kind, id_hash) DO UPDATE SET data = excluded.data, expires_at = excluded.expires_at",
                (kind, id_hash, data, expires_at),
            )
            return True

    async def purge_records(self, now: float) -> int:
        async with self._pool.connection() as conn:
            cursor = await conn.execute("DELETE FROM maya_web_records WHERE expires_at <= %s", (now,))
            return cursor.rowcount

    async def get_record(self, kind: str, id_hash: str, now: float) -> str | None:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT data FROM maya_web_records WHERE kind = %s AND id_hash = %s AND expires_at > %s",
                (kind, id_hash, now),
            )
            found = await cursor.fetchone()
        return None if found is None else str(found[0])

    async def take_record(self, kind: str, id_hash: str, now: float) -> str | None:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "DELETE FROM maya_web_records WHERE kind = %s AND id_hash = %s RETURNING data, expires_at",
                (kind, id_hash),
            )
            found = await cursor.fetchone()
        return None if found is None or float(found[1]) <= now else str(found[0])

    async def update_record(self, kind: str, id_hash: str, data: str, now: float) -> bool:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "UPDATE maya_web_records SET data = %s WHERE kind = %s AND id_hash = %s AND expires_at > %s",
                (data, kind, id_hash, now),
            )
            return cursor.rowcount > 0

    async def delete_record(self, kind: str, id_hash: str) -> bool:
        async with self._pool.connection() as conn:
            cursor = await conn.execute(
                "DELETE FROM maya_web_records WHERE kind = %s AND id_hash = %s", (kind, id_hash)
            )
            return cursor.rowcount > 0
