"""Capacity totals and the credit gate: R-CAP-01..03, R-CREDIT-01."""

from __future__ import annotations

import httpx2
import pytest

from backend_client.models import MachineTier
from tests.reference_backend.rules_helpers import (
    REF,
    accepted_cluster,
    add_pool,
    catalog,
    fund,
    get_cluster,
    get_pool,
    make_cluster,
    patch_pool,
    problem,
    set_credit,
)

pytestmark = pytest.mark.anyio


def _needed(tier: MachineTier, nodes: int) -> float:
    """R-CREDIT-01: the hourly price of the added nodes × 24 h, in cents as the backend rounds it."""
    return round(tier.price_per_hour * nodes * 24, 2)


# --- R-CAP-01 ------------------------------------------------------------------------------------


async def test_r_cap_01_fixed_pool_counts_its_count(door: httpx2.AsyncClient) -> None:
    """R-CAP-01: without autoscaling, effective nodes = count (demo: 2 × dks.c5.xlarge)."""
    c5 = (await catalog(door))["dks.c5.xlarge"]
    cluster = await get_cluster(door)
    assert cluster.total_vcpu == 2 * c5.vcpu
    assert cluster.total_memory_gib == pytest.approx(2 * c5.memory_gib)
    assert cluster.total_volume_gib == 2 * c5.spec.disk_gib


async def test_r_cap_01_autoscaling_pool_counts_max_nodes(door: httpx2.AsyncClient) -> None:
    """R-CAP-01: autoscaling with max_nodes set → effective nodes = max_nodes (5), not count (2)."""
    await fund(door)
    c5 = (await catalog(door))["dks.c5.xlarge"]
    cluster = accepted_cluster(
        await patch_pool(door, "workers", {"auto_scale": True, "min_nodes": 1, "max_nodes": 5, "count": 2})
    )
    assert cluster.total_vcpu == 5 * c5.vcpu
    assert cluster.total_memory_gib == pytest.approx(5 * c5.memory_gib)
    assert cluster.total_volume_gib == 5 * c5.spec.disk_gib
    assert (await get_cluster(door)).total_vcpu == 5 * c5.vcpu


async def test_r_cap_01_autoscaling_from_zero_counts_max_nodes(door: httpx2.AsyncClient) -> None:
    """R-CAP-01: a pool at count 0 autoscaling up to 3 plans for 3 nodes."""
    await fund(door)
    tiers = await catalog(door)
    c5, m5 = tiers["dks.c5.xlarge"], tiers["dks.m5.xlarge"]
    body = {"name": "burst", "size": "dks.m5.xlarge", "count": 0, "auto_scale": True, "min_nodes": 0, "max_nodes": 3}
    cluster = accepted_cluster(await add_pool(door, body))
    assert cluster.total_vcpu == 2 * c5.vcpu + 3 * m5.vcpu


# --- R-CAP-02 ------------------------------------------------------------------------------------


async def test_r_cap_02_totals_sum_over_alive_pools_of_different_tiers(door: httpx2.AsyncClient) -> None:
    """R-CAP-02: Σ tier vCPU / RAM × effective nodes over every alive pool."""
    tiers = await catalog(door)
    pools = [
        {"name": "web", "size": "dks.c5.large", "count": 3},
        {"name": "mem", "size": "dks.r5.xlarge", "count": 2},
        {"name": "auto", "size": "dks.m5.xlarge", "count": 1, "auto_scale": True, "min_nodes": 1, "max_nodes": 4},
    ]
    cluster = await make_cluster(door, "ledger", pools)
    effective = {"web": 3, "mem": 2, "auto": 4}
    sizes = {p["name"]: p["size"] for p in pools}
    assert cluster.total_vcpu == sum(tiers[sizes[n]].vcpu * k for n, k in effective.items())
    assert cluster.total_memory_gib == pytest.approx(sum(tiers[sizes[n]].memory_gib * k for n, k in effective.items()))
    assert cluster.total_volume_gib == sum(tiers[sizes[n]].spec.disk_gib * k for n, k in effective.items())
    again = await get_cluster(door, cluster.id)
    assert (again.total_vcpu, again.total_memory_gib, again.total_volume_gib) == (
        cluster.total_vcpu,
        cluster.total_memory_gib,
        cluster.total_volume_gib,
    )


async def test_r_cap_02_totals_follow_a_patch(door: httpx2.AsyncClient) -> None:
    """R-CAP-02: scaling `workers` from 2 to 4 doubles the planned vCPU in the 202 body."""
    await fund(door)
    c5 = (await catalog(door))["dks.c5.xlarge"]
    cluster = accepted_cluster(await patch_pool(door, "workers", {"count": 4}))
    assert cluster.total_vcpu == 4 * c5.vcpu


