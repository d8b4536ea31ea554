"""The browser sign-in against the real test provider: the authorization code flow with PKCE, the
session cookie's attributes, expiry, sign-out, and every refusal of a callback or a ``return_to``."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest
from fastapi import FastAPI

from maya_tools.auth.browser import SESSION_SECONDS, BrowserSignIn, SignInFailed, safe_return
from maya_tools.auth.credentials import DoorCredentials, open_credentials
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.maya_tools.auth.conftest import Clock
from tests.maya_tools.auth.site import ORIGIN, Browser, Site, csrf_of, make_site
from tests.oidc import ADMIN, MEMBER, SERVER_CLIENT, OAuthClient, OpenIDProvider

pytestmark = pytest.mark.anyio

CALLBACK = "/auth/callback"


@pytest.fixture
def door_api(door_app: FastAPI) -> FastAPI:
    door_app.state.backend = ReferenceBackend(clock=ManualClock(), seed="demo")
    return door_app


async def register(provider: OpenIDProvider, http: httpx2.AsyncClient, origin: str, method: str) -> OAuthClient:
    """The server's confidential client, registered at the provider for ``origin``'s callback."""
    return await provider.register_client(
        http, redirect_uri=origin + CALLBACK, token_endpoint_auth_method=method, application_type="web"
    )


@pytest.fixture
async def credentials(tmp_path: Path) -> AsyncIterator[DoorCredentials]:
    store = await open_credentials(str(tmp_path / "cards.sqlite3"), [secrets.token_bytes(32)])
    yield store
    await store.close()


@pytest.fixture
async def site(
    provider: OpenIDProvider, http: httpx2.AsyncClient, credentials: DoorCredentials, door_api: FastAPI, clock: Clock
) -> Site:
    client = await register(provider, http, ORIGIN, "client_secret_basic")
    return make_site(provider, client, credentials=credentials, http=http, door=door_api, clock=clock)


@pytest.fixture
async def browser(site: Site) -> AsyncIterator[Browser]:
    person = Browser(site, ADMIN)
    yield person
    await person.aclose()


def cookie(browser: Browser, name: str) -> str:
    """The last Set-Cookie header the site sent for ``name``."""
    return [value for value in browser.cookie_headers() if value.startswith(name + "=")][-1]


async def test_a_person_who_is_not_signed_in_is_sent_through_sign_in_and_back(browser: Browser, site: Site) -> None:
    first = await browser.get("/connect?for=abc")
    assert first.status_code == 303
    assert first.headers["location"] == "/auth/login?return_to=%2Fconnect%3Ffor%3Dabc"

    page = await browser.visit("/connect")

    assert page.url == ORIGIN + "/connect" and page.status_code == 200
    assert "Signed in as <strong>admin@door.test</strong>" in page.text
    authorize = next(s.url for s in browser.seen if "/auth?" in s.url)
    query = parse_qs(urlsplit(authorize).query)
    assert query["code_challenge_method"] == ["S256"] and query["client_id"] == [site.sign_in.client_id]
    assert {"state", "nonce", "code_challenge"} <= set(query)


async def test_the_session_cookie_is_httponly_lax_secure_short_lived_and_opaque(browser: Browser) -> None:
    await browser.visit("/connect")

    header = cookie(browser, "__Host-maya-session")
    value = header.split(";")[0].split("=", 1)[1]
    attributes = {part.strip().lower() for part in header.split(";")[1:]}
    assert {"httponly", "samesite=lax", "secure", "path=/", f"max-age={SESSION_SECONDS}"} <= attributes
    assert not any(a.startswith("domain") for a in attributes)
    assert len(value) >= 40 and "admin" not in value and "." not in value  # a random id, not a JWT


async def test_over_http_the_cookie_is_not_secure(
    provider: OpenIDProvider, http: httpx2.AsyncClient, credentials: DoorCredentials, door_api: FastAPI, clock: Clock
) -> None:
    origin = "http://127.0.0.1:8765"
    client = await register(provider, http, origin, "client_secret_basic")
    site = make_site(provider, client, credentials=credentials, http=http, door=door_api, clock=clock, origin=origin)
    person = Browser(site, ADMIN)
    try:
        assert (await person.visit("/connect")).status_code == 200
        header = cookie(person, "maya-session")
    finally:
        await person.aclose()

    assert "secure" not in header.lower() and "httponly" in header.lower()


async def test_an_expired_session_sends_the_person_through_sign_in_again(browser: Browser, clock: Clock) -> None:
    await browser.visit("/connect")
    clock.advance(SESSION_SECONDS - 1)
    assert (await browser.get("/connect")).status_code == 200

    clock.advance(1)
    again = await browser.get("/connect")

    assert again.status_code == 303 and again.headers["location"].startswith("/auth/login?return_to=")
    assert (await browser.visit("/connect")).status_code == 200  # and signing in again works


@pytest.mark.parametrize(
    "return_to",
    [
        "https://evil.test/connect",
        "//evil.test/connect",
        "/\\evil.test",
        "\\\\evil.test",
        "https:/evil.test",
        "javascript:alert(1)",
        "connect",
        "/connect\r\nSet-Cookie: x=1",
    ],
)
async def test_return_to_refuses_anything_but_a_path_here(browser: Browser, return_to: str) -> None:
    response = await browser.http.get(browser.url("/auth/login"), params={"return_to": return_to})

    assert response.status_code == 400 and "location" not in response.headers
    assert "return_to must be a path on this server" in response.text
    assert safe_return(return_to) is None


async def login_to_callback(browser: Browser, return_to: str = "/connect") -> str:
    """Start a sign-in and follow it to the provider's redirect to our callback, without opening it."""
    start = "/auth/login?" + urlencode({"return_to": return_to})
    response = await browser.get(start)
    for _ in range(16):
        location = response.headers.get("location", "")
        if location.startswith(ORIGIN + CALLBACK):
            return location
        if response.is_redirect:
            response = await browser.http.get(location if "://" in location else str(response.url.join(location)))
            continue
        await browser.visit("/connect")  # not yet signed in at the provider: do it once, then start again
        response = await browser.get(start)
    raise AssertionError("no redirect to the callback")


