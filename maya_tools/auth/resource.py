"""``/mcp`` as an OAuth 2.1 protected resource (MCP authorization, RFC 9728, RFC 6750), built from the
MCP SDK's own resource-server pieces (``mcp.server.auth``).

- ``metadata_routes``: the Protected Resource Metadata at ``/.well-known/oauth-protected-resource``
  and ``/.well-known/oauth-protected-resource/mcp`` (the SDK's handler; the second is the RFC 9728
  §3.1 path of the resource ``<MAYA_PUBLIC_URL>/mcp``, the first is where clients that drop the
  resource path look).
- ``protect``: the SDK's ``AuthenticationMiddleware`` with its ``BearerAuthBackend`` (the verifier,
  and the SDK's RFC 8707 resource check) and ``AuthContextMiddleware``, then ``RequireScopes``.
- ``RequireScopes`` is the SDK's ``RequireAuthMiddleware`` with what the spec asks of a 401 and 403
  that the SDK's leaves out: ``scope="maya.read maya.change"`` in every ``WWW-Authenticate``, no
  ``error=`` when no token was sent (RFC 6750 §3.1), and a per-tool scope: ``tools/call`` of a tool
  that is not read-only needs ``maya.change``, a read tool ``maya.read``; a JSON-RPC response (the
  answer to an elicitation, which may approve a card) ``maya.change``; anything else either. The
  tool is known only from the JSON-RPC body, so the body is read here (``maya_tools.jsonrpc_body``:
  the one reading every middleware shares, as the SDK reads it) and replayed downstream unchanged: a
  step-up ``403 insufficient_scope`` is answered before any tool code runs, so no card is made. The
  SDK has no per-tool hook that could still answer in HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import cast

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from pydantic import AnyHttpUrl
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from maya_tools.auth.tokens import Principal, VerifiedToken
from maya_tools.jsonrpc_body import Body, read_body

READ = "maya.read"
CHANGE = "maya.change"
SCOPES: tuple[str, ...] = (READ, CHANGE)
METADATA_PATH = "/.well-known/oauth-protected-resource"


def metadata_url(resource: str) -> str:
    """Where ``resource``'s metadata is (RFC 9728 §3.1): what every ``WWW-Authenticate`` names."""
    return str(build_resource_metadata_url(AnyHttpUrl(resource)))


def metadata_routes(resource: str, issuer: str) -> list[Route]:
    """The SDK's metadata route for ``resource``, served at both well-known paths."""
    routes = create_protected_resource_routes(
        resource_url=AnyHttpUrl(resource),
        # as a string: the metadata model keeps it as written (AnyHttpUrl would add a "/", and an
        # issuer identifier is compared exactly, RFC 8414 §3.3)
        authorization_servers=[cast(AnyHttpUrl, issuer)],
        scopes_supported=list(SCOPES),
        resource_name="maya-tools",
    )
    (route,) = routes
    # Also where a client of /mcp/read-only looks by RFC 9728 §3.1 when it skips WWW-Authenticate's
    # pointer: the resource is /mcp's (the endpoint is part of it, so the same tokens are for it).
    read_only = Route(route.path + "/read-only", endpoint=route.endpoint, methods=["GET", "OPTIONS"])
    if route.path == METADATA_PATH:
        return routes
    return [*routes, read_only, Route(METADATA_PATH, endpoint=route.endpoint, methods=["GET", "OPTIONS"])]


def protect(
    app: ASGIApp,
    *,
    verifier: TokenVerifier,
    resource: str,
    read_tools: Collection[str],
    every_call_reads: bool = False,
    clients: Collection[str] = (),
) -> ASGIApp:
    """``app`` behind a verified bearer token of ``resource``, issued to one of ``clients`` (any when
    empty), with the scopes its calls need; with ``every_call_reads`` (``/mcp/read-only``, which has
    no change tool) every call needs ``maya.read`` only, and a change tool is unknown there."""
    guarded = RequireScopes(
        app, resource=resource, read_tools=read_tools, every_call_reads=every_call_reads, clients=clients
    )
    backend = BearerAuthBackend(verifier, resource_server_url=AnyHttpUrl(resource))
    return AuthenticationMiddleware(AuthContextMiddleware(guarded), backend=backend)


