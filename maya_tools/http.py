"""Serving the MCP server over streamable HTTP: loopback by default, and every request must carry
the caller's own Door token as ``Authorization: Bearer`` (used for that caller's Door calls only)."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send


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


def _has_bearer(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return scheme.lower() == "bearer" and bool(token.strip())
    return False
