"""The sign-in's forms and pending sign-ins (issue 26, points 8 and 12), against the real test provider:

- every form token (``/connect``, sign-out) is an HMAC under a server key over the browser's session:
  another browser's token, or the old one computable from the session cookie alone, is refused;
  replicas that derive the key from one ``MAYA_CREDENTIAL_KEY`` agree, other keys do not;
- at most ``pending_limit`` sign-ins may be pending: beyond, 429 with ``Retry-After``, nothing kept;
- the server's sweep (``runtime.sweep_once``) deletes expired records, on the clock the test moves.
"""

# ruff: noqa: F811 (the fixtures of test_browser, imported by name, are the tests' parameters)

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
from pathlib import Path

import anyio
import pytest

from maya_tools.auth.browser import LOGIN, LOGIN_SECONDS, SESSION
from maya_tools.auth.credentials import open_database
from maya_tools.auth.pages import FormTokens
from maya_tools.runtime import open_runtime, sweep_once
from maya_tools.settings import Settings
from tests.maya_tools.auth.conftest import Clock
from tests.maya_tools.auth.site import Browser, Site, csrf_of
from tests.maya_tools.auth.test_browser import browser, credentials, door_api, site  # noqa: F401 (fixtures)
from tests.oidc import ADMIN

pytestmark = pytest.mark.anyio


def rows(tmp_path: Path) -> dict[str, int]:
    """How many records of each kind the database file holds, expired or not."""
    with sqlite3.connect(tmp_path / "cards.sqlite3") as db:
        return dict(db.execute("SELECT kind, count(*) FROM maya_web_records GROUP BY kind").fetchall())


async def signed_in(site: Site) -> Browser:
    person = Browser(site, ADMIN)
    page = await person.visit("/connect")
    assert page.status_code == 200, page.text[:300]
    return person


async def test_a_form_token_works_only_in_the_browser_session_it_was_made_for(site: Site) -> None:
    first, second = await signed_in(site), await signed_in(site)  # the same person, two browsers
    try:
        token = csrf_of(await first.visit("/connect"))
        theirs = await second.post("/connect", {"csrf": token, "action": "disconnect"})
        logout = await second.post("/auth/logout", {"csrf": token})
        session = second.http.cookies["__Host-maya-session"]
        computed = hmac.new(session.encode(), b"maya-tools browser form", hashlib.sha256).hexdigest()
        old = await second.post("/connect", {"csrf": computed, "action": "disconnect"})
        still_in = await second.get("/connect")
        own = await second.post("/connect", {"csrf": csrf_of(still_in), "action": "disconnect"})
    finally:
        await first.aclose()
        await second.aclose()

    assert theirs.status_code == 403 and "did not come from this page" in theirs.text
    assert logout.status_code == 403 and "nothing changed" in logout.text
    assert old.status_code == 403, "the token computable from the session cookie alone is refused"
    assert still_in.status_code == 200 and "Sign-in" not in still_in.text, "the refused sign-out ended nothing"
    assert own.status_code == 200 and "No Door token was connected" in own.text


def test_replicas_deriving_from_one_credential_key_agree_and_other_keys_do_not() -> None:
    key = secrets.token_bytes(32)
    one, two = FormTokens.derived([key]), FormTokens.derived([key])
    rotated = FormTokens.derived([secrets.token_bytes(32), key])  # a new key first, the old one still listed
    token = one.token("session-id", "session")

    assert two.check("session-id", "session", token) and rotated.check("session-id", "session", token)
    assert not FormTokens.derived([secrets.token_bytes(32)]).check("session-id", "session", token)
    assert not FormTokens.random().check("session-id", "session", token)
    assert not two.check("another-session", "session", token) and not two.check("session-id", "approve x", token)
    assert token != hmac.new(key, b"session-id", hashlib.sha256).hexdigest(), "the credential key is never used as is"


