"""Node reads: R-NODE-01..06 (stale-while-revalidate snapshots)."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx2
import pytest

from backend_client.models import NODE_SCHEMA, NodeList
from reference_backend import seed
from reference_backend.clock import ManualClock
from tests.reference_backend.rules_helpers import (
    ADMIN,
    CID,
    INVENTORY_REFRESH_S,
    INVENTORY_TTL_S,
    MEMBER,
    accepted_cluster,
    add_pool,
    fund,
    nodes_url,
    problem,
    set_inventory,
    set_phase,
    settled_nodes,
)

pytestmark = pytest.mark.anyio

NODE_FIELDS = {"name", "pool", "status", "kubernetes_version", "ready", "created_at", "deleted_at"}
STATUSES = {"Pending", "Provisioning", "Provisioned", "Running", "Deleting", "Deleted", "Failed", "Unknown"}
FORBIDDEN = re.compile(r"address|(^|_)ip($|_)|ips$|provider|instance_id|machine_id", re.IGNORECASE)


async def _read(door: httpx2.AsyncClient, pool: str | None = None) -> NodeList:
    r = await door.get(nodes_url(pool=pool), headers=MEMBER)
    assert r.status_code == 200, r.text
    return NodeList.model_validate(r.json())


# --- R-NODE-01 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("pool", [None, "workers"])
async def test_r_node_01_node_reads_are_200_cold_fresh_and_stale(
    door: httpx2.AsyncClient, clock: ManualClock, pool: str | None
) -> None:
    """R-NODE-01: both node routes answer 200 (never 202) whether the snapshot is cold, fresh or stale."""
    for step in (0, INVENTORY_REFRESH_S, INVENTORY_TTL_S + 5, INVENTORY_REFRESH_S):
        clock.advance(step)
        r = await door.get(nodes_url(pool=pool), headers=MEMBER)
        assert r.status_code == 200, (step, r.status_code, r.text)


async def test_r_node_01_cluster_route_lists_every_worker(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-NODE-01: /nodes lists every worker; /node-pools/{pool}/nodes only that pool's."""
    await fund(door)
    accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge", "count": 1}))
    clock.advance(300)
    everyone = await settled_nodes(door, clock)
    assert sorted(n.pool or "" for n in everyone.items) == ["batch", "workers", "workers"]
    batch = await settled_nodes(door, clock, pool="batch")
    assert [n.pool for n in batch.items] == ["batch"]
    workers = await settled_nodes(door, clock, pool="workers")
    assert {n.name for n in workers.items} == {n.name for n in everyone.items if n.pool == "workers"}


# --- R-NODE-02 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("pool", [None, "workers"])
async def test_r_node_02_envelope_has_the_freshness_fields(door: httpx2.AsyncClient, pool: str | None) -> None:
    """R-NODE-02: {schema_version "node.public.v1", cluster_id, items, total, cold, stale, next_refresh_at}."""
    r = await door.get(nodes_url(pool=pool), headers=MEMBER)
    body = r.json()
    assert {"schema_version", "cluster_id", "items", "total", "cold", "stale", "next_refresh_at"} <= set(body)
    assert body["schema_version"] == NODE_SCHEMA
    assert body["cluster_id"] == CID
    assert body["total"] == len(body["items"])


