"""An MCP client's streamable HTTP traffic, kept as the JSON-RPC messages that crossed the wire.

``Wire`` is an httpx2 transport: each request body is parsed as it is sent, and each response body
(plain JSON, or an SSE stream, which is passed on chunk by chunk as it arrives, so a server that
sends a request mid-call is answered in time) is copied and parsed when read back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2


class _Copying(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, into: bytearray) -> None:
        self.inner = inner
        self.into = into

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.into.extend(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class Wire(httpx2.AsyncBaseTransport):
    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.sent: list[dict[str, Any]] = []
        self._bodies: list[tuple[str, bytearray]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "POST" and request.content:
            self.sent.extend(_flat(json.loads(request.content)))
        response = await self.inner.handle_async_request(request)
        body = bytearray()
        self._bodies.append((response.headers.get("content-type", ""), body))
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_Copying(response.stream, body),
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()

    def received(self) -> list[dict[str, Any]]:
        """Every JSON-RPC message the server sent so far, in order."""
        messages: list[dict[str, Any]] = []
        for kind, body in self._bodies:
            text = body.decode()
            if kind.startswith("application/json") and text.strip():
                messages.extend(_flat(json.loads(text)))
            elif kind.startswith("text/event-stream"):
                # The last piece is an event still arriving (or nothing): only whole events are read.
                for event in text.replace("\r\n", "\n").split("\n\n")[:-1]:
                    data = "\n".join(line[5:].lstrip() for line in event.split("\n") if line.startswith("data:"))
                    if data.strip():
                        messages.extend(_flat(json.loads(data)))
        return messages

    def error_codes(self) -> list[int]:
        return [m["error"]["code"] for m in self.received() if "error" in m]


def _flat(parsed: Any) -> list[dict[str, Any]]:
    return [m for m in (parsed if isinstance(parsed, list) else [parsed]) if isinstance(m, dict)]
