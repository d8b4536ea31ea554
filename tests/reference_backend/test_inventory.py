"""The node inventory: a stale-while-revalidate cache per cluster (R-NODE-01..06)."""

from __future__ import annotations

import httpx2
import pytest

from reference_backend import seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.world import compact_json, encode_doc
from tests.conftest import ADMIN_TOKEN, auth

pytestmark = pytest.mark.anyio

MEMBER = auth(seed.DEMO_MEMBER_TOKEN)
ADMIN = auth(seed.DEMO_ADMIN_TOKEN)
NODES = f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}/nodes"
POOL_NODES = f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}/node-pools/workers/nodes"


async def test_the_first_read_is_cold_and_queues_a_refresh(door: httpx2.AsyncClient) -> None:
    """R-NODE-01/02/03: 200 (never 202), cold=true, items empty, next_refresh_at set."""
    response = await door.get(NODES, headers=MEMBER)
    assert response.status_code == 200
    body = response.json()
    assert body == {
        "schema_version": "node.public.v1",
        "cluster_id": seed.DEMO_CLUSTER_ID,
        "items": [],
        "total": 0,
        "cold": True,
        "stale": False,
        "next_refresh_at": "2026-10-01T12:00:02Z",
    }


async def test_after_the_refresh_the_snapshot_is_fresh(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-NODE-03/04/06: after the queued refresh the snapshot is served fresh, with the node fields only."""
    await door.get(NODES, headers=MEMBER)
    clock.advance(2)
    body = (await door.get(NODES, headers=MEMBER)).json()
    assert (body["cold"], body["stale"], body["next_refresh_at"], body["total"]) == (False, False, None, 2)
    first = body["items"][0]
    assert first == {
        "name": seed.DEMO_NODE_NAME,
        "pool": "workers",
        "status": "Running",
        "kubernetes_version": "v1.32.4",
        "ready": True,
        "created_at": "2026-09-30T12:04:00Z",
        "deleted_at": None,
    }


async def test_the_snapshot_is_the_world_at_refresh_time_then_goes_stale_and_is_refreshed(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-NODE-04: a change after the refresh is not seen until the snapshot is stale and refreshed."""
    await door.get(NODES, headers=MEMBER)
    clock.advance(2)
    assert (await door.get(NODES, headers=MEMBER)).json()["total"] == 2
    await door.patch(f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}/node-pools/workers", headers=ADMIN, json={"count": 3})
    clock.advance(30)
    fresh = (await door.get(NODES, headers=MEMBER)).json()
    assert (fresh["stale"], fresh["total"]) == (False, 2)
    clock.advance(1)
    stale = (await door.get(NODES, headers=MEMBER)).json()
    assert (stale["stale"], stale["total"], stale["next_refresh_at"]) == (True, 2, "2026-10-01T12:00:35Z")
    clock.advance(2)
    refreshed = (await door.get(NODES, headers=MEMBER)).json()
    assert (refreshed["stale"], refreshed["cold"], refreshed["total"]) == (False, False, 3)
    assert sorted(n["status"] for n in refreshed["items"]) == ["Provisioning", "Running", "Running"]


async def test_the_pool_route_filters_the_cluster_snapshot(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-NODE-01: the pool-scoped route shows only that pool's workers."""
    await door.post(
        f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}/node-pools",
        headers=ADMIN,
        json={"name": "batch", "size": "dks.c5.large"},
    )
    await door.get(NODES, headers=MEMBER)
    clock.advance(2)
    assert (await door.get(NODES, headers=MEMBER)).json()["total"] == 3
    body = (await door.get(POOL_NODES, headers=MEMBER)).json()
    assert body["total"] == 2
    assert {n["pool"] for n in body["items"]} == {"workers"}


async def test_an_unknown_pool_is_404(door: httpx2.AsyncClient) -> None:
    """R-NODE-05: 404 for an unknown pool name."""
    response = await door.get(f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}/node-pools/nope/nodes", headers=MEMBER)
    assert (response.status_code, response.json()["rule"]) == (404, "R-NODE-05")


async def test_node_reads_are_409_until_the_cluster_is_provisioned(door: httpx2.AsyncClient) -> None:
    """R-PHASE-02/R-NODE-05: 409 on node reads of a NodesReady cluster; the pool list still answers 200."""
    staging = f"/v1/public/clusters/{seed.DEMO_PENDING_CLUSTER_ID}"
    assert (await door.get(f"{staging}/nodes", headers=MEMBER)).status_code == 409
    assert (await door.get(f"{staging}/node-pools/general/nodes", headers=MEMBER)).status_code == 409
    assert (await door.get(f"{staging}/node-pools", headers=MEMBER)).status_code == 200
    assert (await door.get(staging, headers=MEMBER)).status_code == 200


async def test_a_down_inventory_answers_503_with_retry_after(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-NODE-05: 503 with Retry-After while the inventory is down; back to 200 when it returns."""
    admin = auth(ADMIN_TOKEN)
    assert (await door.put("/_reference/inventory", headers=admin, json={"available": False})).json() == {
        "available": False
    }
    response = await door.get(NODES, headers=MEMBER)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["rule"] == "R-NODE-05"
    await door.put("/_reference/inventory", headers=admin, json={"available": True})
    assert (await door.get(NODES, headers=MEMBER)).json()["cold"] is True


async def test_a_refresh_due_while_the_inventory_is_down_is_dropped(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-NODE-03: a refresh that meets a down inventory does not produce a snapshot; the next read queues again."""
    await door.get(NODES, headers=MEMBER)
    await door.put("/_reference/inventory", headers=auth(ADMIN_TOKEN), json={"available": False})
    clock.advance(2)
    await door.put("/_reference/inventory", headers=auth(ADMIN_TOKEN), json={"available": True})
    body = (await door.get(NODES, headers=MEMBER)).json()
    assert (body["cold"], body["next_refresh_at"]) == (True, "2026-10-01T12:00:04Z")


async def test_the_node_list_is_rendered_like_any_answer_and_encoded_once_per_snapshot(
    door: httpx2.AsyncClient, clock: ManualClock, backend: ReferenceBackend
) -> None:
    """R-NODE-01/04: every read until the next refresh serves the same snapshot, so its JSON is reused."""
    await door.get(NODES, headers=MEMBER)
    clock.advance(2)
    first = await door.get(NODES, headers=MEMBER)
    second = await door.get(NODES, headers=MEMBER)
    assert first.headers["content-type"] == "application/json"
    assert first.content == second.content == compact_json(first.json())
    cluster = backend.cluster(seed.DEMO_CLUSTER_ID)
    assert cluster is not None and cluster.inventory.snapshot is not None
    assert vars(cluster.inventory.snapshot)["json"] in first.content
    assert encode_doc({"a": 1, "items": cluster.inventory.snapshot, "z": None}) == compact_json(
        {"a": 1, "items": list(cluster.inventory.snapshot), "z": None}
    )


async def test_no_node_is_born_in_the_future_or_deleted_before_it_was_born(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-NODE-06: the seed's Running nodes predate the clock, so replacing one at once keeps the times in order."""
    assert (await door.delete(f"{NODES}/{seed.DEMO_NODE_NAME}", headers=auth(seed.DEMO_ADMIN_TOKEN))).status_code == 202
    await door.get(NODES, headers=MEMBER)
    clock.advance(2)
    items = (await door.get(NODES, headers=MEMBER)).json()["items"]
    assert len(items) == 3
    for item in items:
        assert item["created_at"] <= "2026-10-01T12:00:00Z", item
        assert item["deleted_at"] is None or item["deleted_at"] >= item["created_at"], item
