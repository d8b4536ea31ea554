"""The one reading of a ``POST /mcp`` body that every middleware in front of the MCP SDK shares.

``read_body`` reads the body once (up to the SDK's own size limit), parses it, keeps the result in
the request's ASGI scope and hands back a ``receive`` that replays what it read. The SDK parses a
body with one of two parsers, chosen by the ``MCP-Protocol-Version`` header (2025-11-25:
``pydantic_core.from_json``; 2026-07-28: ``json.loads``), so a body is taken only when both read it,
and read it alike (``parse``): the scope check (``maya_tools.auth.resource.RequireScopes``) and
``JsonRpcBodies`` judge exactly what the SDK then runs, whichever generation runs it. A body that
one parser reads otherwise than the other (nested past one's depth, a lone surrogate, a BOM) is
refused rather than guessed at.

``JsonRpcBodies`` answers a body that is not a JSON-RPC message with ``400`` and a JSON-RPC error
before the SDK sees it, so no body, however odd, gets a ``5xx``: not JSON (``-32700`` Parse error:
invalid UTF-8, nested past the parser's depth, a number out of range, empty), not sent as
``Content-Type: application/json`` (``-32700``: it is not read as JSON), or JSON that is neither an
object nor an array (``-32600`` Invalid Request, as JSON-RPC 2.0 §5.1 answers ``1``). A body past the
size limit, a disconnected client and every method but ``POST`` go on to the SDK unchanged (it
answers ``413`` and the rest itself).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import pydantic_core
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
BODY_KEY = "maya_tools.jsonrpc_body"
"""Where ``read_body`` keeps its reading in the ASGI scope (read once per request)."""


@dataclass(frozen=True)
class Body:
    """What ``read_body`` made of a request's body."""

    read: bool
    """False when it was not parsed: not a POST, past the size limit, or the client went away."""
    parsed: Any = None
    error: str | None = None
    """Why the body is not JSON-RPC (then ``code`` says which JSON-RPC error), or None."""
    code: int = PARSE_ERROR

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The JSON-RPC objects of a body read without error (a batch's each; other items skipped)."""
        if not self.read or self.error is not None:
            return []
        items = self.parsed if isinstance(self.parsed, list) else [self.parsed]
        return [item for item in items if isinstance(item, dict)]


def parse(raw: bytes) -> Body:
    """``raw`` read as both of the SDK's parsers read a body, and only if they agree; never raises."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return Body(True, error=f"Parse error: the body is not UTF-8 (byte {error.start}); send JSON in UTF-8")
    try:
        parsed = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
        sdk = pydantic_core.from_json(raw)
    except (ValueError, RecursionError) as error:  # an integer past Python's digit limit is a ValueError
        detail = str(error)[:160] or type(error).__name__
        return Body(True, error=f"Parse error: the body is not valid JSON ({detail}); send one JSON-RPC message")
    if parsed != sdk:
        return Body(True, error="Parse error: the body's JSON is ambiguous (its parsers disagree); send plain JSON")
    if not isinstance(parsed, dict | list):
        kind = {bool: "boolean", int: "number", float: "number", str: "string"}.get(type(parsed), "null")
        return Body(
            True,
            parsed,
            error=f"Invalid Request: the body is a JSON {kind}, not a JSON-RPC message object",
            code=INVALID_REQUEST,
        )
    return Body(True, parsed)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"number {literal[:40]} is out of range")
    return value


def _json_content(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-type":
            media = str(value.decode("latin-1")).split(";")[0].strip().lower()
            return media == "application/json"
    return False


async def read_body(scope: Scope, receive: Receive) -> tuple[Receive, Body]:
    """The request's ``Body`` and a ``receive`` that replays the messages read for it. The first call
    reads and parses; later calls for the same request (another middleware) reuse that reading."""
    known = scope.get(BODY_KEY)
    if isinstance(known, Body):
        return receive, known  # ``receive`` is already the first reader's replay
    if scope.get("type") != "http" or scope.get("method") != "POST":
        return receive, _keep(scope, Body(False))
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if size > DEFAULT_MAX_REQUEST_BODY_SIZE or not message.get("more_body", False):
            break
    replay = _Replay(messages, receive)
    if size > DEFAULT_MAX_REQUEST_BODY_SIZE or messages[-1]["type"] != "http.request":
        return replay, _keep(scope, Body(False))  # the SDK answers 413, or nobody is listening
    if not _json_content(scope):
        refused = Body(
            True, error="Parse error: the body is not read as JSON: send it as Content-Type: application/json"
        )
        return replay, _keep(scope, refused)
    return replay, _keep(scope, parse(b"".join(m.get("body", b"") for m in messages)))


def _keep(scope: Scope, body: Body) -> Body:
    scope[BODY_KEY] = body
    return body


class JsonRpcBodies:
    """Answer a ``POST`` whose body is not a JSON-RPC message with ``400`` and a JSON-RPC error."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        receive, body = await read_body(scope, receive)
        if body.error is None:
            await self.app(scope, receive, send)
            return
        answer = {"jsonrpc": "2.0", "id": None, "error": {"code": body.code, "message": body.error}}
        content = json.dumps(answer, separators=(",", ":")).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": content})


class _Replay:
    """``receive`` that first hands back the messages already read, then the real ``receive``."""

    def __init__(self, messages: list[Message], receive: Receive) -> None:
        self._messages = list(messages)
        self._receive = receive

    async def __call__(self) -> Message:
        if self._messages:
            return self._messages.pop(0)
        return await self._receive()
