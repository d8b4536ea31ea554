"""CORS for browser-based MCP hosts: the origins of ``MAYA_ALLOWED_ORIGINS``, exactly, and no other.

A browser host calls ``/mcp`` from its own origin with ``Authorization`` and the MCP headers, so it
first sends a preflight (``OPTIONS`` with ``Access-Control-Request-Method``). That carries no token
by design (Fetch standard), so it is answered here, before the bearer check; every other request of
an allowed origin goes on to the bearer check, and its response exposes the headers a client must
read: ``WWW-Authenticate`` (the 401/403 that start sign-in or step-up), ``Mcp-Session-Id`` and
``Mcp-Protocol-Version``. A request of any other origin passes through untouched, without a CORS
header, to the same checks as before (the SDK's Host/Origin protection included). No credentials
mode: the token is a header, never a cookie.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

ALLOWED_METHODS = b"GET, POST, DELETE, OPTIONS"
ALLOWED_HEADERS = b"Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID"
EXPOSED_HEADERS = b"WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version"
MAX_AGE = b"600"


class BrowserOrigins:
    """``app`` with CORS for exactly ``origins`` (``scheme://host[:port]``)."""

    def __init__(self, app: ASGIApp, origins: Iterable[str]) -> None:
        self.app = app
        self.origins = frozenset(origin.encode() for origin in origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = _header(scope, b"origin") if scope["type"] == "http" else None
        if origin is None or origin not in self.origins:
            await self.app(scope, receive, send)
            return
        if scope.get("method") == "OPTIONS" and _header(scope, b"access-control-request-method") is not None:
            await send(
                {
                    "type": "http.response.start",
                    "status": 204,
                    "headers": [
                        (b"access-control-allow-origin", origin),
                        (b"access-control-allow-methods", ALLOWED_METHODS),
                        (b"access-control-allow-headers", ALLOWED_HEADERS),
                        (b"access-control-max-age", MAX_AGE),
                        (b"vary", b"Origin"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return

        async def exposing(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", []) if not k.lower().startswith(b"access-control-")
                ]
                headers += [
                    (b"access-control-allow-origin", origin),
                    (b"access-control-expose-headers", EXPOSED_HEADERS),
                    (b"vary", b"Origin"),
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, exposing)


def _header(scope: Scope, wanted: bytes) -> bytes | None:
    for name, value in scope.get("headers", []):
        if name.lower() == wanted:
            return bytes(value)
    return None
