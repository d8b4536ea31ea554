"""Serving the MCP server over streamable HTTP (``build_app`` puts the pieces together).

With ``--auth oauth`` ``/mcp`` is an OAuth 2.1 protected resource (``maya_tools.auth.resource``):
every request carries an access token issued for this server, and each person's Door calls use the
Door token they connected on ``/connect`` (``DoorTokens``), never the access token. With
``--auth door-token`` (loopback only, one person) the bearer is the caller's own Door token.

Every MCP session belongs to the principal (``Principal.key`` with OAuth, else the token
fingerprint) that opened it: a request naming
another principal's ``Mcp-Session-Id`` is answered exactly like an unknown session (404), so it can
neither answer that session's elicitations, nor read its stream, nor close it (DESIGN.md property 12).
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio
from mcp.server.auth.provider import AccessToken
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from confirmation_cards import token_fingerprint
from maya_tools.auth.cors import BrowserOrigins
from maya_tools.jsonrpc_body import JsonRpcBodies
from maya_tools.runtime import DOOR_TOKEN_KEY, Runtime, bearer_of

if TYPE_CHECKING:
    from maya_tools.server import MayaServer
    from maya_tools.settings import Settings

logger = logging.getLogger("maya_tools")


class PagesFirst:
    """Send the approval page's paths to ``pages`` (authenticated by their one-time secret, not a
    bearer), the health paths to ``health`` (no bearer: a load balancer asks them), the paths of
    ``open`` (the resource metadata, the browser sign-in and ``/connect``: no bearer, the browser
    session guards the pages) to ``open_app``, and everything else, lifespan included, to ``app``
    (``/mcp`` behind ``RequireBearer`` or ``maya_tools.auth.resource.protect``).

    The bare prefix (``/approve``, no slash) is the page's too, so that it gets the page's headers
    and 404 rather than the bearer check's 401."""

    def __init__(
        self,
        pages: ASGIApp,
        app: ASGIApp,
        *,
        prefix: str,
        health: ASGIApp | None = None,
        open_app: ASGIApp | None = None,
        open_paths: tuple[str, ...] = (),
    ) -> None:
        self.pages = pages
        self.app = app
        self.health = health
        self.root = prefix.rstrip("/")
        self.prefix = self.root + "/"
        self.open_app = open_app
        self.open_paths = open_paths
        """Exact paths, or prefixes when they end with "/"."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] == "http" and (path == self.root or path.startswith(self.prefix)):
            await self.pages(scope, receive, send)
            return
        if scope["type"] == "http" and self.health is not None and path in HEALTH_PATHS:
            await self.health(scope, receive, send)
            return
        if scope["type"] == "http" and self.open_app is not None and self._open(path):
            await self.open_app(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _open(self, path: str) -> bool:
        return any(path == p or (p.endswith("/") and path.startswith(p)) for p in self.open_paths)


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


def bearer_principal(scope: Scope) -> str:
    """The fingerprint of a request's bearer (``--auth door-token``), or "" without one."""
    token = _bearer(scope)
    return token_fingerprint(token) if token else ""


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


SESSION_OWNERS = 100_000
"""How many session owners ``BindSessions`` keeps (the oldest forgotten first)."""


class BindSessions:
    """Bind each MCP session id to the principal whose request created it; refuse it to anyone else.

    Runs inside ``RequireBearer`` or ``maya_tools.auth.resource.protect``, so every request has a
    bearer; ``principal`` names its owner (default: the bearer's fingerprint). Owners are kept for the
    server's life, at most ``limit`` of them (the oldest forgotten first; the SDK expires idle sessions
    too). Fail closed: a session whose owner is not known (never bound here, or forgotten) is answered
    as one that does not exist, to everyone, its own person included (404: the client starts a new
    session, as the spec has it do for an unknown ``Mcp-Session-Id``).
    """

    def __init__(
        self, app: ASGIApp, *, limit: int = SESSION_OWNERS, principal: Callable[[Scope], str] | None = None
    ) -> None:
        self.app = app
        self.limit = limit
        self.principal = principal or bearer_principal
        self.owners: OrderedDict[str, str] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        principal = self.principal(scope)
        session = _header(scope, SESSION_HEADER)
        if session is not None and self.owners.get(session) != principal:  # unknown, forgotten or another's
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