async def test_r_node_02_total_counts_the_workers(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-NODE-02: `total` is the number of listed workers (2 for the demo pool)."""
    nodes = await settled_nodes(door, clock)
    assert nodes.total == len(nodes.items) == 2


# --- R-NODE-03 -----------------------------------------------------------------------------------


async def test_r_node_03_first_read_is_cold_and_queues_a_refresh(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-NODE-03: the first read is cold=true with a refresh queued; after it lands the read is warm."""
    first = await _read(door)
    assert first.cold is True
    assert first.next_refresh_at is not None
    assert first.next_refresh_at >= clock.now()
    assert first.next_refresh_at <= clock.now() + timedelta(seconds=INVENTORY_REFRESH_S + 1)

    clock.advance(INVENTORY_REFRESH_S)
    second = await _read(door)
    assert second.cold is False and second.stale is False
    assert second.next_refresh_at is None
    assert {n.name for n in second.items} >= {seed.DEMO_NODE_NAME}
    assert second.total == 2


async def test_r_node_03_cold_read_before_the_refresh_stays_cold(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-NODE-03: reading again before the refresh lands is still cold (no snapshot yet), still 200."""
    await _read(door)
    clock.advance(INVENTORY_REFRESH_S / 2)
    again = await _read(door)
    assert again.cold is True
    assert again.next_refresh_at is not None


# --- R-NODE-04 -----------------------------------------------------------------------------------


async def test_r_node_04_old_snapshot_is_stale_and_queues_a_refresh(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-NODE-04: after the TTL the snapshot is served stale=true with next_refresh_at; then fresh again."""
    await _read(door)
    clock.advance(INVENTORY_REFRESH_S)
    fresh = await _read(door)
    assert fresh.fresh and fresh.next_refresh_at is None

    clock.advance(INVENTORY_TTL_S + 1)
    stale = await _read(door)
    assert stale.stale is True and stale.cold is False
    assert stale.items, "a stale read still serves the best-known snapshot"
    assert stale.next_refresh_at is not None and stale.next_refresh_at >= clock.now()

    clock.advance(INVENTORY_REFRESH_S)
    again = await _read(door)
    assert again.fresh and again.next_refresh_at is None


async def test_r_node_04_snapshot_within_ttl_is_not_stale(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-NODE-04: a snapshot younger than the TTL is served stale=false with no refresh queued."""
    await _read(door)
    clock.advance(INVENTORY_REFRESH_S)
    await _read(door)
    clock.advance(INVENTORY_TTL_S - 5)
    within = await _read(door)
    assert within.stale is False and within.cold is False and within.next_refresh_at is None


async def test_r_node_04_stale_snapshot_shows_the_old_world_until_refreshed(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-NODE-04: the best-known snapshot lags a scale-up; after the refresh the new worker is listed."""
    await fund(door)
    before = await settled_nodes(door, clock, pool="workers")
    assert before.total == 2
    accepted_cluster(
        await door.patch(f"/v1/public/clusters/{CID}/node-pools/workers", json={"count": 3}, headers=ADMIN)
    )
    clock.advance(300)
    after = await settled_nodes(door, clock, pool="workers")
    assert after.total == 3


# --- R-NODE-05 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("pool", [None, "workers"])
async def test_r_node_05_not_provisioned_is_409(door: httpx2.AsyncClient, pool: str | None) -> None:
    """R-NODE-05: node reads → 409 until the cluster is Provisioned."""
    await set_phase(door, "Provisioning")
    problem(await door.get(nodes_url(pool=pool), headers=MEMBER), 409, {"R-NODE-05", "R-PHASE-02"})


async def test_r_node_05_unknown_pool_is_404(door: httpx2.AsyncClient) -> None:
    """R-NODE-05: /node-pools/{pool}/nodes with an unknown pool name → 404."""
    problem(await door.get(nodes_url(pool="nope"), headers=MEMBER), 404, "R-NODE-05")


@pytest.mark.parametrize("pool", [None, "workers"])
async def test_r_node_05_inventory_down_is_503_with_retry_after(door: httpx2.AsyncClient, pool: str | None) -> None:
    """R-NODE-05: inventory temporarily unavailable → 503 with Retry-After (5 s); back up → 200."""
    await set_inventory(door, False)
    r = await door.get(nodes_url(pool=pool), headers=MEMBER)
    problem(r, 503, "R-NODE-05")
    assert r.headers.get("retry-after") == "5"
    await set_inventory(door, True)
    assert (await door.get(nodes_url(pool=pool), headers=MEMBER)).status_code == 200


async def test_r_node_05_inventory_down_does_not_hide_pool_reads(door: httpx2.AsyncClient) -> None:
    """R-NODE-05: the 503 is for node reads only; pools and the cluster still read 200."""
    await set_inventory(door, False)
    assert (await door.get(f"/v1/public/clusters/{CID}/node-pools", headers=MEMBER)).status_code == 200
    assert (await door.get(f"/v1/public/clusters/{CID}", headers=MEMBER)).status_code == 200


# --- R-NODE-06 -----------------------------------------------------------------------------------


async def test_r_node_06_node_fields_and_nothing_private(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-NODE-06: name, pool, status, kubernetes_version, ready, created_at, deleted_at; no addresses or provider ids."""
    await settled_nodes(door, clock)
    body = (await door.get(nodes_url(), headers=MEMBER)).json()
    assert body["items"]
    for item in body["items"]:
        assert set(item) >= NODE_FIELDS, item
        leaked = [key for key in item if FORBIDDEN.search(key)]
        assert not leaked, leaked
        assert item["status"] in STATUSES


async def test_r_node_06_demo_node_reads_as_on_the_page(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-NODE-06: payments-prod-workers-abc12 is Running, ready, in pool workers, not deleted."""
    nodes = await settled_nodes(door, clock, pool="workers")
    node = next(n for n in nodes.items if n.name == seed.DEMO_NODE_NAME)
    assert (node.pool, node.status, node.ready, node.deleted_at) == ("workers", "Running", True, None)
    assert node.kubernetes_version


async def test_r_node_06_worker_uses_its_internal_identity_until_it_joins(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-NODE-06: before joining a worker is `worker-<8 hex>`; once joined, `<cluster>-<pool>-<5 chars>`."""
    await fund(door)
    accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge", "count": 1}))
    early = await settled_nodes(door, clock, pool="batch")  # 33 s in: Provisioning, not joined
    assert len(early.items) == 1
    node = early.items[0]
    assert re.fullmatch(r"worker-[0-9a-f]{8}", node.name), node
    assert node.status in {"Pending", "Provisioning"} and node.ready is False

    clock.advance(120)
    late = await settled_nodes(door, clock, pool="batch")
    assert len(late.items) == 1
    joined = late.items[0]
    assert re.fullmatch(r"payments-prod-batch-[a-z0-9]{5}", joined.name), joined
    assert joined.status == "Running" and joined.ready is True


async def test_r_node_05_a_deleting_pool_still_lists_its_draining_nodes(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-NODE-05 with R-DEL-02: a deleting pool exists (it is in the pool list) until its workers are
    gone, so its nodes read 200 with the Deleting workers; after the drain its name is 404."""
    from tests.reference_backend.rules_helpers import add_running_pool, delete_pool

    await add_running_pool(door, clock, "batch")
    clock.advance(INVENTORY_TTL_S + 1)  # any earlier snapshot is stale now
    assert (await delete_pool(door, "batch")).status_code == 202
    assert (await door.get(nodes_url(pool="batch"), headers=MEMBER)).status_code == 200  # queues a refresh
    clock.advance(INVENTORY_REFRESH_S)  # well within the 30 s drain
    draining = await _read(door, pool="batch")
    assert draining.fresh
    assert [(n.pool, n.status) for n in draining.items] == [("batch", "Deleting")]
    clock.advance(60)
    gone = await door.get(nodes_url(pool="batch"), headers=MEMBER)
    problem(gone, 404, "R-NODE-05")
