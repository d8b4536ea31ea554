"""The embedded reference backend: the one module of maya_tools that imports ``reference_backend``.

With no ``DOOR_API_URL`` the server runs the reference backend in-process (demo seed, simulated
time) and reaches it through an ASGI transport, so nothing reaches Door. The runtime imports this
module only then: a server pointed at Door never loads FastAPI or the reference backend. The
runtime sees the backend's simulated time only through ``EmbeddedTime`` (``now()``, ``sleep()``).
``maya-tools reference-backend`` (the backend on its own) is started from here too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
import anyio.lowlevel
import httpx2

from reference_backend import app as reference_app
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import Clock, ManualClock, ScaledClock
from reference_backend.seed import DEMO_ADMIN_TOKEN

__all__ = [
    "EMBEDDED_URL",
    "Embedded",
    "EmbeddedTime",
    "ReferenceBackend",
    "card_time",
    "embed",
    "run_reference_backend",
]

EMBEDDED_URL = "http://reference-backend.embedded"


def card_time(clock: Clock) -> Callable[[], datetime]:
    """The time cards are made, expire and are decided by: the wall clock, so a person has a card's
    whole lifetime to read it even when the embedded backend runs fast; a manual clock (tests)
    replaces it entirely."""
    if isinstance(clock, ManualClock):
        return clock.now
    return lambda: datetime.now(UTC)


class EmbeddedTime:
    """Door's time on the embedded backend, as the runtime's ``DoorTime`` asks for it."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._now = card_time(clock)

    def now(self) -> datetime:
        return self._now()

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of Door's time: a manual clock moves only by waiting, and a scaled clock's
        seconds pass ``time_scale`` times faster than real ones."""
        if isinstance(self.clock, ManualClock):
            self.clock.advance(seconds)
            await anyio.lowlevel.checkpoint()
        elif isinstance(self.clock, ScaledClock):
            await anyio.sleep(seconds / self.clock.time_scale)
        else:
            await anyio.sleep(seconds)


@dataclass(frozen=True)
class Embedded:
    """A reference backend running in this process, and what the runtime needs to talk to it."""

    backend: ReferenceBackend
    time: EmbeddedTime
    admin_token: str = DEMO_ADMIN_TOKEN
    """The demo seed's admin: the server's own token when DOOR_TOKEN is not set."""
    base_url: str = EMBEDDED_URL

    def http_client(self) -> httpx2.AsyncClient:
        """A client whose requests go to the backend in-process (no socket)."""
        # create_app is looked up when called, so a test can wrap the app (tests/maya_tools/test_secrets.py).
        app = reference_app.create_app(self.backend)
        return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=self.base_url)


def embed(time_scale: float, backend: ReferenceBackend | None = None) -> Embedded:
    """``backend`` (tests inject one to drive its clock), else a new one with the demo seed whose
    time runs ``time_scale`` times faster than real time."""
    if backend is None:
        backend = ReferenceBackend(clock=ScaledClock(time_scale=time_scale), seed="demo")
    return Embedded(backend, EmbeddedTime(backend.clock))


def run_reference_backend(argv: Sequence[str]) -> int:
    """``maya-tools reference-backend``: the backend on its own, over HTTP."""
    from reference_backend.cli import main

    return main(argv)
