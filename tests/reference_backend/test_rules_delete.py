"""Remove a pool (DELETE /clusters/{id}/node-pools/{name} → 202): R-DEL-01..03."""

from __future__ import annotations

import httpx2
import pytest

from reference_backend.clock import ManualClock
from tests.reference_backend.rules_helpers import (
    ADMIN,
    DRAIN_S,
    INVENTORY_REFRESH_S,
    SETTLE_S,
    accepted_cluster,
    add_pool,
    add_running_pool,
    catalog,
    cluster_url,
    delete_pool,
    fund,
    get_cluster,
    get_pool,
    get_state,
    make_cluster,
    nodes_url,
    patch_pool,
    pools_url,
    problem,
    set_phase,
    settled_nodes,
)

pytestmark = pytest.mark.anyio


# --- R-DEL-01 ------------------------------------------------------------------------------------


async def test_r_del_01_deleting_the_last_pool_is_409(door: httpx2.AsyncClient) -> None:
    """R-DEL-01: the demo cluster's only pool cannot be removed → 409; it stays active."""
    problem(await delete_pool(door, "workers"), 409, "R-DEL-01")
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.lifecycle == "active"


async def test_r_del_01_with_another_alive_pool_the_delete_is_accepted(door: httpx2.AsyncClient) -> None:
    """R-DEL-01: on a cluster with pools a and b, deleting a → 202 + the cluster body."""
    cluster = await make_cluster(
        door,
        "ledger",
        [{"name": "a", "size": "dks.c5.xlarge", "count": 1}, {"name": "b", "size": "dks.c5.xlarge", "count": 1}],
    )
    after = accepted_cluster(await delete_pool(door, "a", cid=cluster.id))
    assert after.id == cluster.id
    assert {(p.name, p.lifecycle) for p in after.node_pools} >= {("b", "active")}


async def test_r_del_01_a_deleting_pool_does_not_count_as_alive(door: httpx2.AsyncClient) -> None:
    """R-DEL-01: with a and b, once a is deleting, deleting b (the last alive pool) → 409."""
    cluster = await make_cluster(
        door,
        "ledger",
        [{"name": "a", "size": "dks.c5.xlarge", "count": 1}, {"name": "b", "size": "dks.c5.xlarge", "count": 1}],
    )
    accepted_cluster(await delete_pool(door, "a", cid=cluster.id))
    problem(await delete_pool(door, "b", cid=cluster.id), 409, "R-DEL-01")


