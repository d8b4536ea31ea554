"""The verifying TLS context the process's HTTP clients share, and a transport that makes it on first use."""

from __future__ import annotations

import functools
import ssl
from types import TracebackType

import httpx2


@functools.cache
def verifying_tls() -> ssl.SSLContext:
    """httpx2's default verifying TLS context (the system's CAs, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``),
    built once per process and shared by the clients a ``DoorClient`` makes for itself: building one
    loads the whole CA bundle, about 18 ms of CPU, and httpx2 builds one per client."""
    return httpx2.create_ssl_context()


class VerifyingTransport(httpx2.AsyncBaseTransport):
    """httpx2's own transport with ``verifying_tls()``, made when the first request is sent.

    A server that starts and answers ``initialize`` and ``tools/list`` sends nothing to Door, so it
    need not load the CA bundle (and httpx2's connection pool) before its first tool call: about as
    long as the rest of its start-up on a loaded machine (docs/benchmarks.md)."""

    def __init__(self) -> None:
        self._inner: httpx2.AsyncHTTPTransport | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._inner is None:
            self._inner = httpx2.AsyncHTTPTransport(verify=verifying_tls())
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self.aclose()
