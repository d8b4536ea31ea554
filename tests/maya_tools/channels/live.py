"""What the channel tests through a real ``serve --auth oauth`` need besides ``test_serve_oauth``'s world:
a person's browser over loopback HTTP (its own cookie jar; signs in at the test provider by its
own form posts when sent there), ``/connect`` driven by that browser, an MCP client of the SDK's
OAuth client for a person, and Door's request log read as "whose token did each call carry"."""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urljoin

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from backend_client.tls import verifying_tls
from tests.maya_tools.auth.test_serve_oauth import Memory, World, client_for, oauth_client
from tests.oidc import User

_FORM = re.compile(r'<form method="post" action="([^"]+)"')
_CSRF = re.compile(r'name="csrf" value="([^"]*)"')


def digest(token: str) -> str:
    """What Door's request log keeps of a bearer (``token``): the first 16 hex of its SHA-256."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def csrf_of(page: httpx2.Response) -> str:
    found = _CSRF.search(page.text)
    assert found is not None, page.text[:500]
    return found.group(1)


class LiveBrowser:
    """One person's browser against the served ``origin`` and the provider, both over loopback HTTP."""

    def __init__(self, world: World, user: User) -> None:
        self.origin = world.public_url
        self.user = user
        self.http = httpx2.AsyncClient(verify=verifying_tls(), timeout=30.0)

    async def aclose(self) -> None:
        await self.http.aclose()

    def url(self, path_or_url: str) -> str:
        return path_or_url if path_or_url.startswith("http") else self.origin + path_or_url

    async def get(self, path: str) -> httpx2.Response:
        """One GET, no redirect followed."""
        return await self.http.get(self.url(path))

    async def visit(self, path: str) -> httpx2.Response:
        """Open ``path`` and follow every redirect, signing in and consenting at the provider, until a
        page of the server that is not a redirect."""
        response = await self.http.get(self.url(path))
        for _ in range(16):
            if response.is_redirect:
                response = await self.http.get(urljoin(str(response.url), response.headers["location"]))
                continue
            if not str(response.url).startswith(self.origin):
                actions = [html.unescape(a) for a in _FORM.findall(response.text)]
                assert response.status_code == 200 and actions, f"{response.url}: {response.text[:300]}"
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

    async def post(self, path: str, data: dict[str, str]) -> httpx2.Response:
        """A form post from one of the server's own pages."""
        headers = {"origin": self.origin, "sec-fetch-site": "same-origin"}
        return await self.http.post(self.url(path), data=data, headers=headers)

    async def connect(self, door_token: str, path: str = "/connect") -> httpx2.Response:
        """Sign in if needed and connect ``door_token`` on ``/connect`` (or a ``/connect?for=`` link)."""
        page = await self.visit(path)
        assert page.status_code == 200, page.text[:400]
        data = {"csrf": csrf_of(page), "action": "connect", "door_token": door_token}
        found = re.search(r'name="for" value="([^"]*)"', page.text)
        if found is not None:
            data["for"] = found.group(1)
        done = await self.post(path, data)
        assert done.status_code == 200 and "Your Door token is connected" in done.text, done.text[:400]
        return done

    async def disconnect(self) -> None:
        page = await self.visit("/connect")
        if "disconnect" in page.text:
            await self.post("/connect", {"csrf": csrf_of(page), "action": "disconnect"})


@asynccontextmanager
async def signed_in_client(
    world: World,
    user: User,
    mode: str,
    storage: Memory | None = None,
    client_class: type[Client] = Client,
    **kwargs: Any,
) -> AsyncIterator[Client]:
    """An MCP client (of ``client_class``) of ``mode`` whose HTTP client is the SDK's OAuth client
    signing ``user`` in."""
    auth = oauth_client(world, user, storage if storage is not None else Memory())
    if mode == "legacy":
        kwargs["mode"] = "legacy"
    async with (
        client_for(auth, []) as http,
        client_class(streamable_http_client(world.mcp_url, http_client=http), **kwargs) as client,
    ):
        yield client


def calls_since(world: World, since: int) -> list[dict[str, Any]]:
    return [r for r in world.door_requests() if r["seq"] > since]


def last_seq(world: World) -> int:
    return int(world.admin("GET", "/_reference/requests").json()["next"])
