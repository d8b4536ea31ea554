"""Fixtures shared by every test package: the reference backend on a manual clock, reached over ASGI."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest

from reference_backend.app import create_app
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock

ADMIN_TOKEN = "test-admin-token"
BASE_URL = "http://door.test"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def backend(clock: ManualClock) -> ReferenceBackend:
    """The demo world (payments-prod with pool `workers`), in memory, on a clock only tests move."""
    return ReferenceBackend(clock=clock, seed="demo")


@pytest.fixture
async def door(backend: ReferenceBackend) -> AsyncIterator[httpx2.AsyncClient]:
    """A raw HTTP client of the reference backend app (no token set: pass `headers=auth(...)`)."""
    app = create_app(backend, admin_token=ADMIN_TOKEN)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE_URL) as client:
        yield client


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
