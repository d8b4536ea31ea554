"""Planning a card costs at most two reads of Door, counted on the reference backend's request log,
whatever the cluster's history; the machine-tier catalog is read once and reused."""

from __future__ import annotations

import httpx2
import pytest
from fastapi import FastAPI

from backend_client import DoorClient
from backend_client.models import PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from confirmation_cards import Planner, PreflightError
from reference_backend import seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.conftest import BASE_URL

pytestmark = pytest.mark.anyio


async def _no_sleep(_: float) -> None:
    """Nothing here waits."""


def _planner(app: FastAPI, clock: ManualClock, http: httpx2.AsyncClient) -> Planner:
    # A new DoorClient per plan over one shared connection pool, as the MCP server builds them.
    return Planner(DoorClient(BASE_URL, seed.DEMO_ADMIN_TOKEN, http_client=http, sleep=_no_sleep), clock=clock.now)


def _requests(backend: ReferenceBackend, since: int) -> list[tuple[str, str]]:
    return [(r["method"], r["path"]) for r in backend.requests_since(since)]


async def test_a_scale_card_by_name_takes_two_gets_once_the_catalog_is_known(
    app: FastAPI, backend: ReferenceBackend, clock: ManualClock
) -> None:
    """The cluster by ``?name=`` (one request, not a 404 by id first), its state for R-OP-01; the catalog is cached."""
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app)) as http:
        await _planner(app, clock, http).scale_node_pool("payments-prod", "workers", {"count": 3})
        seq = backend.last_request_seq
        card = await _planner(app, clock, http).scale_node_pool("payments-prod", "workers", {"count": 4})
        seen = _requests(backend, seq)
    assert card.body == {"count": 4}
    assert len(seen) <= 2, seen
    assert all(method == "GET" for method, _ in seen)
    assert ("GET", "/v1/public/clusters") in seen  # the name, directly


async def test_planning_by_id_and_relabel_and_add_take_at_most_two_requests(
    app: FastAPI, backend: ReferenceBackend, clock: ManualClock
) -> None:
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app)) as http:
        await _planner(app, clock, http).scale_node_pool(seed.DEMO_CLUSTER_ID, "workers", {"count": 3})
        for plan in (
            lambda p: p.scale_node_pool(seed.DEMO_CLUSTER_ID, "workers", {"count": 4}),
            lambda p: p.relabel_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(labels={"a": "b"})),
            lambda p: p.add_node_pool(
                "payments-prod", PublicNodePoolCreateRequest(name="batch", size="dks.c5.large", count=1)
            ),
        ):
            seq = backend.last_request_seq
            await plan(_planner(app, clock, http))
            seen = _requests(backend, seq)
            assert len(seen) <= 2 and all(method == "GET" for method, _ in seen), seen


async def test_a_busy_pool_is_still_refused_before_a_card_after_a_long_history(
    app: FastAPI, backend: ReferenceBackend, clock: ManualClock
) -> None:
    """R-OP-01 from the (bounded) state, whatever ran before: many finished operations, then one running."""
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE_URL) as http:
        admin = {"Authorization": f"Bearer {seed.DEMO_ADMIN_TOKEN}"}
        path = f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}/node-pools/workers"
        for i in range(60):
            assert (await http.patch(path, json={"labels": {"round": str(i)}}, headers=admin)).status_code == 202
            clock.advance(2)
        assert (await http.patch(path, json={"count": 3}, headers=admin)).status_code == 202
        with pytest.raises(PreflightError) as refused:
            await _planner(app, clock, http).scale_node_pool("payments-prod", "workers", {"count": 4})
    assert refused.value.violation.rule == "R-OP-01"


async def test_a_tier_missing_from_the_cached_catalog_is_looked_up_again(
    app: FastAPI, backend: ReferenceBackend, clock: ManualClock
) -> None:
    """A tier added to Door after the catalog was cached is found by reading the catalog once more."""
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app)) as http:
        planner = _planner(app, clock, http)
        await planner.scale_node_pool("payments-prod", "workers", {"count": 3})
        tier = backend.catalog["dks.c5.large"].model_copy(update={"id": "dks.new.large"})
        backend.catalog[tier.id] = tier
        card = await _planner(app, clock, http).add_node_pool(
            "payments-prod", PublicNodePoolCreateRequest(name="batch", size="dks.new.large", count=1)
        )
    assert card.body["size"] == "dks.new.large"
