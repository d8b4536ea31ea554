"""A loopback proxy that adds ``Authorization: Bearer <token>`` to every HTTP request it forwards.

The conformance suite's server mode has no option for a header, and ``maya-tools serve`` over
streamable HTTP answers 401 to a request without a bearer. The proxy rewrites only the head of each
request (the bearer added, ``Connection: close`` so that one connection carries one exchange) and
copies every other byte both ways untouched: bodies, chunked and SSE responses, and the ``Host`` and
``Origin`` the client sent, which the server's DNS-rebinding check must see as they were.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio
from anyio.abc import SocketStream

HEAD_LIMIT = 64 * 1024
_REPLACED = (b"authorization:", b"connection:", b"keep-alive:")


def rewritten(head: bytes, token: str) -> bytes:
    """The request head ``head`` (up to and including its blank line) with the bearer and ``Connection: close``."""
    request_line, *fields = head[: -len(b"\r\n\r\n")].split(b"\r\n")
    kept = [field for field in fields if not field.lower().startswith(_REPLACED)]
    added = [f"Authorization: Bearer {token}".encode(), b"Connection: close"]
    return b"\r\n".join([request_line, *kept, *added]) + b"\r\n\r\n"


async def _pipe(source: SocketStream, sink: SocketStream) -> None:
    with suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        while True:
            await sink.send(await source.receive())
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await sink.send_eof()


async def _forward(client: SocketStream, upstream_port: int, token: str) -> None:
    async with client:
        head = b""
        with suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            while b"\r\n\r\n" not in head and len(head) < HEAD_LIMIT:
                head += await client.receive()
        end = head.find(b"\r\n\r\n")
        if end < 0:
            return
        async with await anyio.connect_tcp("127.0.0.1", upstream_port) as upstream:
            await upstream.send(rewritten(head[: end + 4], token) + head[end + 4 :])
            async with anyio.create_task_group() as group:
                group.start_soon(_pipe, client, upstream)
                await _pipe(upstream, client)
                group.cancel_scope.cancel()  # the server answered and closed: the exchange is over


@asynccontextmanager
async def bearer_proxy(upstream_port: int, token: str) -> AsyncIterator[int]:
    """A proxy on a free loopback port to ``127.0.0.1:upstream_port``, for the block's duration; yields its port."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = int(listener.extra(anyio.abc.SocketAttribute.raw_socket).getsockname()[1])
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, lambda client: _forward(client, upstream_port, token))
        try:
            yield port
        finally:
            group.cancel_scope.cancel()
