"""What the server opens once at start-up and every tool shares: the HTTP client, the card store,
the approval service, and the embedded reference backend when no Door URL is configured."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import anyio
import anyio.lowlevel
import httpx2
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from backend_client import DoorClient
from confirmation_cards import ApprovalService, Planner, SqliteCardStore
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import Clock, ManualClock, ScaledClock
from reference_backend.seed import DEMO_ADMIN_TOKEN

logger = logging.getLogger("maya_tools")

Transport = Literal["stdio", "streamable-http", "memory"]
EMBEDDED_URL = "http://reference-backend.embedded"


@dataclass
class Runtime:
    """Shared state of one running server."""

    settings: Settings
    transport: Transport
    http: httpx2.AsyncClient
    base_url: str
    store: SqliteCardStore
    service: ApprovalService
    clock: Clock | None
    backend: ReferenceBackend | None

    @property
    def embedded(self) -> bool:
        return self.backend is not None

    def token_for(self, ctx: Context[Any, Any]) -> str:
        """The Door token of whoever made this MCP request.

        Over streamable HTTP it is the request's own bearer token (Door's roles apply per person,
        and it is never stored); on stdio and in memory it is the configured ``DOOR_TOKEN``.
        """
        if self.transport == "streamable-http":
            headers = ctx.headers or {}
            value = headers.get("authorization") or headers.get("Authorization") or ""
            scheme, _, token = value.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise ToolError("This request carries no Door token: send `Authorization: Bearer <your Door token>`.")
            return token.strip()
        if self.settings.door_token:
            return self.settings.door_token
        if self.embedded:
            return DEMO_ADMIN_TOKEN
        raise ToolError("No Door token is configured: set DOOR_TOKEN in the server's environment.")

    def door(self, ctx: Context[Any, Any]) -> DoorClient:
        """A client of Door acting for the caller, on the shared connection pool."""
        return DoorClient(self.base_url, self.token_for(ctx), http_client=self.http, sleep=self.sleep)

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of Door's time.

        On the embedded backend Door's time is simulated: a manual clock moves only by waiting,
        and a scaled clock's seconds pass ``time_scale`` times faster than real ones.
        """
        if isinstance(self.clock, ManualClock):
            self.clock.advance(seconds)
            await anyio.lowlevel.checkpoint()
        elif isinstance(self.clock, ScaledClock):
            await anyio.sleep(seconds / self.clock.time_scale)
        else:
            await anyio.sleep(seconds)

    def approver(self, ctx: Context[Any, Any]) -> str:
        """Who answered the elicitation, as the audit records it (never a token)."""
        if self.transport == "streamable-http":
            return "HTTP caller (MCP elicitation)"
        return f"{self.settings.approver} (MCP elicitation)"

    def planner(self, door: DoorClient) -> Planner:
        return Planner(door, clock=self.now, ttl=timedelta(seconds=self.settings.card_ttl_seconds))

    def now(self) -> datetime:
        return card_time(self.clock)()


def card_time(clock: Clock | None) -> Callable[[], datetime]:
    """The time cards are made, expire and are decided by: the wall clock, so a person has a card's
    whole lifetime to read it even when the embedded backend runs fast; a manual clock (tests)
    replaces it entirely."""
    if isinstance(clock, ManualClock):
        return clock.now
    return lambda: datetime.now(UTC)


def runtime_of(ctx: Context[Any, Any]) -> Runtime:
    runtime = ctx.request_context.lifespan_context
    assert isinstance(runtime, Runtime)
    return runtime


@asynccontextmanager
async def open_runtime(
    settings: Settings, transport: Transport, *, backend: ReferenceBackend | None = None
) -> AsyncIterator[Runtime]:
    """Open the shared pieces; with no ``DOOR_API_URL``, start the reference backend in-process."""
    from reference_backend.app import create_app

    if settings.embedded and backend is None:
        backend = ReferenceBackend(clock=ScaledClock(time_scale=settings.reference_time_scale), seed="demo")
    if backend is not None:
        logger.info(
            "No DOOR_API_URL: using the embedded reference backend (demo seed, time ×%s); nothing reaches Door.",
            settings.reference_time_scale,
        )
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=create_app(backend)), base_url=EMBEDDED_URL)
        base_url = EMBEDDED_URL
        clock: Clock | None = backend.clock
    else:
        assert settings.door_api_url is not None
        http = httpx2.AsyncClient(timeout=30.0)
        base_url = settings.door_api_url
        clock = None
        logger.info("Door API at %s", base_url)
    store = SqliteCardStore(settings.card_store)
    service = ApprovalService(store, clock=card_time(clock))
    for card in service.recover_interrupted():
        logger.warning("Card %s was left executing by a stopped server; recorded as failed (outcome unknown).", card.id)
    try:
        yield Runtime(settings, transport, http, base_url, store, service, clock, backend)
    finally:
        await http.aclose()
        store.close()
