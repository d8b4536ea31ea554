"""R-OP-01 / R-OP-02 under concurrency: the check and the change are one atomic step."""

from __future__ import annotations

import anyio
import httpx2
import pytest

from reference_backend import seed
from tests.conftest import ADMIN_TOKEN, auth

pytestmark = pytest.mark.anyio

ADMIN = auth(seed.DEMO_ADMIN_TOKEN)
CLUSTER = f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}"


async def test_fifty_concurrent_patches_of_one_pool_yield_one_202_and_forty_nine_409(door: httpx2.AsyncClient) -> None:
    """R-OP-01: exactly one PATCH wins; every other one meets the running operation."""
    statuses: list[int] = []
    rules: list[str | None] = []

    async def patch(count: int) -> None:
        response = await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"count": count})
        statuses.append(response.status_code)
        if response.status_code != 202:
            rules.append(response.json()["rule"])

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            for index in range(50):
                group.start_soon(patch, 3 + index % 5)
    assert sorted(statuses) == [202] + [409] * 49
    assert set(rules) == {"R-OP-01"}
    state = (await door.get(f"{CLUSTER}/state", headers=ADMIN)).json()
    assert len(state["operations"]) == 1


async def test_fifty_concurrent_patches_with_a_latency_fault_still_yield_one_202(door: httpx2.AsyncClient) -> None:
    """R-OP-01: even when every request waits (fault latency) before the change, only one is accepted."""
    fault = {
        "route": "PATCH /v1/public/clusters/{cluster_id}/node-pools/{pool_name}",
        "status": None,
        "latency_ms": 20,
        "count": None,
    }
    await door.post("/_reference/faults", headers=auth(ADMIN_TOKEN), json=fault)
    statuses: list[int] = []

    async def patch() -> None:
        statuses.append(
            (await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"count": 3})).status_code
        )

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            for _ in range(50):
                group.start_soon(patch)
    assert sorted(statuses) == [202] + [409] * 49


async def test_concurrent_patches_of_two_pools_are_both_accepted(door: httpx2.AsyncClient) -> None:
    """R-OP-02: operations on different pools run in parallel."""
    await door.post(f"{CLUSTER}/node-pools", headers=ADMIN, json={"name": "batch", "size": "dks.c5.large"})
    await door.put("/_reference/clock", headers=auth(ADMIN_TOKEN), json={"now": "2026-10-01T12:10:00Z"})
    statuses: dict[str, int] = {}

    async def patch(pool: str) -> None:
        statuses[pool] = (
            await door.patch(f"{CLUSTER}/node-pools/{pool}", headers=ADMIN, json={"count": 3})
        ).status_code

    async with anyio.create_task_group() as group:
        group.start_soon(patch, "workers")
        group.start_soon(patch, "batch")
    assert statuses == {"workers": 202, "batch": 202}
    state = (await door.get(f"{CLUSTER}/state", headers=ADMIN)).json()
    assert sorted(o["pool"] for o in state["operations"] if o["status"] == "running") == ["batch", "workers"]