def principal_of(scope: Scope) -> Principal | None:
    """The verified person of a request that passed ``protect``; None without one (stdio, door-token)."""
    verified = verified_of(scope)
    return verified.principal if verified is not None else None


def verified_of(scope: Scope) -> VerifiedToken | None:
    """The verified access token of a request that passed ``protect`` (its claims, its client); None without."""
    user = scope.get("user")
    if isinstance(user, AuthenticatedUser) and isinstance(user.access_token, VerifiedToken):
        return user.access_token
    return None


class RequireScopes(RequireAuthMiddleware):
    """401 without a verified token, 403 ``insufficient_scope`` without the scope a call needs."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        resource: str,
        read_tools: Collection[str],
        every_call_reads: bool = False,
        clients: Collection[str] = (),
    ) -> None:
        super().__init__(app, [], AnyHttpUrl(metadata_url(resource)))
        self.read_tools = frozenset(read_tools)
        self.every_call_reads = every_call_reads
        self.clients = frozenset(clients)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        user = scope.get("user")
        if not isinstance(user, AuthenticatedUser):
            tried = any(name.lower() == b"authorization" for name, _ in scope.get("headers", []))
            if tried:
                await self._send_auth_error(
                    send,
                    401,
                    "invalid_token",
                    "The access token is not accepted (expired, for another resource or issuer, or not signed "
                    "by the issuer): sign in again",
                )
            else:
                await self._send_auth_error(
                    send, 401, "", "Sign in: send an OAuth access token for this server as Authorization: Bearer"
                )
            return
        client = user.access_token.client_id
        if self.clients and client not in self.clients:
            shown = "".join(ch for ch in client[:200] if ch.isprintable() and ch not in '"\\') or "?"
            await self._send_auth_error(
                send,
                403,
                "access_denied",
                f"OAuth client {shown} may not use this server (MAYA_OAUTH_CLIENTS names the clients it allows): "
                "connect with an allowed client, or ask the server's operator to add this one",
            )
            return
        held = set(user.scopes)
        if not held & set(SCOPES):
            await self._send_auth_error(
                send,
                403,
                "insufficient_scope",
                "The token has neither maya.read nor maya.change: sign in granting them",
            )
            return
        receive, body = await read_body(scope, receive)
        for what, needed in needs(body, self.read_tools):
            if self.every_call_reads:
                needed = READ  # /mcp/read-only registers no change tool: a call there can change nothing
            if needed not in held:
                await self._send_auth_error(
                    send, 403, "insufficient_scope", f"{what} needs scope {needed}: sign in again granting it"
                )
                return
        await self.app(scope, receive, send)

    async def _send_auth_error(self, send: Send, status_code: int, error: str, description: str) -> None:
        parts = [f'error="{error}"', f'error_description="{description}"'] if error else []
        parts += [f'resource_metadata="{self.resource_metadata_url}"', f'scope="{" ".join(SCOPES)}"']
        body = json.dumps({"error": error or "unauthorized", "error_description": description}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status_code,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", ("Bearer " + ", ".join(parts)).encode()),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def needs(body: Body, read_tools: frozenset[str]) -> list[tuple[str, str]]:
    """What each JSON-RPC message of ``body`` does and the scope it needs (a batch, refused by both
    protocol generations, counts whole): ``tools/call`` of a read tool ``maya.read``, of any other
    tool (an unknown one included) ``maya.change``; a JSON-RPC *response* (``result`` or ``error``,
    no ``method``: on 2025-11-25 the answer to the server's ``elicitation/create``, which only a
    change tool's call sends and which may approve its card) ``maya.change``. A body that is not
    JSON-RPC needs nothing here: ``JsonRpcBodies`` refuses it next, and nothing runs."""
    found: list[tuple[str, str]] = []
    for message in body.messages:
        method = message.get("method")
        if method is None and ("result" in message or "error" in message):
            found.append(("An answer to the server's request (an elicitation of a change)", CHANGE))
        elif method == "tools/call" and isinstance(params := message.get("params"), dict):
            name = params.get("name")
            tool = name if isinstance(name, str) else ""
            shown = "".join(ch for ch in tool[:80] if ch.isalnum() or ch in "_-.") or "?"
            found.append((f"Tool {shown}", READ if tool in read_tools else CHANGE))
    return found
