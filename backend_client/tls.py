"""The verifying TLS context the process's HTTP clients share."""

from __future__ import annotations

import functools
import ssl

import httpx2


@functools.cache
def verifying_tls() -> ssl.SSLContext:
    """httpx2's default verifying TLS context (the system's CAs, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``),
    built once per process and shared by the clients a ``DoorClient`` makes for itself: building one
    loads the whole CA bundle, about 18 ms of CPU, and httpx2 builds one per client."""
    return httpx2.create_ssl_context()
