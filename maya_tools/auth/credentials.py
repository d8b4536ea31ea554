"""Each person's own Door token, stored encrypted and bound to them: ``DoorCredentials``.

A person (``Principal``: issuer + ``sub``) connects their Door token once on ``/connect``; the server
then calls Door with it on their behalf and never with the MCP access token (the MCP spec forbids
token passthrough). The token is sealed with AES-GCM (``sealing``) under the newest key of
``MAYA_CREDENTIAL_KEY``, a fresh nonce per write, and associated data naming the issuer and subject:
a row copied to another person does not decrypt, and ``get`` answers None for it (logged, without
the token). The rows live in the card store's database (``storage``: SQLite or PostgreSQL), so any
replica can act for the person. ``info`` tells what the page may show: when, what Door's reads
found, and a short fingerprint; never the token.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from backend_client import DoorClient
from confirmation_cards import token_fingerprint
from confirmation_cards.stores import is_postgres
from maya_tools.auth.sealing import SealBroken, Sealer
from maya_tools.auth.storage import AuthDatabase, CredentialRow, SqliteAuthDatabase
from maya_tools.auth.tokens import Principal

logger = logging.getLogger(__name__)

TOKEN_LIMIT = 4_096
"""Characters a Door token may have; a longer paste is not a token."""


class ConnectionInfo(BaseModel):
    """What a read-only check of a Door token found, and, once stored, when and which token."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    checked_at: datetime
    organisations: tuple[str, ...] = Field(description="The organisations of the clusters Door shows this token.")
    clusters: tuple[str, ...] = Field(description="The names of the clusters Door shows this token.")
    may_change: bool | None = Field(
        default=None,
        description="Whether Door lets this token change pools: None, since no public read tells the role "
        "(R-AUTH-03: a member learns it as a 403 on the first change).",
    )
    fingerprint: str | None = Field(default=None, description="A short name of the stored token, never the token.")
    connected_at: datetime | None = None


async def check_door_token(door: DoorClient, *, now: Callable[[], float] = time.time) -> ConnectionInfo:
    """What Door says the token may read, by reads only (DESIGN.md property 10: never a mutation).

    Raises the client's ``Unauthorized`` for a token Door does not know (R-AUTH-01), and any other
    ``DoorError`` when Door cannot be asked."""
    clusters = (await door.list_clusters()).items
    return ConnectionInfo(
        checked_at=datetime.fromtimestamp(now(), UTC),
        organisations=tuple(sorted({cluster.organisation for cluster in clusters})),
        clusters=tuple(sorted(cluster.name for cluster in clusters)),
        may_change=None,
    )


def associated_data(issuer: str, subject: str) -> bytes:
    """What a sealed token is bound to: the person, unambiguously (JSON, so no separator can be forged)."""
    return json.dumps(["maya-tools door token v1", issuer, subject]).encode()


class DoorCredentials:
    """The per-person Door token store, keyed by ``(issuer, subject)``."""

    def __init__(self, database: AuthDatabase, keys: list[bytes], *, clock: Callable[[], float] = time.time) -> None:
        self.database = database
        self._sealer = Sealer(keys)
        self._clock = clock

    async def close(self) -> None:
        await self.database.close()

    async def put(self, principal: Principal, token: str, *, checked: ConnectionInfo) -> ConnectionInfo:
        """Store ``token`` for ``principal`` (replacing any earlier one); returns what ``info`` will say."""
        if not token or len(token) > TOKEN_LIMIT:
            raise ValueError(f"a Door token has 1 to {TOKEN_LIMIT} characters")
        now = self._clock()
        stored = checked.model_copy(
            update={"fingerprint": token_fingerprint(token), "connected_at": datetime.fromtimestamp(now, UTC)}
        )
        sealed = self._sealer.seal(token.encode(), associated_data(principal.issuer, principal.subject))
        row = CredentialRow(
            principal.issuer, principal.subject, sealed, stored.fingerprint or "", stored.model_dump_json(), now
        )
        await self.database.put_credential(row)
        logger.info("Door token %s connected for %s", stored.fingerprint, _who(principal))
        return stored

    async def get(self, principal: Principal) -> str | None:
        """The person's Door token, or None when they have none (or their row does not decrypt for
        them: logged as a warning). Raises ``KeyNotHeld`` when the row's key is not configured."""
        row = await self.database.get_credential(principal.issuer, principal.subject)
        return None if row is None else self._open(principal, row)

    async def info(self, principal: Principal) -> ConnectionInfo | None:
        """What is stored for the person (never the token), or None when nothing usable is."""
        row = await self.database.get_credential(principal.issuer, principal.subject)
        if row is None or self._open(principal, row) is None:
            return None
        return ConnectionInfo.model_validate_json(row.info)

    async def delete(self, principal: Principal) -> bool:
        """Forget the person's Door token; whether there was one."""
        deleted = await self.database.delete_credential(principal.issuer, principal.subject)
        if deleted:
            logger.info("Door token disconnected for %s", _who(principal))
        return deleted

    async def reencrypt(self) -> int:
        """Seal every row written with an older key again with the newest; returns how many moved.

        A row that does not decrypt for its own person is left (and logged); a row whose key is no
        longer configured raises ``KeyNotHeld``: put that key back after the newest and run again."""
        moved = 0
        for row in await self.database.credentials_not_sealed_with(self._sealer.newest):
            associated = associated_data(row.issuer, row.subject)
            try:
                token = self._sealer.open(row.sealed, associated)
            except SealBroken:
                logger.warning("a stored Door token of %s does not decrypt; left as it is", row.subject[:80])
                continue
            if await self.database.reseal(row, self._sealer.seal(token, associated)):
                moved += 1
        return moved

    def _open(self, principal: Principal, row: CredentialRow) -> str | None:
        try:
            return self._sealer.open(row.sealed, associated_data(principal.issuer, principal.subject)).decode()
        except SealBroken as broken:
            logger.warning("%s (for %s)", broken, _who(principal))
            return None


def _who(principal: Principal) -> str:
    return f"{principal.name or principal.subject[:80]} ({principal.issuer})"


async def open_database(location: str | Path, *, pool_size: int = 5, connect_seconds: float = 30.0) -> AuthDatabase:
    """The database ``location`` names (the card store's ``MAYA_CARD_STORE``): PostgreSQL for a
    ``postgresql://`` URL, else a SQLite file. psycopg is imported only for PostgreSQL."""
    if isinstance(location, str) and is_postgres(location):
        from maya_tools.auth.storage_postgres import PostgresAuthDatabase

        return await PostgresAuthDatabase.open(location, pool_size=pool_size, connect_seconds=connect_seconds)
    return SqliteAuthDatabase(location)


async def open_credentials(
    location: str | Path, keys: list[bytes], *, clock: Callable[[], float] = time.time, pool_size: int = 5
) -> DoorCredentials:
    """The Door token store in the database ``location`` names, the card store's (``MAYA_CARD_STORE``):
    a ``postgresql://`` URL or a SQLite file. ``keys`` come from ``parse_credential_keys``."""
    Sealer(keys)  # a bad key list fails before a database is opened
    return DoorCredentials(await open_database(location, pool_size=pool_size), keys, clock=clock)
