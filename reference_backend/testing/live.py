"""A live reference backend on a loopback port, in a thread of this process, for code outside pytest
(``reference_backend.running``) and for the plugin's ``door`` fixture.

The listening socket is bound before uvicorn starts, so the URL is known and a client may connect at
once (the kernel queues it until uvicorn accepts): no waiting for a server to come up. The world runs
on a manual clock, moved only through the admin plane (``door.admin.advance``). One server can serve
one world after another (``LiveServer.door``), which is how the plugin gives each test a fresh world
without starting a server per test.
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn

from reference_backend import snapshots
from reference_backend.app import create_app
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN, SeedName
from reference_backend.testing.admin_client import ReferenceAdmin

LOOPBACK = "127.0.0.1"
STOP_SECONDS = 10.0

Snapshot = bytes | str | Path
"""A snapshot's bytes, or the path of its file."""


def world(seed: SeedName = "demo", snapshot: Snapshot | None = None) -> ReferenceBackend:
    """A world in memory on a manual clock: the seed's, or the snapshot's (at the snapshot's time).

    Raises ``snapshots.SnapshotError`` for a snapshot that cannot be restored, ``OSError`` for a file
    that cannot be read.
    """
    if snapshot is None:
        return ReferenceBackend(ManualClock(), seed=seed)
    data = snapshot if isinstance(snapshot, bytes) else Path(snapshot).read_bytes()
    return ReferenceBackend(ManualClock(), snapshot=snapshots.parse(data))


@dataclass(frozen=True)
class LiveDoor:
    """A live reference backend: where it is, the tokens to call it with, and its admin plane.

    ``super_admin_token`` and ``member_token`` are the demo seed's (``payments``); they hold in any
    snapshot saved from a demo world. The empty seed knows no token until ``admin.put_token`` issues one.
    """

    url: str
    """``http://127.0.0.1:<port>``: the base URL for ``DoorClient`` or any HTTP client (the API is under ``/v1/public``)."""
    admin_token: str = field(repr=False)
    admin: ReferenceAdmin = field(repr=False)
    super_admin_token: str = DEMO_ADMIN_TOKEN
    member_token: str = DEMO_MEMBER_TOKEN

    @property
    def api_url(self) -> str:
        return self.url + "/v1/public"

    def headers(self, token: str | None = None) -> dict[str, str]:
        """``Authorization: Bearer`` with ``token`` (default: the super_admin's)."""
        return {"Authorization": f"Bearer {token or self.super_admin_token}"}

    def close(self) -> None:
        self.admin.close()


class LiveServer:
    """uvicorn serving the reference backend app on a loopback port, in a daemon thread."""

    def __init__(self, *, host: str = LOOPBACK, port: int = 0, admin_token: str | None = None) -> None:
        if not _is_loopback(host):
            raise ValueError(f"a live reference backend listens on loopback only, not on {host!r}; use 127.0.0.1 or ::1")
        self.admin_token = admin_token or secrets.token_urlsafe(24)
        self.app = create_app(world("empty"), admin_token=self.admin_token)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = _listening(family, host, port)
        bound_host, self.port = self._socket.getsockname()[:2]
        self.url = f"http://[{bound_host}]:{self.port}" if family == socket.AF_INET6 else f"http://{bound_host}:{self.port}"
        # No lifespan (the app has none), no access log (admin paths can hold tokens), no signal handlers (a thread).
        config = uvicorn.Config(self.app, lifespan="off", access_log=False, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name=f"door reference backend {self.url}", daemon=True
        )
        self._thread.start()

    def serve(self, backend: ReferenceBackend) -> None:
        """Answer every later request from ``backend`` (its faults and request log come with it)."""
        self.app.state.backend = backend

    def door(self, seed: SeedName = "demo", snapshot: Snapshot | None = None) -> LiveDoor:
        """Serve a fresh world (the seed's or the snapshot's) and return its handle; ``close()`` it after."""
        self.serve(world(seed, snapshot))
        return LiveDoor(url=self.url, admin_token=self.admin_token, admin=ReferenceAdmin(self.url, self.admin_token))

    def stop(self) -> None:
        """Shut uvicorn down gracefully and wait for its thread (up to ``STOP_SECONDS``)."""
        self._server.should_exit = True
        self._thread.join(STOP_SECONDS)
        self._socket.close()
        if self._thread.is_alive():
            raise RuntimeError(f"the reference backend at {self.url} did not stop within {STOP_SECONDS} s")


@contextmanager
def running(
    seed: SeedName = "demo",
    *,
    snapshot: Snapshot | None = None,
    host: str = LOOPBACK,
    port: int = 0,
    admin_token: str | None = None,
) -> Iterator[LiveDoor]:
    """A live reference backend for the block: ``with reference_backend.running(seed="demo") as door: ...``.

    ``snapshot`` (bytes or a file) starts it from a saved world instead of the seed; ``port=0`` picks a
    free port. Stopped on the way out.
    """
    server = LiveServer(host=host, port=port, admin_token=admin_token)
    try:
        door = server.door(seed, snapshot)
        try:
            yield door
        finally:
            door.close()
    finally:
        server.stop()


def _listening(family: socket.AddressFamily, host: str, port: int) -> socket.socket:
    """A listening TCP socket whose ``proto`` is IPPROTO_TCP, as the one uvicorn would make: asyncio
    turns Nagle off (TCP_NODELAY) only on connections accepted from such a socket, and with Nagle on,
    an answer written in two parts waits for the client's delayed ACK (40 ms a request)."""
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


__all__ = ["LiveDoor", "LiveServer", "running", "world"]
