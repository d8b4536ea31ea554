"""``/connect`` against the real test provider and the reference backend as Door: a signed-in person
connects, replaces and disconnects their own Door token, checked by reads only; a token Door refuses
is not stored; cross-site and forged posts change nothing; a ``for=`` link made for someone else
stores nothing; and the token, once posted, is in no response, log, cookie or database row."""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
from fastapi import FastAPI

from maya_tools.auth import Principal
from maya_tools.auth.browser import SESSION_SECONDS
from maya_tools.auth.credentials import DoorCredentials, open_credentials
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_CLUSTER_NAME, DEMO_ORGANISATION, OUTSIDER_CLUSTER_NAME
from tests.maya_tools.auth.conftest import Clock
from tests.maya_tools.auth.site import ORIGIN, Browser, Site, csrf_of, make_site
from tests.oidc import ADMIN, MEMBER, OpenIDProvider

pytestmark = pytest.mark.anyio


@pytest.fixture
def door_backend() -> ReferenceBackend:
    return ReferenceBackend(clock=ManualClock(), seed="demo")


@pytest.fixture
def door_api(door_app: FastAPI, door_backend: ReferenceBackend) -> FastAPI:
    door_app.state.backend = door_backend
    return door_app


@pytest.fixture
def tokens(door_backend: ReferenceBackend) -> dict[str, str]:
    """Door tokens made for this test (so finding one anywhere means it leaked): an admin's and a member's."""
    made = {"admin": f"door-admin-{secrets.token_urlsafe(18)}", "member": f"door-member-{secrets.token_urlsafe(18)}"}
    door_backend.put_token(made["admin"], "ada", DEMO_ORGANISATION, "super_admin")
    door_backend.put_token(made["member"], "mel", DEMO_ORGANISATION, "member")
    return made


@pytest.fixture
def database_file(tmp_path: Path) -> Path:
    return tmp_path / "cards.sqlite3"


@pytest.fixture
async def credentials(database_file: Path) -> AsyncIterator[DoorCredentials]:
    store = await open_credentials(str(database_file), [secrets.token_bytes(32)])
    yield store
    await store.close()


@pytest.fixture
async def site(
    provider: OpenIDProvider, http: httpx2.AsyncClient, credentials: DoorCredentials, door_api: FastAPI, clock: Clock
) -> Site:
    client = await provider.register_client(
        http, redirect_uri=ORIGIN + "/auth/callback", token_endpoint_auth_method="client_secret_basic"
    )
    return make_site(provider, client, credentials=credentials, http=http, door=door_api, clock=clock)


@pytest.fixture
async def admin(site: Site) -> AsyncIterator[Browser]:
    person = Browser(site, ADMIN)
    yield person
    await person.aclose()


def principal_of(site: Site, subject: str) -> Principal:
    return Principal(issuer=site.sign_in.issuer, subject=subject, name=None)


async def connect(browser: Browser, token: str, **extra: str) -> httpx2.Response:
    page = await browser.visit("/connect" + (f"?for={extra['for']}" if "for" in extra else ""))
    return await browser.post("/connect", {"csrf": csrf_of(page), "action": "connect", "door_token": token, **extra})


async def test_a_door_token_is_connected_after_reads_only_and_shows_what_door_says(
    admin: Browser, site: Site, tokens: dict[str, str], door_backend: ReferenceBackend
) -> None:
    before = door_backend.last_request_seq

    done = await connect(admin, tokens["admin"])

    assert done.status_code == 200 and "Your Door token is connected" in done.text
    assert f"<dt>Organisation</dt><dd>{DEMO_ORGANISATION}</dd>" in done.text
    assert DEMO_CLUSTER_NAME in done.text and OUTSIDER_CLUSTER_NAME not in done.text
    assert "only when a change is tried" in done.text and "R-AUTH-03" in done.text
    assert await site.credentials.get(principal_of(site, "admin")) == tokens["admin"]
    asked = door_backend.requests_since(before)
    assert asked and {r["method"] for r in asked} == {"GET"}  # DESIGN.md property 10: no probing mutation
    info = await site.credentials.info(principal_of(site, "admin"))
    assert info is not None and info.fingerprint is not None and info.fingerprint in done.text