class DoorTokens:
    """With OAuth: hand each POST to ``/mcp`` the person's own Door token (``DoorCredentials.get``
    of the verified principal) in its ASGI scope, where ``Runtime.token_for`` finds it; nothing when
    they connected none (a tool that needs Door then raises ``DoorNotConnected``). The MCP access
    token itself goes no further than the bearer check."""

    def __init__(self, app: ASGIApp, runtime: Callable[[], Runtime | None]) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from maya_tools.auth import CredentialError
        from maya_tools.auth.resource import principal_of

        current = self.runtime()
        person = principal_of(scope) if scope["type"] == "http" and scope.get("method") == "POST" else None
        if person is not None and current is not None and current.credentials is not None:
            try:
                token = await current.credentials.get(person)
            except CredentialError as error:  # a key no longer configured: the person is asked to connect again
                logger.warning("the stored Door token of %s cannot be read: %s", person.key, error)
                token = None
            if token is not None:
                scope = {**scope, DOOR_TOKEN_KEY: token}
        await self.app(scope, receive, send)


class RuntimeVerifier:
    """The runtime's ``JwtTokenVerifier`` (opened by its lifespan) as the SDK's ``TokenVerifier``:
    no token verifies before the server has started."""

    def __init__(self, runtime: Callable[[], Runtime | None]) -> None:
        self.runtime = runtime

    async def verify_token(self, token: str) -> AccessToken | None:
        current = self.runtime()
        if current is None or current.verifier is None:
            return None
        return await current.verifier.verify_token(token)


class AuthPages:
    """``/auth/*`` (``BrowserSignIn``), ``/connect`` (``ConnectPage``) and the approvers' review page ``/cards``
    (``maya_tools.channels.review``) of the runtime's sign-in."""

    def __init__(self, runtime: Callable[[], Runtime | None]) -> None:
        self.runtime = runtime
        self._app: tuple[Runtime, Starlette] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        current = self.runtime()
        if current is None or current.sign_in is None or current.credentials is None:
            await _unready("starting: the browser sign-in is not open yet")(scope, receive, send)
            return
        if self._app is None or self._app[0] is not current:
            from maya_tools.auth import ConnectPage
            from maya_tools.channels.review import ReviewPages

            page = ConnectPage(
                sign_in=current.sign_in,
                credentials=current.credentials,
                door_for=current.door_with,
                requests=current.connect_requests,
            )
            review = ReviewPages(current, current.sign_in)
            self._app = (current, Starlette(routes=[*current.sign_in.routes(), *page.routes(), *review.routes()]))
        await self._app[1](scope, receive, send)


class OpenPaths:
    """The open paths of OAuth: the resource metadata (``/.well-known/…``), else the browser pages."""

    def __init__(self, metadata: ASGIApp, pages: ASGIApp) -> None:
        self.metadata = metadata
        self.pages = pages

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if str(scope.get("path", "")).startswith("/.well-known/"):
            await self.metadata(scope, receive, send)
        else:
            await self.pages(scope, receive, send)


OAUTH_PATHS = (
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/",
    "/auth/",
    "/connect",
    "/cards",
    "/cards/",
)


