"""Cards against the real reference backend: DoorClients over ASGI, a card store in memory, a manual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest
from fastapi import FastAPI

from backend_client import DoorClient
from confirmation_cards import ApprovalService, Planner, SqliteCardStore
from reference_backend import seed
from reference_backend.clock import ManualClock
from tests.conftest import ADMIN_TOKEN, BASE_URL  # the `app` fixture: tests/conftest.py

# Every secret a card, a rendering or an audit row must never contain.
SECRETS = (seed.DEMO_ADMIN_TOKEN, seed.DEMO_MEMBER_TOKEN, seed.DEMO_OUTSIDER_TOKEN, ADMIN_TOKEN)


async def _no_sleep(_: float) -> None:
    """Retries and polling wait on the simulated clock, never on the wall clock."""


def _client(app: FastAPI, token: str) -> DoorClient:
    return DoorClient(BASE_URL, token, transport=httpx2.ASGITransport(app=app), sleep=_no_sleep)


@pytest.fixture
async def admin(app: FastAPI) -> AsyncIterator[DoorClient]:
    """The demo super_admin of organisation payments."""
    async with _client(app, seed.DEMO_ADMIN_TOKEN) as client:
        yield client


@pytest.fixture
async def member(app: FastAPI) -> AsyncIterator[DoorClient]:
    """The demo member of organisation payments: may read, may not change."""
    async with _client(app, seed.DEMO_MEMBER_TOKEN) as client:
        yield client


@pytest.fixture
def planner(admin: DoorClient, clock: ManualClock) -> Planner:
    return Planner(admin, clock=clock.now)


@pytest.fixture
def store() -> SqliteCardStore:
    return SqliteCardStore(":memory:")


@pytest.fixture
def service(store: SqliteCardStore, clock: ManualClock) -> ApprovalService:
    return ApprovalService(store, clock=clock.now)
