"""A tier plan's wait step when Door's replies carry the ``Date`` lines proxies send.

The real reference backend on a manual clock, reached through ``DateRewriting``
(``tests/backend_client/proxy.py``), which rewrites every reply's ``Date`` into another spelling of
Door's clock. The wait step's node reads (``list_nodes(fresh=True)``) once raised ``TypeError`` on
such a header with the new pool already added; the plan must wait as usual and end ``executed``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI

from backend_client import DoorClient
from confirmation_cards import ApprovalService, CardStatus, Planner, SqliteCardStore
from confirmation_cards.models import StepStatus
from confirmation_cards.tier_plan import plan_tier_change
from reference_backend import seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.backend_client.proxy import SPELLINGS, DateRewriting
from tests.conftest import BASE_URL

pytestmark = pytest.mark.anyio


@pytest.fixture(params=list(SPELLINGS))
def proxy(request: pytest.FixtureRequest, app: FastAPI, clock: ManualClock) -> DateRewriting:
    return DateRewriting(app, clock, SPELLINGS[request.param])


@pytest.fixture
async def door(proxy: DateRewriting, clock: ManualClock) -> AsyncIterator[DoorClient]:
    async def sleep(seconds: float) -> None:
        clock.advance(seconds)

    async with DoorClient(BASE_URL, seed.DEMO_ADMIN_TOKEN, transport=proxy, sleep=sleep) as client:
        yield client


async def test_the_wait_step_reads_odd_date_lines_and_the_plan_ends_executed(
    door: DoorClient, proxy: DateRewriting, clock: ManualClock, store: SqliteCardStore, backend: ReferenceBackend
) -> None:
    card = await store.create(
        await plan_tier_change(Planner(door, clock=clock.now), "payments-prod", "workers", "dks.c5.2xlarge")
    )

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)

    reads_before = len(proxy.dates)
    done = await ApprovalService(store, clock=clock.now, sleep=sleep).approve(card.id, approver="ada", door=door)

    assert done.status is CardStatus.EXECUTED, done.result
    assert [s.status for s in done.steps] == [StepStatus.DONE] * 3
    cluster = await door.get_cluster(seed.DEMO_CLUSTER_ID)
    assert cluster.pool("workers") is None and cluster.pool("workers-c5-2xlarge") is not None
    assert len(proxy.dates) > reads_before  # the plan's own reads all came through the proxy
    wait_reads = [r for r in backend.request_log if r["path"].endswith("/node-pools/workers-c5-2xlarge/nodes")]
    assert len(wait_reads) >= 2  # the wait read the new pool's workers more than once, each with the odd Date