async def test_r_cap_02_unresolvable_size_makes_vcpu_and_memory_null(door: httpx2.AsyncClient) -> None:
    """R-CAP-02: a pool whose size is not in the catalog → total_vcpu and total_memory_gib null."""
    r = await door.post(
        "/_reference/clusters",
        json={
            "name": "legacy",
            "organisation": "payments",
            "node_pools": [
                {"name": "old", "size": "dks.legacy.retired", "count": 1},
                {"name": "new", "size": "dks.c5.xlarge", "count": 1},
            ],
        },
        headers=REF,
    )
    if r.status_code != 201:
        pytest.skip(f"the admin plane refuses an unknown tier ({r.status_code}); R-CAP-02 null case not reachable")
    cluster = await get_cluster(door, r.json()["id"])
    assert cluster.total_vcpu is None
    assert cluster.total_memory_gib is None


# --- R-CAP-03 ------------------------------------------------------------------------------------


async def test_r_cap_03_volume_is_root_volume_times_effective_nodes(door: httpx2.AsyncClient) -> None:
    """R-CAP-03: total_volume_gib = Σ root_volume_size_gib × effective nodes (80×2 + 160×3 + 40×max 4)."""
    await fund(door)
    accepted_cluster(await add_pool(door, {"name": "big", "size": "dks.c5.2xlarge", "count": 3}))
    body = {"name": "small", "size": "dks.c5.large", "count": 1, "auto_scale": True, "max_nodes": 4}
    cluster = accepted_cluster(await add_pool(door, body))
    expected = sum(
        p.root_volume_size_gib * (p.max_nodes if p.auto_scale and p.max_nodes else p.count) for p in cluster.node_pools
    )
    assert cluster.total_volume_gib == expected == 80 * 2 + 160 * 3 + 40 * 4


async def test_r_cap_03_totals_are_planned_not_live(door: httpx2.AsyncClient) -> None:
    """R-CAP-03: right after a scale-up is accepted (no new worker running yet) the totals already count it."""
    await fund(door)
    cluster = accepted_cluster(await patch_pool(door, "workers", {"count": 6}))
    assert cluster.total_volume_gib == 6 * 80


# --- R-CREDIT-01 ---------------------------------------------------------------------------------


async def test_r_credit_01_credit_below_24h_of_added_nodes_is_402(door: httpx2.AsyncClient) -> None:
    """R-CREDIT-01: +1 dks.c5.xlarge needs price × 24 h; a cent less → 402 and nothing changes."""
    c5 = (await catalog(door))["dks.c5.xlarge"]
    await set_credit(door, _needed(c5, 1) - 0.01)
    p = problem(await patch_pool(door, "workers", {"count": 3}), 402, "R-CREDIT-01")
    assert p.detail, p
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.count == 2


async def test_r_credit_01_credit_equal_to_24h_of_added_nodes_is_enough(door: httpx2.AsyncClient) -> None:
    """R-CREDIT-01: refused only when credit is *below* the price × 24 h: exactly that much → 202."""
    c5 = (await catalog(door))["dks.c5.xlarge"]
    await set_credit(door, _needed(c5, 1))
    accepted_cluster(await patch_pool(door, "workers", {"count": 3}))


async def test_r_credit_01_only_the_added_nodes_are_priced(door: httpx2.AsyncClient) -> None:
    """R-CREDIT-01: 2 → 4 needs 2 nodes' worth; credit for 2 (not for 4) → 202."""
    c5 = (await catalog(door))["dks.c5.xlarge"]
    await set_credit(door, _needed(c5, 2))
    accepted_cluster(await patch_pool(door, "workers", {"count": 4}))


async def test_r_credit_01_autoscaling_prices_max_nodes(door: httpx2.AsyncClient) -> None:
    """R-CREDIT-01 with R-CAP-01: turning autoscaling on to max 10 raises effective nodes by 8; credit for 1 → 402."""
    c5 = (await catalog(door))["dks.c5.xlarge"]
    await set_credit(door, _needed(c5, 1))
    body = {"auto_scale": True, "min_nodes": 2, "max_nodes": 10, "count": 2}
    problem(await patch_pool(door, "workers", body), 402, "R-CREDIT-01")
    await set_credit(door, _needed(c5, 8))
    accepted_cluster(await patch_pool(door, "workers", body))


async def test_r_credit_01_new_pool_is_priced_at_its_tier(door: httpx2.AsyncClient) -> None:
    """R-CREDIT-01: adding 3 × dks.r5.xlarge needs 3 × its price × 24 h."""
    r5 = (await catalog(door))["dks.r5.xlarge"]
    body = {"name": "mem", "size": "dks.r5.xlarge", "count": 3}
    await set_credit(door, _needed(r5, 3) - 0.01)
    problem(await add_pool(door, body), 402, "R-CREDIT-01")
    await set_credit(door, _needed(r5, 3))
    accepted_cluster(await add_pool(door, body))


async def test_r_credit_01_lowering_capacity_needs_no_credit(door: httpx2.AsyncClient) -> None:
    """R-CREDIT-01: a change that does not raise effective nodes passes with credit 0."""
    await set_credit(door, 0)
    accepted_cluster(await patch_pool(door, "workers", {"count": 1}))
