"""A proxy between ``DoorClient`` and the reference backend that rewrites the ``Date`` of Door's replies.

The spellings are the ones proxies and odd servers send; each is of the backend's own clock, so a
client that reads them correctly learns Door's time from them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from email.utils import format_datetime

import httpx2
from fastapi import FastAPI

from reference_backend.clock import ManualClock

Spelling = Callable[[datetime], list[str]]


def imf(now: datetime) -> str:
    return format_datetime(now, usegmt=True)


SPELLINGS: dict[str, Spelling] = {
    "without a zone": lambda now: [imf(now).removesuffix(" GMT")],
    "zone -0000": lambda now: [imf(now).replace("GMT", "-0000")],
    "asctime": lambda now: [f"{now:%a %b} {now.day:2d} {now:%H:%M:%S %Y}"],
    "one line, two dates": lambda now: [f"{imf(now)}, {imf(now)}"],
    "two lines, one without a zone": lambda now: [imf(now), imf(now).removesuffix(" GMT")],
}


class DateRewriting(httpx2.AsyncBaseTransport):
    """The ASGI transport, every reply's ``Date`` lines replaced by ``spell(backend clock now)``."""

    def __init__(self, app: FastAPI, clock: ManualClock, spell: Spelling) -> None:
        self._inner = httpx2.ASGITransport(app=app)
        self._clock = clock
        self._spell = spell
        self.dates: list[list[str]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        dates = self._spell(self._clock.now())
        self.dates.append(dates)
        kept = [(name, value) for name, value in response.headers.raw if name.lower() != b"date"]
        lines = kept + [(b"Date", date.encode()) for date in dates]
        return httpx2.Response(
            response.status_code, headers=lines, stream=response.stream, extensions=response.extensions
        )
