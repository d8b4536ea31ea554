"""Serving the MCP server over streamable HTTP: loopback by default, and every request must carry
the caller's own Door token as ``Authorization: Bearer`` (used for that caller's Door calls only).

Every MCP session belongs to the principal (token fingerprint) that opened it: a request naming
another principal's ``Mcp-Session-Id`` is answered exactly like an unknown session (404), so it can
neither answer that session's elicitations, nor read its stream, nor close it (DESIGN.md property 12).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from confirmation_cards import token_fingerprint
from maya_tools.runtime import Runtime, bearer_of


class PagesFirst:
    """Send the approval page's paths to ``pages`` (authenticated by their one-time secret, not a
    bearer), the health paths to ``health`` (no bearer: a load balancer asks them), and everything
    else, lifespan included, to ``app`` (``/mcp`` behind ``RequireBearer``).

    The bare prefix (``/approve``, no slash) is the page's too, so that it gets the page's headers
    and 404 rather than the bearer check's 401."""

    def __init__(self, pages: ASGIApp, app: ASGIApp, *, prefix: str, health: ASGIApp | None = None) -> None:
        self.pages = pages
        self.app = app
        self.health = health
        self.root = prefix.rstrip("/")
        self.prefix = self.root + "/"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] == "http" and (path == self.root or path.startswith(self.prefix)):
            await self.pages(scope, receive, send)
            return
        if scope["type"] == "http" and self.health is not None and path in HEALTH_PATHS:
            await self.health(scope, receive, send)
            return
        await self.app(scope, receive, send)


HEALTH_PATHS = ("/healthz", "/livez")
HEALTH_TIMEOUT = 3.0
"""Seconds the card store has to answer ``/healthz``."""


def health_app(runtime: Callable[[], Runtime | None]) -> Starlette:
    """``/livez``: the process serves HTTP. ``/healthz`` (readiness): the server has started, its card
    store answers a read within ``HEALTH_TIMEOUT`` and the first sweep ran; else ``503``, saying why.
    Neither needs a token or says anything about cards."""

    async def livez(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"}, headers={"Cache-Control": "no-store"})

    async def healthz(_: Request) -> JSONResponse:
        current = runtime()
        if current is None:
            return _unready("starting: the server's lifespan has not opened the card store yet")
        try:
            with anyio.fail_after(HEALTH_TIMEOUT):
                await current.store.ping()
        except Exception as error:  # any failure of the store is "not ready", with its kind only
            return _unready(f"the card store did not answer a read ({type(error).__name__})")
        if not current.swept.is_set():
            return _unready("starting: the first sweep of cards left executing has not run yet")
        return JSONResponse({"status": "ok", "store": current.store_kind}, headers={"Cache-Control": "no-store"})

    return Starlette(routes=[Route("/livez", livez), Route("/healthz", healthz)])


def _unready(why: str) -> JSONResponse:
    return JSONResponse(
        {"status": "unavailable", "detail": why}, status_code=503, headers={"Cache-Control": "no-store"}
    )


class RequireBearer:
    """Refuse any HTTP request without a bearer token, before it reaches the MCP session."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not _has_bearer(scope):
            body = json.dumps(
                {
                    "error": "unauthorized",
                    "detail": "Send your Door token as 'Authorization: Bearer <token>'; maya-tools uses it "
                    "for your Door calls only and never stores it.",
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="maya-tools"'),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def _bearer(scope: Scope) -> str | None:
    return bearer_of(_header(scope, b"authorization"))


def _has_bearer(scope: Scope) -> bool:
    return _bearer(scope) is not None


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers", []):
        if name.lower() == wanted:
            return str(value.decode("latin-1"))
    return None


SESSION_HEADER = b"mcp-session-id"
# The SDK's own answer to an unknown session id, byte for byte: another principal's session must
# not be told apart from one that does not exist.
_NOT_FOUND = json.dumps(
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}, separators=(",", ":")
).encode()


class BindSessions:
    """Bind each MCP session id to the principal whose request created it; refuse it to anyone else.

    Runs inside ``RequireBearer``, so every request has a bearer. Owners are kept for the server's
    life, at most ``limit`` of them (the oldest forgotten first; the SDK expires idle sessions too).
    """

    def __init__(self, app: ASGIApp, *, limit: int = 100_000) -> None:
        self.app = app
        self.limit = limit
        self.owners: OrderedDict[str, str] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = _bearer(scope)
        principal = token_fingerprint(token) if token else ""
        session = _header(scope, SESSION_HEADER)
        if session is not None:
            owner = self.owners.get(session)
            if owner is not None and owner != principal:
                await send(
                    {
                        "type": "http.response.start",
                        "status": 404,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(_NOT_FOUND)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": _NOT_FOUND})
                return

        async def bind(message: Message) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name.lower() == SESSION_HEADER:
                        self._own(value.decode("latin-1"), principal)
            await send(message)

        await self.app(scope, receive, bind)

    def _own(self, session: str, principal: str) -> None:
        if session in self.owners:
            return  # a session's owner never changes
        self.owners[session] = principal
        while len(self.owners) > self.limit:
            self.owners.popitem(last=False)
