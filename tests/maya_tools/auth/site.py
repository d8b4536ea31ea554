"""A small site for the browser tests: ``BrowserSignIn`` and ``ConnectPage`` mounted in a Starlette
app, the real test provider as the issuer, the reference backend (in process) as Door, and a
browser: an ``httpx2`` client that keeps cookies, reaches the site over ASGI and the provider over
loopback HTTP, and fills in the provider's own login and consent forms as a person would."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urljoin

import httpx2
from fastapi import FastAPI
from starlette.applications import Starlette

from backend_client import DoorClient
from backend_client.tls import verifying_tls
from maya_tools.auth.browser import BrowserSignIn, TokenAuth
from maya_tools.auth.connect import ConnectPage
from maya_tools.auth.connect_requests import ConnectRequests
from maya_tools.auth.credentials import DoorCredentials
from maya_tools.auth.issuer import IssuerKeys
from maya_tools.auth.storage import AuthDatabase
from tests.oidc import OAuthClient, OpenIDProvider, User

ORIGIN = "https://maya.door.test"
DOOR_URL = "http://door.test"
_FORM = re.compile(r'<form method="post" action="([^"]+)"')
_CSRF = re.compile(r'name="csrf" value="([^"]*)"')


@dataclass
class Site:
    app: Starlette
    sign_in: BrowserSignIn
    page: ConnectPage
    credentials: DoorCredentials
    requests: ConnectRequests
    origin: str


def make_site(
    provider: OpenIDProvider,
    client: OAuthClient,
    *,
    credentials: DoorCredentials,
    http: httpx2.AsyncClient,
    door: FastAPI,
    clock: Callable[[], float],
    origin: str = ORIGIN,
    token_auth: TokenAuth | None = None,
    database: AuthDatabase | None = None,
    keep_claims: Sequence[str] = (),
) -> Site:
    """The site at ``origin``; its sessions in ``database`` (default: the credentials' own)."""
    database = database or credentials.database
    assert client.client_secret is not None
    sign_in = BrowserSignIn(
        keys=IssuerKeys(provider.issuer, http, clock=clock),
        http=http,
        client_id=client.client_id,
        client_secret=client.client_secret,
        public_url=origin,
        database=database,
        token_auth=token_auth,
        clock=clock,
        keep_claims=keep_claims,
    )
    requests = ConnectRequests(database, clock=clock)

    def door_for(token: str) -> DoorClient:
        return DoorClient(DOOR_URL, token, transport=httpx2.ASGITransport(app=door), max_retries=0)

    page = ConnectPage(sign_in=sign_in, credentials=credentials, door_for=door_for, requests=requests)
    app = Starlette(routes=[*sign_in.routes(), *page.routes()])
    return Site(app, sign_in, page, credentials, requests, origin)


@dataclass
class Seen:
    """One response the browser received: enough to search for a leaked secret."""

    url: str
    status: int
    headers: list[tuple[str, str]]
    body: str


@dataclass
class Browser:
    """One person's browser: its own cookie jar, signing in as ``user`` when the provider asks."""

    site: Site
    user: User
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.http = httpx2.AsyncClient(
            mounts={self.site.origin: httpx2.ASGITransport(app=self.site.app)},
            verify=verifying_tls(),
            timeout=10.0,
            event_hooks={"response": [self._record]},
        )

    async def _record(self, response: httpx2.Response) -> None:
        await response.aread()
        self.seen.append(
            Seen(str(response.url), response.status_code, list(response.headers.multi_items()), response.text)
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    def url(self, path: str) -> str:
        return self.site.origin + path

    async def get(self, path: str) -> httpx2.Response:
        """One GET, no redirect followed."""
        return await self.http.get(self.url(path))

    async def visit(self, path: str) -> httpx2.Response:
        """Open ``path`` and follow every redirect, signing in and consenting at the provider, until
        a page that is not a redirect."""
        response = await self.http.get(self.url(path))
        for _ in range(16):
            if response.is_redirect:
                response = await self.http.get(urljoin(str(response.url), response.headers["location"]))
                continue
            if not str(response.url).startswith(self.site.origin):
                actions = [html.unescape(a) for a in _FORM.findall(response.text)]
                assert response.status_code == 200 and actions, (
                    f"{response.url}: {response.status_code} {response.text[:300]}"
                )
                action = urljoin(str(response.url), actions[0])
                if action.endswith("/login"):
                    form = {"login": self.user.email, "password": self.user.password}
                    response = await self.http.post(action, data=form)
                else:
                    assert action.endswith("/confirm"), action
                    response = await self.http.post(action)
                continue
            return response
        raise AssertionError("the browser kept being redirected")

    async def post(
        self, path: str, data: dict[str, str], *, origin: str | None = None, fetch_site: str | None = "same-origin"
    ) -> httpx2.Response:
        """A form post as a browser sends it from a page of ``origin`` (default: the site's own)."""
        headers = {"origin": origin or self.site.origin}
        if fetch_site is not None:
            headers["sec-fetch-site"] = fetch_site
        return await self.http.post(self.url(path), data=data, headers=headers)

    def cookie_headers(self) -> list[str]:
        return [value for seen in self.seen for name, value in seen.headers if name.lower() == "set-cookie"]


def csrf_of(page: httpx2.Response) -> str:
    found = _CSRF.search(page.text)
    assert found is not None, page.text[:500]
    return found.group(1)
