"""The Door token store, one suite against SQLite and a real PostgreSQL server: tokens round trip,
are ciphertext wherever they are kept, stay readable across a key rotation and move to the new key
on re-encryption, are bound to their person, and a missing key or a bad setting fails clearly."""

from __future__ import annotations

import logging
import secrets
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from maya_tools.auth import Principal
from maya_tools.auth.credentials import ConnectionInfo, DoorCredentials, open_credentials
from maya_tools.auth.sealing import CredentialKeyError, KeyNotHeld, key_id, parse_credential_keys

pytestmark = pytest.mark.anyio

ISSUER = "https://id.door.test"
ADA = Principal(issuer=ISSUER, subject="ada", name="ada@door.test")
MAX = Principal(issuer=ISSUER, subject="max", name="max@door.test")
# Fixed, so that the parametrized ids match in every xdist worker.
OLD_KEY, NEW_KEY = bytes(range(32)), bytes(range(100, 132))
CHECKED = ConnectionInfo(
    checked_at=datetime(2026, 7, 28, tzinfo=UTC), organisations=("payments",), clusters=("payments-prod",)
)
Opener = Callable[[list[bytes]], Awaitable[DoorCredentials]]


def door_token() -> str:
    """A token no other test or fixture holds, so finding its bytes anywhere means it leaked."""
    return f"door-{secrets.token_urlsafe(24)}"


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "cards.sqlite3")
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
async def reopen(location: str) -> AsyncIterator[Opener]:
    """Open the store with these keys: each call is another process (or replica) with its own setting."""
    opened: list[DoorCredentials] = []

    async def open_one(keys: list[bytes]) -> DoorCredentials:
        store = await open_credentials(location, keys)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.close()


def stored_bytes(location: str) -> bytes:
    """Every byte the database holds of the store: the SQLite file and any journal or WAL beside it,
    or every column of every row as text in PostgreSQL."""
    if location.startswith("postgresql://"):
        with psycopg.connect(location, autocommit=True) as conn:
            rows = [
                conn.execute(f"SELECT t::text FROM {t} t").fetchall()
                for t in ("maya_door_credentials", "maya_web_records")
            ]
        return repr(rows).encode()
    return b"".join(path.read_bytes() for path in Path(location).parent.glob(Path(location).name + "*"))


def copy_row(location: str, source: Principal, target: Principal) -> None:
    """What someone with write access to the database does: copy a sealed row to another person."""
    columns = "key_id, nonce, ciphertext, fingerprint, info, connected_at"
    sql = (
        f"INSERT INTO maya_door_credentials (issuer, subject, {columns}) "
        f"SELECT {{p}}, {{p}}, {columns} FROM maya_door_credentials WHERE issuer = {{p}} AND subject = {{p}}"
    )
    values = (target.issuer, target.subject, source.issuer, source.subject)
    if location.startswith("postgresql://"):
        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute(sql.format(p="%s").encode(), values)  # type: ignore[arg-type]
        return
    db = sqlite3.connect(location)
    try:
        db.execute(sql.format(p="?"), values)
        db.commit()
    finally:
        db.close()


async def test_a_token_round_trips_and_info_shows_no_token(reopen: Opener) -> None:
    token = door_token()
    store = await reopen([NEW_KEY])

    stored = await store.put(ADA, token, checked=CHECKED)

    reopened = await reopen([NEW_KEY])
    assert await reopened.get(ADA) == token
    info = await reopened.info(ADA)
    assert info == stored
    assert info is not None and info.clusters == ("payments-prod",) and info.fingerprint is not None
    assert token not in info.model_dump_json() and info.fingerprint not in token
    assert await reopened.get(MAX) is None and await reopened.info(MAX) is None


async def test_a_token_is_replaced_and_deleted(reopen: Opener) -> None:
    store = await reopen([NEW_KEY])
    first, second = door_token(), door_token()
    await store.put(ADA, first, checked=CHECKED)

    await store.put(ADA, second, checked=CHECKED)
    assert await store.get(ADA) == second

    assert await store.delete(ADA) is True
    assert await store.get(ADA) is None and await store.info(ADA) is None
    assert await store.delete(ADA) is False


async def test_the_token_bytes_are_nowhere_in_the_database(reopen: Opener, location: str) -> None:
    tokens = [door_token(), door_token()]
    store = await reopen([NEW_KEY])
    await store.put(ADA, tokens[0], checked=CHECKED)
    await store.put(ADA, tokens[1], checked=CHECKED)  # the replaced token is gone from the freed pages too
    await store.put(MAX, tokens[0], checked=CHECKED)

    held = stored_bytes(location)

    assert b"maya_door_credentials" in held or b"payments-prod" in held  # the dump did read the store
    for token in tokens:
        assert token.encode() not in held
        assert token.encode().hex().encode() not in held  # nor as PostgreSQL's hex text of a bytea