async def test_r_del_01_add_a_replacement_first_then_delete_the_old(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-DEL-01: the page's advice: add a replacement pool first, then the old one can go."""
    await add_running_pool(door, clock, "batch")
    accepted_cluster(await delete_pool(door, "workers"))


# --- R-DEL-02 ------------------------------------------------------------------------------------


async def test_r_del_02_pool_is_deleting_until_its_workers_are_gone(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-DEL-02: after the 202 the pool reads `deleting` everywhere; after the drain it is in no list."""
    await add_running_pool(door, clock, "batch", count=2)
    cluster = accepted_cluster(await delete_pool(door, "batch"))
    deleting = [p for p in cluster.node_pools if p.name == "batch"]
    assert [p.lifecycle for p in deleting] == ["deleting"]

    clock.advance(5)
    listed = await get_pool(door, "batch")
    assert listed is not None and listed.lifecycle == "deleting"
    embedded = [p for p in (await get_cluster(door)).node_pools if p.name == "batch"]
    assert [p.lifecycle for p in embedded] == ["deleting"]

    clock.advance(DRAIN_S + SETTLE_S)
    assert await get_pool(door, "batch") is None
    assert all(p.name != "batch" for p in (await get_cluster(door)).node_pools)
    nodes = await settled_nodes(door, clock)
    assert all(n.pool != "batch" for n in nodes.items), nodes.items
    op = next(o for o in (await get_state(door)).operations if o.kind == "pool.delete")
    assert op.target == "batch" and op.status == "succeeded"


async def test_r_del_02_workers_of_a_deleting_pool_show_as_deleting(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-DEL-02: while the pool drains (30 s), a node snapshot taken then shows its workers Deleting."""
    await add_running_pool(door, clock, "batch", count=2)
    r = await door.get(nodes_url(), headers=ADMIN)  # no snapshot yet: cold, a refresh is queued for +2 s
    assert r.status_code == 200, r.text
    accepted_cluster(await delete_pool(door, "batch"))
    clock.advance(INVENTORY_REFRESH_S + 1)
    r = await door.get(nodes_url(), headers=ADMIN)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["cold"] is False, body
    statuses = [item["status"] for item in body["items"] if item["pool"] == "batch"]
    assert statuses == ["Deleting", "Deleting"], body["items"]


async def test_r_del_02_deleting_pool_leaves_the_capacity_totals(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-DEL-02 with R-CAP-02: a deleting pool is not alive, so the totals drop at once."""
    await add_running_pool(door, clock, "batch", size="dks.m5.xlarge", count=3)
    tiers = await catalog(door)
    c5 = tiers["dks.c5.xlarge"]
    accepted_cluster(await delete_pool(door, "batch"))
    cluster = await get_cluster(door)
    assert cluster.total_vcpu == 2 * c5.vcpu
    assert cluster.total_volume_gib == 2 * c5.spec.disk_gib


# --- R-DEL-03 ------------------------------------------------------------------------------------


async def test_r_del_03_unknown_pool_is_404(door: httpx2.AsyncClient) -> None:
    """R-DEL-03: DELETE of a pool name that does not exist → 404."""
    problem(await delete_pool(door, "nope"), 404, "R-DEL-03")


async def test_r_del_03_already_deleting_pool_is_404(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-DEL-03: a second DELETE of a pool that is already deleting → 404."""
    await add_running_pool(door, clock, "batch")
    accepted_cluster(await delete_pool(door, "batch"))
    problem(await delete_pool(door, "batch"), 404, "R-DEL-03")


async def test_r_del_03_gone_pool_is_404(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-DEL-03: once the pool disappeared its name is unknown → 404."""
    await add_running_pool(door, clock, "batch")
    accepted_cluster(await delete_pool(door, "batch"))
    clock.advance(SETTLE_S)
    problem(await delete_pool(door, "batch"), 404, "R-DEL-03")


async def test_r_del_03_not_provisioned_is_409(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-DEL-03: DELETE while the cluster is not Provisioned → 409 (R-PHASE-01)."""
    await add_running_pool(door, clock, "batch")
    await set_phase(door, "Deprovisioning")
    problem(await delete_pool(door, "batch"), 409, "R-PHASE-01")
    pool = await get_pool(door, "batch")
    assert pool is not None and pool.lifecycle == "active"


async def test_r_del_03_operation_in_flight_is_409(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-DEL-03: DELETE of a pool whose add is still provisioning → 409 (R-OP-01)."""
    await fund(door)
    accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge"}))
    problem(await delete_pool(door, "batch"), 409, "R-OP-01")
    clock.advance(SETTLE_S)
    accepted_cluster(await delete_pool(door, "batch"))


async def test_r_del_03_delete_after_a_scale_patch_waits_for_it(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-DEL-03: a PATCH then a DELETE on the same pool → the DELETE is 409 until the PATCH finished."""
    await add_running_pool(door, clock, "batch")
    accepted_cluster(await patch_pool(door, "batch", {"count": 2}))
    problem(await delete_pool(door, "batch"), 409, "R-OP-01")
    r = await door.get(pools_url(), headers=ADMIN)
    assert any(i["name"] == "batch" and i["lifecycle"] == "active" for i in r.json()["items"])
    r = await door.get(cluster_url(), headers=ADMIN)
    assert r.status_code == 200