async def test_the_person_comes_back_to_the_path_and_query_they_asked_for(browser: Browser) -> None:
    callback = await login_to_callback(browser, "/connect?for=abc")

    back = await browser.http.get(callback)

    assert back.status_code == 303 and back.headers["location"] == "/connect?for=abc"


async def test_a_callback_in_another_browser_is_refused(browser: Browser, site: Site) -> None:
    callback = await login_to_callback(browser)
    other = Browser(site, MEMBER)
    try:
        response = await other.http.get(callback)
    finally:
        await other.aclose()

    assert response.status_code == 400 and "not started in this browser" in response.text
    assert not [
        c for c in other.cookie_headers() if c.startswith("__Host-maya-session=") and "max-age=0" not in c.lower()
    ]


async def test_a_callback_is_used_once(browser: Browser) -> None:
    callback = await login_to_callback(browser)
    login_cookie = browser.http.cookies["__Host-maya-login"]
    assert (await browser.http.get(callback)).status_code == 303
    # Replayed with the login cookie put back (as one who copied both would): the server's record is spent.
    browser.http.cookies.set("__Host-maya-login", login_cookie, domain="maya.door.test")

    replay = await browser.http.get(callback)

    assert replay.status_code == 400 and "was already used" in replay.text


async def test_a_callback_with_another_state_is_refused(browser: Browser) -> None:
    callback = await login_to_callback(browser)
    parts = urlsplit(callback)
    query = parse_qs(parts.query)
    forged = parts._replace(query=f"code={query['code'][0]}&state=forged&iss={query['iss'][0]}").geturl()

    response = await browser.http.get(forged)

    assert response.status_code == 400 and "(state)" in response.text


async def test_a_refused_authorization_says_so(browser: Browser) -> None:
    await browser.visit("/connect")
    response = await browser.get("/auth/login?return_to=/connect")
    query = parse_qs(urlsplit(response.headers["location"]).query)

    refused = await browser.http.get(
        browser.url(CALLBACK), params={"error": "access_denied", "state": query["state"][0]}
    )

    assert refused.status_code == 400 and "refused the sign-in (access_denied)" in refused.text


async def test_an_id_token_for_another_client_or_sign_in_is_refused(
    provider: OpenIDProvider, site: Site, http: httpx2.AsyncClient
) -> None:
    metadata = await site.sign_in.keys.metadata()
    # The provider's preconfigured client is another audience; the flow sent no nonce.
    tokens = await provider.sign_in(http, ADMIN, scopes=["openid"], client=SERVER_CLIENT)
    assert tokens.id_token is not None

    with pytest.raises(SignInFailed, match="InvalidAudienceError"):
        await site.sign_in._verify_id_token(metadata, tokens.id_token, "any")

    own = BrowserSignIn(
        keys=site.sign_in.keys,
        http=http,
        client_id=SERVER_CLIENT.client_id,
        client_secret="unused",
        public_url=ORIGIN,
        database=site.credentials.database,
    )
    with pytest.raises(SignInFailed, match="nonce"):
        await own._verify_id_token(metadata, tokens.id_token, "the nonce of this sign-in")
    with pytest.raises(SignInFailed, match="does not verify"):
        await own._verify_id_token(metadata, f"{tokens.id_token[:-8]}AAAAAAAA", "x")


async def test_a_client_registered_for_client_secret_post_signs_in(
    provider: OpenIDProvider, http: httpx2.AsyncClient, credentials: DoorCredentials, door_api: FastAPI, clock: Clock
) -> None:
    client = await register(provider, http, ORIGIN, "client_secret_post")
    site = make_site(
        provider,
        client,
        credentials=credentials,
        http=http,
        door=door_api,
        clock=clock,
        token_auth="client_secret_post",
    )
    person = Browser(site, MEMBER)
    try:
        page = await person.visit("/connect")
    finally:
        await person.aclose()

    assert page.status_code == 200 and "Signed in as <strong>member@door.test</strong>" in page.text


async def test_signing_out_ends_the_session_and_a_cross_site_sign_out_is_refused(browser: Browser) -> None:
    page = await browser.visit("/connect")
    csrf = csrf_of(page)

    assert (await browser.post("/auth/logout", {"csrf": csrf}, origin="https://evil.test")).status_code == 403
    assert (await browser.post("/auth/logout", {"csrf": "guess"})).status_code == 403
    assert (await browser.get("/connect")).status_code == 200

    out = await browser.post("/auth/logout", {"csrf": csrf})

    assert out.status_code == 200 and "Signed out" in out.text
    assert (await browser.get("/connect")).status_code == 303


async def test_signing_in_again_opens_a_new_session_and_ends_the_old_one(browser: Browser, site: Site) -> None:
    await browser.visit("/connect")
    old = browser.http.cookies["__Host-maya-session"]

    await browser.http.get(await login_to_callback(browser))

    new = browser.http.cookies["__Host-maya-session"]
    assert new != old
    stale = Browser(site, ADMIN)
    try:
        stale.http.cookies.set("__Host-maya-session", old, domain="maya.door.test")
        assert (await stale.get("/connect")).status_code == 303
    finally:
        await stale.aclose()
    assert (await browser.get("/connect")).status_code == 200
