"""``VerifyingTransport``: nothing is built before the first request, which then goes out on httpx2's
own transport with the shared verifying TLS context (a server's start loads no CA bundle)."""

from __future__ import annotations

import anyio
import anyio.abc
import httpx2
import pytest

from backend_client.tls import VerifyingTransport, verifying_tls

pytestmark = pytest.mark.anyio


async def test_the_transport_builds_its_connection_pool_on_the_first_request_only() -> None:
    async def answer(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            request = b""
            while b"\r\n\r\n" not in request:
                request += await stream.receive()
            await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    transport = VerifyingTransport()
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, answer)
        async with httpx2.AsyncClient(transport=transport) as client:
            assert transport._inner is None  # a client that has sent nothing holds no TLS context
            with anyio.fail_after(10):
                response = await client.get(f"http://127.0.0.1:{port}/")
            assert response.text == "ok"
            assert isinstance(transport._inner, httpx2.AsyncHTTPTransport)
            assert transport._inner._pool._ssl_context is verifying_tls()
        group.cancel_scope.cancel()