def transport_security(settings: Settings, host: str) -> TransportSecuritySettings | None:
    """The SDK's Host/Origin (DNS rebinding) protection as ``serve`` had it for a loopback ``host``,
    also admitting ``MAYA_PUBLIC_URL``'s host and the browser origins of ``MAYA_ALLOWED_ORIGINS``."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        return None  # as the SDK decides: a server bound elsewhere sits behind its own front door
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*", *settings.allowed_origins]
    if settings.public_url is not None:
        netloc = urlsplit(settings.public_url).netloc
        hosts.append(netloc)
        origins.append("{0.scheme}://{0.netloc}".format(urlsplit(settings.public_url)))
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


DECIDING_TOOLS = frozenset({"decide_card", "stop_plan"})
"""Tools that carry a person's decision about a change: they need ``maya.change`` whatever their
annotations say (``stop_plan`` sends nothing to Door, yet it decides that a plan goes no further)."""


def read_tools(server: MayaServer) -> frozenset[str]:
    """The tools a ``maya.read`` token may call: those annotated read-only, never a deciding one. Every
    other tool, one added later included, needs ``maya.change``."""
    tools = server._tool_manager.list_tools()  # the SDK keeps no public synchronous listing
    read = {t.name for t in tools if t.annotations is not None and t.annotations.read_only_hint is True}
    return frozenset(read - DECIDING_TOOLS)


class ByPath:
    """Requests for ``path`` to ``there``; everything else to ``app``."""

    def __init__(self, path: str, there: ASGIApp, app: ASGIApp) -> None:
        self.path = path
        self.there = there
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and str(scope.get("path", "")).rstrip("/") == self.path:
            await self.there(scope, receive, send)
        else:
            await self.app(scope, receive, send)


class MayaApp:
    """The ASGI app ``serve`` runs: its lifespan is ``running()``, every other scope goes to ``app``."""

    def __init__(self, app: ASGIApp, servers: tuple[MayaServer, ...]) -> None:
        self.app = app
        self.servers = servers
        """``/mcp``'s server first (its lifespan opens the runtime), then ``/mcp/read-only``'s."""

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Every endpoint's session manager, in order (each can run once per app)."""
        async with AsyncExitStack() as stack:
            for server in self.servers:
                await stack.enter_async_context(server.session_manager.run())
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await Starlette(lifespan=lambda _: self.running())(scope, receive, send)
            return
        await self.app(scope, receive, send)


def build_app(server: MayaServer, settings: Settings, *, host: str) -> MayaApp:
    """The whole HTTP app of ``serve``: ``/mcp`` (OAuth or door-token, per ``settings.auth``) and
    ``/mcp/read-only`` (its read tools only, the same sign-in), the approval page, health, and with
    OAuth the resource metadata, ``/auth/*`` and ``/connect``."""
    from maya_tools.channels.page import PATH
    from maya_tools.server import READ_ONLY_PATH, build_read_only_server

    def runtime() -> Runtime | None:
        return server.pages.runtime

    reader = build_read_only_server(server, settings)
    mcp = _endpoint(server, settings, host, runtime, "/mcp")
    read_only = _endpoint(reader, settings, host, runtime, READ_ONLY_PATH)
    guarded: ASGIApp = ByPath(READ_ONLY_PATH, read_only, mcp)
    open_app: ASGIApp | None = None
    if settings.oauth:
        from maya_tools.auth.resource import metadata_routes

        assert settings.resource_url is not None and settings.oauth_issuer is not None
        open_app = OpenPaths(
            Starlette(routes=metadata_routes(settings.resource_url, settings.oauth_issuer)), AuthPages(runtime)
        )
    if settings.allowed_origins:
        guarded = BrowserOrigins(guarded, settings.allowed_origins)
    health = health_app(runtime)
    pages = PagesFirst(server.pages.app, guarded, prefix=PATH, health=health, open_app=open_app, open_paths=OAUTH_PATHS)
    return MayaApp(pages, (server, reader))


def _endpoint(
    server: MayaServer, settings: Settings, host: str, runtime: Callable[[], Runtime | None], path: str
) -> ASGIApp:
    """One MCP endpoint at ``path``: ``server``'s streamable HTTP app behind the bearer check (OAuth,
    the scopes its tools need, the allowed clients; or the caller's Door token), sessions bound to their principal."""
    from maya_tools.stream_events import RETRY_MS, KeepSessionEvents, StreamEvents

    events = StreamEvents()  # 2025-11-25 streams resumable with Last-Event-ID, each session's apart
    sdk_app = server.streamable_http_app(
        streamable_http_path=path,
        host=host,
        transport_security=transport_security(settings, host),
        event_store=events,
        retry_interval=RETRY_MS,
    )
    mcp = KeepSessionEvents(sdk_app, events)
    if not settings.oauth:
        return RequireBearer(JsonRpcBodies(BindSessions(mcp, limit=SESSION_OWNERS)))
    from maya_tools.auth.resource import principal_of, protect

    assert settings.resource_url is not None

    def owner(scope: Scope) -> str:
        person = principal_of(scope)
        return "" if person is None else person.key

    return protect(
        JsonRpcBodies(BindSessions(DoorTokens(mcp, runtime), limit=SESSION_OWNERS, principal=owner)),
        verifier=RuntimeVerifier(runtime),
        resource=settings.resource_url,
        read_tools=read_tools(server),
        every_call_reads=path != "/mcp",
        clients=settings.oauth_clients,
    )
