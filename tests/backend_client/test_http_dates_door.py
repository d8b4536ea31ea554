"""The freshness wait against the real reference backend, its ``Date`` rewritten as proxies send it.

``DateRewriting`` (``tests/backend_client/proxy.py``) stands where a proxy would, between ``DoorClient`` and the reference backend
(over ``httpx2.ASGITransport``, on a ``ManualClock``): it replaces the ``Date`` of every reply with
the backend's own clock in another spelling, or in two. A naive datetime from such a header once
made ``list_nodes(fresh=True)`` raise ``TypeError``; now the wait reads the server's clock from it
and ends on the fresh snapshot.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi import FastAPI

from backend_client import DoorClient
from backend_client import _constants as C
from reference_backend import seed
from reference_backend.clock import ManualClock
from tests.backend_client.proxy import SPELLINGS, DateRewriting, imf
from tests.conftest import BASE_URL

pytestmark = pytest.mark.anyio

CLUSTER_ID = seed.DEMO_CLUSTER_ID
@pytest.mark.parametrize("spelling", list(SPELLINGS))
async def test_the_freshness_wait_reads_the_servers_clock_from_an_odd_date_and_ends_fresh(
    app: FastAPI, clock: ManualClock, spelling: str
) -> None:
    transport = DateRewriting(app, clock, SPELLINGS[spelling])
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)
        clock.advance(seconds)

    async with DoorClient(BASE_URL, seed.DEMO_MEMBER_TOKEN, transport=transport, sleep=sleep) as door:
        nodes = await door.list_nodes(CLUSTER_ID, fresh=True)
    assert nodes.fresh and nodes.total == 2
    # The first read is cold with its refresh due 2 s later on Door's clock, which the odd Date
    # told: the wait is those 2 s and a little, not the 1 s used when the server's time is unknown.
    assert delays == [2 + C.FRESH_POLL_MIN]
    assert len(transport.dates) == 2 and all(transport.dates)


async def test_two_dates_that_disagree_leave_the_servers_clock_unknown_and_the_wait_still_ends(
    app: FastAPI, clock: ManualClock
) -> None:
    # A proxy adding its own real-time Date beside a simulated backend's: neither can be trusted.
    proxy = datetime(2031, 5, 5, 5, 5, 5, tzinfo=UTC)
    transport = DateRewriting(app, clock, lambda now: [imf(proxy), imf(now).removesuffix(" GMT")])
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)
        clock.advance(seconds)

    async with DoorClient(BASE_URL, seed.DEMO_MEMBER_TOKEN, transport=transport, sleep=sleep) as door:
        nodes = await door.list_nodes(CLUSTER_ID, fresh=True)
    assert nodes.fresh
    assert delays[0] == C.FRESH_POLL_UNKNOWN
    assert sum(delays) < 5