async def test_a_token_is_replaced_then_disconnected(admin: Browser, site: Site, tokens: dict[str, str]) -> None:
    await connect(admin, tokens["admin"])
    first = await site.credentials.info(principal_of(site, "admin"))

    replaced = await connect(admin, tokens["member"])

    second = await site.credentials.info(principal_of(site, "admin"))
    assert replaced.status_code == 200 and "Replace" in replaced.text
    assert first is not None and second is not None and first.fingerprint != second.fingerprint
    assert await site.credentials.get(principal_of(site, "admin")) == tokens["member"]

    gone = await admin.post("/connect", {"csrf": csrf_of(replaced), "action": "disconnect"})

    assert gone.status_code == 200 and "Your Door token is disconnected" in gone.text
    assert "No Door token is connected for you" in gone.text
    assert await site.credentials.get(principal_of(site, "admin")) is None


async def test_a_token_door_refuses_is_not_stored_and_the_page_says_why(admin: Browser, site: Site) -> None:
    refused = await connect(admin, f"door-unknown-{secrets.token_urlsafe(12)}")

    assert refused.status_code == 400
    assert "Door refused this token (401, R-AUTH-01" in refused.text and "not stored" in refused.text
    assert await site.credentials.info(principal_of(site, "admin")) is None


@pytest.mark.parametrize("pasted", ["two words", "tok\u00e9n", "", "x" * 5000])
async def test_what_is_not_a_bearer_token_is_not_sent_to_door(
    admin: Browser, site: Site, pasted: str, door_backend: ReferenceBackend
) -> None:
    await admin.visit("/connect")
    before = door_backend.last_request_seq

    refused = await connect(admin, pasted)

    assert refused.status_code == 400 and "Nothing was stored" in refused.text
    assert door_backend.requests_since(before) == []


@pytest.mark.parametrize(
    ("origin", "fetch_site", "with_csrf"),
    [
        (None, "same-origin", False),  # no form token
        ("https://evil.test", "cross-site", True),  # the right form token, from another site
        ("https://evil.test", None, True),  # an older browser: Origin only
        (None, "cross-site", True),  # Sec-Fetch-Site only
    ],
)
async def test_cross_site_and_forged_posts_change_nothing(
    admin: Browser, site: Site, tokens: dict[str, str], origin: str | None, fetch_site: str | None, with_csrf: bool
) -> None:
    page = await admin.visit("/connect")
    form = {"action": "connect", "door_token": tokens["admin"], "csrf": csrf_of(page) if with_csrf else ""}

    response = await admin.post("/connect", form, origin=origin, fetch_site=fetch_site)

    assert response.status_code == 403 and "nothing changed" in response.text
    assert await site.credentials.info(principal_of(site, "admin")) is None


async def test_a_form_token_of_another_session_is_refused(admin: Browser, site: Site, tokens: dict[str, str]) -> None:
    other = Browser(site, MEMBER)
    try:
        theirs = csrf_of(await other.visit("/connect"))
    finally:
        await other.aclose()
    await admin.visit("/connect")

    response = await admin.post("/connect", {"csrf": theirs, "action": "connect", "door_token": tokens["admin"]})

    assert response.status_code == 403
    assert await site.credentials.info(principal_of(site, "admin")) is None


async def test_a_post_after_the_session_expired_stores_nothing(
    admin: Browser, site: Site, tokens: dict[str, str], clock: Clock
) -> None:
    page = await admin.visit("/connect")
    clock.advance(SESSION_SECONDS)

    response = await admin.post("/connect", {"csrf": csrf_of(page), "action": "connect", "door_token": tokens["admin"]})

    assert response.status_code == 401 and "Sign in again" in response.text
    assert await site.credentials.info(principal_of(site, "admin")) is None
    assert (await admin.visit("/connect")).status_code == 200  # the link in the page signs in again


