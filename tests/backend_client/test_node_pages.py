"""``DoorClient.node_page``: every worker counted, only the page parsed, Door's freshness kept (R-NODE-01..04)."""

from __future__ import annotations

import httpx2
import pytest
from fastapi import FastAPI

from backend_client import DoorClient, DoorResponseError
from backend_client.models import PublicNodePoolCreateRequest
from backend_client.nodes import node_page
from reference_backend import seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.conftest import BASE_URL

pytestmark = pytest.mark.anyio


async def test_a_page_of_a_big_cluster_counts_every_worker_and_parses_only_the_page(
    app: FastAPI, backend: ReferenceBackend, clock: ManualClock
) -> None:
    backend.set_credit(seed.DEMO_ORGANISATION, 1e9)
    backend.install_cluster(
        name="big",
        organisation=seed.DEMO_ORGANISATION,
        cluster_id="big",
        pools=[PublicNodePoolCreateRequest(name=f"p{i}", size="dks.c5.large", count=50) for i in range(20)],
    )
    async with DoorClient(BASE_URL, seed.DEMO_ADMIN_TOKEN, transport=httpx2.ASGITransport(app=app)) as door:
        cold = await door.node_page("big", limit=10)
        assert cold.cold and cold.total == 0 and cold.next_offset is None
        clock.advance(5)
        page = await door.node_page("big", offset=995, limit=10)
        full = await door.list_nodes("big")
    assert page.fresh and page.total == 1000 == full.total
    assert page.items == full.items[995:] and page.next_offset is None
    assert sum(c.count for c in page.counts) == 1000
    assert {(c.pool, c.status) for c in page.counts} == {(f"p{i}", "Running") for i in range(20)}


def test_a_body_that_is_not_a_node_list_is_refused() -> None:
    with pytest.raises(ValueError, match="no items"):
        node_page(b'{"cluster_id": "c"}')
    with pytest.raises(ValueError):
        node_page(b'{"cluster_id": "c", "items": [{"name": 1}], "total": 1, "cold": false, "stale": false}', limit=1)


async def test_a_wrong_body_from_door_is_a_response_error() -> None:
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={"items": "no"})

    async with DoorClient(BASE_URL, "t", transport=httpx2.MockTransport(answer)) as door:
        with pytest.raises(DoorResponseError, match="not a NodeList"):
            await door.node_page("c")
