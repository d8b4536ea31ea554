"""Cluster phase and concurrency: R-PHASE-01..02, R-OP-01..03."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx2
import pytest

from backend_client.models import NodePool
from reference_backend import seed
from reference_backend.clock import ManualClock
from tests.reference_backend.rules_helpers import (
    ADMIN,
    CID,
    LABELS_ONLY_S,
    MEMBER,
    PENDING_CID,
    SETTLE_S,
    WORKER_RUNNING_S,
    accepted_cluster,
    add_pool,
    cluster_url,
    delete_pool,
    fund,
    get_pool,
    get_state,
    make_cluster,
    nodes_url,
    patch_pool,
    pools_url,
    problem,
    replace_node,
    set_phase,
)

pytestmark = pytest.mark.anyio

NOT_PROVISIONED = ["Provisioning", "ControlPlaneReady", "NodesReady", "Deprovisioning"]

Mutation = Callable[[httpx2.AsyncClient], Awaitable[httpx2.Response]]


async def _add(door: httpx2.AsyncClient) -> httpx2.Response:
    return await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge"})


async def _patch(door: httpx2.AsyncClient) -> httpx2.Response:
    return await patch_pool(door, "workers", {"count": 3})


async def _delete(door: httpx2.AsyncClient) -> httpx2.Response:
    return await delete_pool(door, "workers")


async def _replace(door: httpx2.AsyncClient) -> httpx2.Response:
    return await replace_node(door, seed.DEMO_NODE_NAME)


MUTATIONS = {"add": _add, "patch": _patch, "delete": _delete, "replace-node": _replace}


# --- R-PHASE-01 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", NOT_PROVISIONED)
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
async def test_r_phase_01_mutation_outside_provisioned_is_409(
    door: httpx2.AsyncClient, phase: str, mutation: str
) -> None:
    """R-PHASE-01: every mutation → 409 unless the phase is Provisioned (earlier and teardown phases alike)."""
    await fund(door)
    await set_phase(door, phase)
    problem(await MUTATIONS[mutation](door), 409, "R-PHASE-01")
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.count == 2 and pool.lifecycle == "active"
    assert await get_pool(door, "batch") is None


async def test_r_phase_01_seeded_pending_cluster_refuses_a_patch(door: httpx2.AsyncClient) -> None:
    """R-PHASE-01: payments-staging (NodesReady) refuses a PATCH with 409."""
    r = await door.get(pools_url(PENDING_CID), headers=ADMIN)
    assert r.status_code == 200, r.text
    name = r.json()["items"][0]["name"]
    problem(await patch_pool(door, name, {"count": 3}, cid=PENDING_CID), 409, "R-PHASE-01")


async def test_r_phase_01_provisioned_again_accepts_the_mutation(door: httpx2.AsyncClient) -> None:
    """R-PHASE-01: once the phase is back to Provisioned the same PATCH → 202."""
    await fund(door)
    await set_phase(door, "NodesReady")
    problem(await _patch(door), 409, "R-PHASE-01")
    await set_phase(door, "Provisioned")
    assert (await _patch(door)).status_code == 202


# --- R-PHASE-02 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("pool", [None, "workers"])
async def test_r_phase_02_node_reads_are_409_until_provisioned(door: httpx2.AsyncClient, pool: str | None) -> None:
    """R-PHASE-02: node list reads answer 409 "cluster not ready yet" before Provisioned."""
    await set_phase(door, "NodesReady")
    body = problem(await door.get(nodes_url(pool=pool), headers=MEMBER), 409, {"R-PHASE-02", "R-NODE-05"})
    assert "not ready" in (body.detail or "").lower(), body


async def test_r_phase_02_pool_list_and_cluster_read_are_200_in_any_phase(door: httpx2.AsyncClient) -> None:
    """R-PHASE-02: pool list and get cluster answer 200 whatever the phase."""
    for phase in ["Provisioning", "ControlPlaneReady", "NodesReady", "Deprovisioning", "Provisioned"]:
        await set_phase(door, phase)
        r = await door.get(pools_url(), headers=MEMBER)
        assert r.status_code == 200, (phase, r.text)
        r = await door.get(cluster_url(), headers=MEMBER)
        assert r.status_code == 200, (phase, r.text)
        assert r.json()["phase"] == phase


async def test_r_phase_02_seeded_pending_cluster_lists_pools_but_not_nodes(door: httpx2.AsyncClient) -> None:
    """R-PHASE-02: payments-staging lists its pools (200) but not its nodes (409)."""
    r = await door.get(pools_url(PENDING_CID), headers=ADMIN)
    assert r.status_code == 200, r.text
    problem(await door.get(nodes_url(PENDING_CID), headers=ADMIN), 409, {"R-PHASE-02", "R-NODE-05"})


# --- R-OP-01 -------------------------------------------------------------------------------------


async def test_r_op_01_second_patch_while_the_first_runs_is_409(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-OP-01: a PATCH on a pool whose scale-up is still running → 409; the first one wins."""
    await fund(door)
    accepted_cluster(await patch_pool(door, "workers", {"count": 3}))
    problem(await patch_pool(door, "workers", {"count": 5}), 409, "R-OP-01")
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.count == 3