async def test_pending_sign_ins_are_bounded_and_beyond_the_bound_nothing_is_kept(
    site: Site, clock: Clock, tmp_path: Path
) -> None:
    site.sign_in.pending_limit = 3
    people = [Browser(site, ADMIN) for _ in range(5)]
    try:
        started = [await person.get("/auth/login?return_to=/connect") for person in people[:3]]
        refused = await people[3].get("/auth/login?return_to=/connect")
        kept = rows(tmp_path)
        clock.advance(LOGIN_SECONDS + 1)  # the three expire: a new sign-in may start
        later = await people[4].get("/auth/login?return_to=/connect")
    finally:
        for person in people:
            await person.aclose()

    assert [s.status_code for s in started] == [303, 303, 303]
    assert refused.status_code == 429 and refused.headers["retry-after"] == "60"
    assert "Too many sign-ins are under way" in refused.text and "Try again in a minute" in refused.text
    assert not [c for c in people[3].cookie_headers() if c.startswith("__Host-maya-login=")], "nothing started"
    assert kept == {LOGIN: 3}
    assert later.status_code == 303 and rows(tmp_path) == {LOGIN: 1}


async def test_the_sweep_deletes_expired_sign_ins_and_keeps_live_sessions(
    site: Site, clock: Clock, tmp_path: Path
) -> None:
    person = await signed_in(site)
    others = [Browser(site, ADMIN) for _ in range(2)]
    try:
        for other in others:
            assert (await other.get("/auth/login?return_to=/connect")).status_code == 303
    finally:
        await person.aclose()
        for other in others:
            await other.aclose()
    settings = Settings(card_store=str(tmp_path / "server.sqlite3"), approver="nobody")
    async with open_runtime(settings, "streamable-http") as runtime:
        runtime.sign_in = site.sign_in
        before = rows(tmp_path)
        clock.advance(LOGIN_SECONDS + 1)  # the pending sign-ins have expired, the session (15 min) has not
        await sweep_once(runtime)
        after = rows(tmp_path)

    assert before == {LOGIN: 2, SESSION: 1}
    assert after == {SESSION: 1}


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
async def test_both_engines_bound_a_kind_and_purge_every_expired_record(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    location = str(tmp_path / "auth.sqlite3") if engine == "sqlite" else request.getfixturevalue("postgres_url")
    database = await open_database(location)
    try:
        put = [await database.put_record_bounded(LOGIN, f"id{n}", "{}", 100.0, 0.0, 2) for n in range(3)]
        replaced = await database.put_record_bounded(LOGIN, "id0", "{}", 100.0, 0.0, 2)  # the same id: no new row
        await database.put_record(SESSION, "s", "{}", 200.0, 0.0)
        after_expiry = await database.put_record_bounded(LOGIN, "id9", "{}", 300.0, 150.0, 2)
        purged = await database.purge_records(250.0)
        left = [await database.get_record(kind, key, 250.0) for kind, key in ((SESSION, "s"), (LOGIN, "id9"))]
    finally:
        await database.close()

    assert put == [True, True, False] and replaced is True and after_expiry is True
    assert purged == 1 and left == [None, "{}"]


async def test_concurrent_sign_in_starts_on_postgres_never_pass_the_bound_together(postgres_url: str) -> None:
    """Ten rounds of 40 starts at once over 10 connections, a bound of 5 each: the count and the insert
    of one start are one step for every other (the kind's advisory lock), so exactly 5 are kept."""
    database = await open_database(postgres_url, pool_size=10)
    try:
        rounds: list[tuple[int, int]] = []
        for r in range(10):
            kind, taken = f"login-{r}", []

            async def start(n: int, kind: str = kind, taken: list[bool] = taken) -> None:
                taken.append(await database.put_record_bounded(kind, f"id{n}", "{}", 100.0, 0.0, 5))

            async with anyio.create_task_group() as group:
                for n in range(40):
                    group.start_soon(start, n)
            kept = [await database.get_record(kind, f"id{n}", 0.0) for n in range(40)]
            rounds.append((taken.count(True), sum(record is not None for record in kept)))
    finally:
        await database.close()

    assert rounds == [(5, 5)] * 10