async def test_rows_of_an_old_key_stay_readable_after_rotation_and_reencrypt_moves_them(
    reopen: Opener, location: str
) -> None:
    token = door_token()
    await (await reopen([OLD_KEY])).put(ADA, token, checked=CHECKED)

    rotated = await reopen([NEW_KEY, OLD_KEY])
    assert await rotated.get(ADA) == token
    await rotated.put(MAX, door_token(), checked=CHECKED)  # new rows use the newest key already

    assert await rotated.reencrypt() == 1
    assert await rotated.reencrypt() == 0

    new_only = await reopen([NEW_KEY])
    assert await new_only.get(ADA) == token
    assert key_id(OLD_KEY).encode() not in stored_bytes(location)


async def test_a_key_list_without_the_rows_key_fails_clearly(reopen: Opener) -> None:
    await (await reopen([OLD_KEY])).put(ADA, door_token(), checked=CHECKED)

    store = await reopen([NEW_KEY])

    with pytest.raises(KeyNotHeld, match=f"key id {key_id(OLD_KEY)}, which MAYA_CREDENTIAL_KEY does not hold"):
        await store.get(ADA)
    with pytest.raises(KeyNotHeld):
        await store.reencrypt()


async def test_a_row_copied_to_another_person_does_not_decrypt(
    reopen: Opener, location: str, caplog: pytest.LogCaptureFixture
) -> None:
    token = door_token()
    store = await reopen([NEW_KEY])
    await store.put(ADA, token, checked=CHECKED)
    copy_row(location, ADA, MAX)
    caplog.set_level(logging.DEBUG)

    assert await store.get(MAX) is None
    assert await store.info(MAX) is None

    assert await store.get(ADA) == token
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all("does not decrypt for this person" in w for w in warnings)
    assert token not in caplog.text


async def test_a_token_is_bound_to_the_issuer_too(reopen: Opener, location: str) -> None:
    store = await reopen([NEW_KEY])
    await store.put(ADA, door_token(), checked=CHECKED)
    elsewhere = Principal(issuer="https://other-id.door.test", subject=ADA.subject, name=None)
    copy_row(location, ADA, elsewhere)  # the same `sub` at another issuer is another person

    assert await store.get(elsewhere) is None


def test_the_setting_parses_newest_first() -> None:
    text = f"{NEW_KEY.hex()}, {OLD_KEY.hex().upper()}"

    assert parse_credential_keys(text) == [NEW_KEY, OLD_KEY]


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("", "MAYA_CREDENTIAL_KEY is empty"),
        ("   ", "MAYA_CREDENTIAL_KEY is empty"),
        (None, "MAYA_CREDENTIAL_KEY is empty"),
        ("ab" * 31, "entry 1 of 1 has 62 characters, not 64"),
        (f"{NEW_KEY.hex()},{'ab' * 33}", "entry 2 of 2 has 66 characters, not 64"),
        ("zz" * 32, "entry 1 of 1 is not hexadecimal"),
        (f"{NEW_KEY.hex()},", "entry 2 of 2 is empty: remove the extra comma"),
        (f"{NEW_KEY.hex()},{NEW_KEY.hex()}", "entry 2 of 2 repeats an earlier key"),
    ],
)
def test_a_bad_setting_is_refused_naming_what_is_wrong(text: str | None, complaint: str) -> None:
    with pytest.raises(CredentialKeyError, match=complaint) as refused:
        parse_credential_keys(text)

    assert NEW_KEY.hex() not in str(refused.value)


async def test_a_store_without_keys_is_refused_before_opening(tmp_path: Path) -> None:
    with pytest.raises(CredentialKeyError, match="holds no key"):
        await open_credentials(str(tmp_path / "cards.sqlite3"), [])
    assert not (tmp_path / "cards.sqlite3").exists()


async def test_the_card_store_and_the_credentials_share_one_sqlite_file(tmp_path: Path) -> None:
    from confirmation_cards.stores import open_store

    path = str(tmp_path / "cards.sqlite3")
    cards = await open_store(path)
    credentials = await open_credentials(path, [NEW_KEY])
    token = door_token()
    try:
        await credentials.put(ADA, token, checked=CHECKED)
        await cards.ping()
        assert await (await open_credentials(path, [NEW_KEY])).get(ADA) == token
    finally:
        await credentials.close()
        await cards.close()
