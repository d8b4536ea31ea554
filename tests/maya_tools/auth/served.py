"""``serve``'s HTTP app with ``--auth oauth``, in process: the same ``build_app`` the command serves,
its lifespan run, the real test provider (``tests.oidc``) as the issuer, the reference backend
(demo seed, manual clock) as Door, reached over ASGI with every Door request's ``Authorization``
recorded, and MCP clients that reach the app over ASGI too."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.types import ASGIApp, Receive, Scope, Send

from backend_client.tls import verifying_tls
from maya_tools.auth import ConnectionInfo, Principal
from maya_tools.http import build_app
from maya_tools.runtime import Runtime
from maya_tools.server import MayaServer, build_server
from maya_tools.settings import Settings, choose_auth
from reference_backend.backend import ReferenceBackend
from tests.oidc import SERVER_CLIENT_ID, SERVER_CLIENT_SECRET, OpenIDProvider, User

PUBLIC_URL = "https://maya.door.test"
RESOURCE = PUBLIC_URL + "/mcp"
METADATA = PUBLIC_URL + "/.well-known/oauth-protected-resource/mcp"
SCOPE_PARAM = 'scope="maya.read maya.change"'


@dataclass
class Served:
    app: ASGIApp
    server: MayaServer
    settings: Settings
    provider: OpenIDProvider
    door_bearers: list[str] = field(default_factory=list)
    """The ``Authorization`` of every request Door received, in order."""

    @property
    def runtime(self) -> Runtime:
        runtime = self.server.pages.runtime
        assert runtime is not None
        return runtime

    def http(self, token: str | None = None, **headers: str) -> httpx2.AsyncClient:
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        return httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=self.app), base_url=PUBLIC_URL, headers=headers, timeout=30.0
        )

    @asynccontextmanager
    async def mcp(self, token: str, mode: str, *, path: str = "/mcp", **kwargs: Any) -> AsyncIterator[Client]:
        """An MCP client of ``mode``: "legacy" (2025-11-25) or "modern" (the default, 2026-07-28), of
        the endpoint at ``path``."""
        if mode == "legacy":
            kwargs["mode"] = "legacy"
        async with (
            self.http(token) as http,
            Client(streamable_http_client(PUBLIC_URL + path, http_client=http), **kwargs) as client,
        ):
            yield client

    async def connect_door(self, user: User, door_token: str) -> Principal:
        """Store ``door_token`` as ``user``'s own, as ``/connect`` does after its read-only check."""
        person = Principal(issuer=self.provider.issuer, subject=user.sub, name=user.email)
        credentials = self.runtime.credentials
        assert credentials is not None
        checked = ConnectionInfo(checked_at=datetime.now(UTC), organisations=(), clusters=())
        await credentials.put(person, door_token, checked=checked)
        return person

    async def cards(self) -> list[Any]:
        return list(await self.runtime.store.list())


def oauth_settings(provider: OpenIDProvider, card_store: Path, **overrides: Any) -> Settings:
    settings = Settings(
        card_store=str(card_store),
        public_url=PUBLIC_URL,
        oauth_issuer=provider.issuer,
        oauth_client_id=SERVER_CLIENT_ID,
        oauth_client_secret=SERVER_CLIENT_SECRET,
        credential_key=secrets.token_hex(32),
        **overrides,
    )
    return choose_auth(settings, "streamable-http", "127.0.0.1")


@asynccontextmanager
async def served(
    provider: OpenIDProvider,
    backend: ReferenceBackend,
    card_store: Path,
    monkeypatch: pytest.MonkeyPatch,
    **overrides: Any,
) -> AsyncIterator[Served]:
    import reference_backend.app

    create_app = reference_backend.app.create_app
    bearers: list[str] = []

    def recording_app(world: ReferenceBackend, **kwargs: Any) -> ASGIApp:
        app = create_app(world, **kwargs)

        async def record(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                bearers.append(dict(scope.get("headers", [])).get(b"authorization", b"").decode())
            await app(scope, receive, send)

        return record

    monkeypatch.setattr(reference_backend.app, "create_app", recording_app)
    settings = oauth_settings(provider, card_store, **overrides)
    server = build_server(settings, transport="streamable-http", backend=backend, page_url=PUBLIC_URL)
    app = build_app(server, settings, host="127.0.0.1")
    async with app.running():  # what the app's lifespan runs: /mcp's session manager, then /mcp/read-only's
        yield Served(app, server, settings, provider, bearers)


async def tokens_client() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(verify=verifying_tls(), timeout=10.0)