async def test_r_op_01_delete_while_an_operation_runs_is_409(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-OP-01: a DELETE on a pool whose previous operation is still running → 409."""
    await fund(door)
    cid = (
        await make_cluster(
            door,
            "ledger",
            [{"name": "a", "size": "dks.c5.xlarge", "count": 1}, {"name": "b", "size": "dks.c5.xlarge", "count": 1}],
        )
    ).id
    accepted_cluster(await patch_pool(door, "a", {"count": 2}, cid=cid))
    problem(await delete_pool(door, "a", cid=cid), 409, "R-OP-01")


async def test_r_op_01_pool_accepts_again_once_the_operation_finished(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-OP-01: after the scale-up finished (workers Running) the next PATCH → 202."""
    await fund(door)
    accepted_cluster(await patch_pool(door, "workers", {"count": 3}))
    clock.advance(WORKER_RUNNING_S + 10)
    state = await get_state(door)
    assert not state.running(), state.operations
    accepted_cluster(await patch_pool(door, "workers", {"count": 4}))


async def test_r_op_01_labels_only_patch_blocks_for_its_short_operation(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-OP-01: even a labels-only PATCH is an operation (1 s); right after it → 409, later → 202."""
    accepted_cluster(await patch_pool(door, "workers", {"labels": {"a": "1"}}))
    problem(await patch_pool(door, "workers", {"labels": {"a": "2"}}), 409, "R-OP-01")
    clock.advance(LABELS_ONLY_S + 1)
    accepted_cluster(await patch_pool(door, "workers", {"labels": {"a": "2"}}))


# --- R-OP-02 -------------------------------------------------------------------------------------


async def test_r_op_02_different_pools_change_in_parallel(door: httpx2.AsyncClient) -> None:
    """R-OP-02: a PATCH on pool a and one on pool b, both while the other runs → both 202."""
    await fund(door)
    cluster = await make_cluster(
        door,
        "ledger",
        [{"name": "a", "size": "dks.c5.xlarge", "count": 1}, {"name": "b", "size": "dks.c5.xlarge", "count": 1}],
    )
    accepted_cluster(await patch_pool(door, "a", {"count": 2}, cid=cluster.id))
    after = accepted_cluster(await patch_pool(door, "b", {"count": 3}, cid=cluster.id))
    counts = {p.name: p.count for p in after.node_pools}
    assert counts == {"a": 2, "b": 3}
    running = {op.target for op in (await get_state(door, cluster.id)).running()}
    assert {"a", "b"} <= running


async def test_r_op_02_adding_a_pool_while_another_pool_scales_is_accepted(door: httpx2.AsyncClient) -> None:
    """R-OP-02: scaling `workers` does not block adding `batch` on the same cluster."""
    await fund(door)
    accepted_cluster(await patch_pool(door, "workers", {"count": 3}))
    cluster = accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge"}))
    assert cluster.pool("batch") is not None


# --- R-OP-03 -------------------------------------------------------------------------------------


async def test_r_op_03_state_lists_a_running_then_succeeded_pool_operation(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-OP-03: after a PATCH, state shows a pool.update on `workers`, running, phase Provisioned; later succeeded."""
    await fund(door)
    started = clock.now()
    accepted_cluster(await patch_pool(door, "workers", {"count": 3}))
    state = await get_state(door)
    assert state.cluster_id == CID
    assert state.phase == "Provisioned"
    ops = [op for op in state.operations if op.target == "workers"]
    assert len(ops) == 1, state.operations
    op = ops[0]
    assert op.kind == "pool.update"
    assert op.status == "running"
    assert op.started_at == started
    assert op.finished_at is None and op.error is None

    clock.advance(SETTLE_S)
    state = await get_state(door)
    assert state.phase == "Provisioned"
    done = next(o for o in state.operations if o.id == op.id)
    assert done.status == "succeeded"
    assert done.finished_at is not None and done.finished_at > done.started_at
    assert done.error is None


async def test_r_op_03_add_and_delete_show_as_their_own_kinds(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-OP-03: pool.create for an add, pool.delete for a removal, each naming its pool."""
    await fund(door)
    accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge"}))
    kinds = {(op.kind, op.target) for op in (await get_state(door)).operations}
    assert ("pool.create", "batch") in kinds
    clock.advance(SETTLE_S)
    assert (await delete_pool(door, "batch")).status_code == 202
    state = await get_state(door)
    delete_op = next(op for op in state.operations if op.kind == "pool.delete")
    assert delete_op.target == "batch" and delete_op.status == "running"
    assert state.phase == "Provisioned"


async def test_r_op_03_pool_list_still_shows_the_pool_during_its_operation(door: httpx2.AsyncClient) -> None:
    """R-OP-03: while the operation runs the pool is listed with its new declared values."""
    await fund(door)
    accepted_cluster(await patch_pool(door, "workers", {"count": 3}))
    r = await door.get(pools_url(), headers=ADMIN)
    items = [NodePool.model_validate(i) for i in r.json()["items"]]
    assert [(p.name, p.count, p.lifecycle) for p in items] == [("workers", 3, "active")]