async def test_a_for_link_made_for_another_person_stores_nothing(
    admin: Browser, site: Site, tokens: dict[str, str]
) -> None:
    for_member = await site.requests.create(principal_of(site, "member"))

    shown = await admin.visit(f"/connect?for={for_member}")
    assert shown.status_code == 403 and "made for another account" in shown.text
    assert "admin@door.test" in shown.text

    posted = await admin.post(
        "/connect", {"csrf": csrf_of(shown), "action": "connect", "door_token": tokens["admin"], "for": for_member}
    )

    assert posted.status_code == 403 and "Nothing was stored" in posted.text
    assert await site.credentials.info(principal_of(site, "admin")) is None
    assert await site.credentials.info(principal_of(site, "member")) is None
    assert await site.requests.completed(for_member) is False


async def test_a_for_link_of_the_signed_in_person_connects_and_completes_it(site: Site, tokens: dict[str, str]) -> None:
    asked = await site.requests.create(principal_of(site, "member"))
    member = Browser(site, MEMBER)
    try:
        done = await connect(member, tokens["member"], **{"for": asked})
    finally:
        await member.aclose()

    assert done.status_code == 200 and "Your Door token is connected" in done.text
    assert await site.requests.completed(asked) is True
    assert await site.credentials.get(principal_of(site, "member")) == tokens["member"]


async def test_an_unknown_for_link_stores_nothing(admin: Browser, site: Site, tokens: dict[str, str]) -> None:
    response = await connect(admin, tokens["admin"], **{"for": "made-up"})

    assert response.status_code == 404 and "unknown or has expired" in response.text
    assert await site.credentials.info(principal_of(site, "admin")) is None


async def test_the_door_token_is_in_no_response_log_cookie_or_row(
    admin: Browser, site: Site, tokens: dict[str, str], database_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await connect(admin, tokens["admin"])
    page = await admin.get("/connect")
    await connect(admin, tokens["member"])  # replaced: the first token must be gone too
    await admin.post("/connect", {"csrf": csrf_of(page), "action": "disconnect"})
    await connect(admin, tokens["admin"])
    await connect(admin, f"door-refused-{secrets.token_urlsafe(8)}")

    held = b"".join(p.read_bytes() for p in database_file.parent.glob(database_file.name + "*"))
    for token in tokens.values():
        for seen in admin.seen:
            assert token not in seen.body and token not in seen.url, seen.url
            assert all(token not in value for _, value in seen.headers), seen.url
        assert token not in caplog.text
        assert token.encode() not in held
        assert all(token not in c.value for c in admin.http.cookies.jar)
    assert "Door token" in caplog.text  # the log did record the connections, by fingerprint


async def test_every_response_is_hardened(admin: Browser) -> None:
    page = await admin.visit("/connect")

    assert page.headers["cache-control"] == "no-store"
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert "<script" not in page.text
    assert 'type="password"' in page.text


async def test_replicas_on_postgresql_share_sessions_and_tokens(
    provider: OpenIDProvider,
    http: httpx2.AsyncClient,
    door_api: FastAPI,
    clock: Clock,
    tokens: dict[str, str],
    postgres_url: str,
) -> None:
    """Signed in through one replica, the person is signed in on another, which stores the token
    where the first reads it: sessions and tokens are rows of the shared database, not process memory."""
    key = [secrets.token_bytes(32)]
    client = await provider.register_client(
        http, redirect_uri=ORIGIN + "/auth/callback", token_endpoint_auth_method="client_secret_basic"
    )
    first_store, second_store = await open_credentials(postgres_url, key), await open_credentials(postgres_url, key)
    first = make_site(provider, client, credentials=first_store, http=http, door=door_api, clock=clock)
    second = make_site(provider, client, credentials=second_store, http=http, door=door_api, clock=clock)
    on_first, on_second = Browser(first, ADMIN), Browser(second, ADMIN)
    try:
        await on_first.visit("/connect")
        on_second.http.cookies = on_first.http.cookies  # one browser, behind a balancer

        page = await on_second.get("/connect")
        assert page.status_code == 200 and "admin@door.test" in page.text
        await on_second.post("/connect", {"csrf": csrf_of(page), "action": "connect", "door_token": tokens["admin"]})

        assert await first_store.get(principal_of(first, "admin")) == tokens["admin"]
        assert "Connected" in (await on_first.get("/connect")).text
    finally:
        await on_first.aclose()
        await on_second.aclose()
        await first_store.close()
        await second_store.close()
