"""A guard that refuses, before any packet leaves, every attempt to reach a host that is not loopback.

``with loopback_only() as refusals:`` patches, for the block, the places a connection or a name
lookup starts in Python: ``socket.getaddrinfo``, ``gethostbyname``, ``gethostbyname_ex`` (a DNS
query is a packet too), ``socket.socket.connect``, ``connect_ex`` and ``sendto``, and httpx2's
network transports (``HTTPTransport``, ``AsyncHTTPTransport``), which are refused by the request's
URL before they resolve or connect, so the message names the request. asyncio, anyio, ssl, urllib,
requests and boto3 all go through these. A refusal raises ``RemoteHostRefused`` (an ``OSError``, as
a failed connection is) and is recorded in ``refusals`` even if the code under test swallows the
error, so the pytest plugin fails the test either way.

Loopback is 127.0.0.0/8, ::1 (also IPv4-mapped) and the name ``localhost``; Unix sockets and
in-process transports (``httpx2.ASGITransport``) never touch the network and are not checked. The
patches are process-wide while any guard is open (threads included: a server thread of the test
is held to loopback too).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

MESSAGE = (
    "loopback_only: this test tried to reach {target} through {via}, which is not a loopback host; nothing was "
    "sent. A test held to loopback may reach only 127.0.0.0/8, ::1 and localhost: point its client at the "
    "reference backend (the door fixture's door.url), or drop the loopback_only marker if it must reach the network."
)


class RemoteHostRefused(OSError):
    """A connection or a name lookup of a host that is not loopback, refused before it started."""


class Refusals(list[str]):
    """The refusals of one guard, in the order they happened (appended from any thread)."""

    def report(self) -> str:
        extra = f" (and {len(self) - 1} more)" if len(self) > 1 else ""
        return self[0] + extra


_lock = threading.Lock()
_open: list[Refusals] = []
_originals: dict[tuple[Any, str], Any] = {}


def is_loopback(host: object) -> bool:
    """Whether ``host`` (a name or an address, ``str`` or ``bytes``) names this machine's loopback only."""
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.strip().strip("[]").rstrip(".").lower().partition("%")[0]
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def _refuse(target: str, via: str) -> RemoteHostRefused:
    message = MESSAGE.format(target=target, via=via)
    with _lock:
        for refusals in _open:
            refusals.append(message)
    return RemoteHostRefused(message)


def _check_name(host: object, port: object, via: str) -> None:
    if host is None or host in ("", b"") or is_loopback(host):
        return
    shown = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
    raise _refuse(f"{shown}:{port}" if port not in (None, 0, "") else shown, via)


def _check_address(sock: socket.socket, address: object, via: str) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple) or not address:
        return
    _check_name(address[0], address[1] if len(address) > 1 else None, via)


def _getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    _check_name(host, port, "socket.getaddrinfo (a name lookup)")
    return _originals[(socket, "getaddrinfo")](host, port, *args, **kwargs)


def _gethostbyname(host: Any) -> Any:
    _check_name(host, None, "socket.gethostbyname (a name lookup)")
    return _originals[(socket, "gethostbyname")](host)


def _gethostbyname_ex(host: Any) -> Any:
    _check_name(host, None, "socket.gethostbyname_ex (a name lookup)")
    return _originals[(socket, "gethostbyname_ex")](host)


def _connect(self: socket.socket, address: Any) -> Any:
    _check_address(self, address, "socket.connect")
    return _originals[(socket.socket, "connect")](self, address)


def _connect_ex(self: socket.socket, address: Any) -> Any:
    _check_address(self, address, "socket.connect_ex")
    return _originals[(socket.socket, "connect_ex")](self, address)


def _sendto(self: socket.socket, data: Any, *args: Any) -> Any:
    if args:
        _check_address(self, args[-1], "socket.sendto")
    return _originals[(socket.socket, "sendto")](self, data, *args)


def _check_request(request: Any) -> None:
    url = request.url
    port = url.port or {"http": 80, "https": 443}.get(url.scheme)
    _check_name(str(url.host), port, f"httpx2 ({request.method} {url.copy_with(query=None, fragment=None)})")


def _handle_request(self: Any, request: Any) -> Any:
    _check_request(request)
    import httpx2

    return _originals[(httpx2.HTTPTransport, "handle_request")](self, request)


async def _handle_async_request(self: Any, request: Any) -> Any:
    _check_request(request)
    import httpx2

    return await _originals[(httpx2.AsyncHTTPTransport, "handle_async_request")](self, request)


def _patches() -> list[tuple[Any, str, Callable[..., Any]]]:
    patches: list[tuple[Any, str, Callable[..., Any]]] = [
        (socket, "getaddrinfo", _getaddrinfo),
        (socket, "gethostbyname", _gethostbyname),
        (socket, "gethostbyname_ex", _gethostbyname_ex),
        (socket.socket, "connect", _connect),
        (socket.socket, "connect_ex", _connect_ex),
        (socket.socket, "sendto", _sendto),
    ]
    try:
        import httpx2
    except ImportError:  # pragma: no cover - httpx2 is a dependency of the package
        return patches
    patches += [
        (httpx2.HTTPTransport, "handle_request", _handle_request),
        (httpx2.AsyncHTTPTransport, "handle_async_request", _handle_async_request),
    ]
    return patches


@contextmanager
def loopback_only() -> Iterator[Refusals]:
    """Refuse every connection and name lookup of a non-loopback host inside the block (nested
    blocks and threads share the patches); yields the refusals made while it was open."""
    refusals = Refusals()
    with _lock:
        if not _open:
            for owner, name, replacement in _patches():
                _originals[(owner, name)] = getattr(owner, name)
                setattr(owner, name, replacement)
        _open.append(refusals)
    try:
        yield refusals
    finally:
        with _lock:
            del _open[next(i for i, other in enumerate(_open) if other is refusals)]
            if not _open:
                # The originals stay known: a call another thread is making right now still finds its own.
                for (owner, name), original in _originals.items():
                    setattr(owner, name, original)


__all__ = ["Refusals", "RemoteHostRefused", "is_loopback", "loopback_only"]
