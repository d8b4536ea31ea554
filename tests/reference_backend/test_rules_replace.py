"""Replace a node (DELETE /clusters/{id}/nodes/{node_name} → 202): R-RNODE-01..05."""

from __future__ import annotations

import httpx2
import pytest

from backend_client.models import NODE_SCHEMA, NodeDeletePending
from reference_backend import seed
from reference_backend.clock import ManualClock
from tests.reference_backend.rules_helpers import (
    CID,
    PENDING_CID,
    SETTLE_S,
    UNKNOWN_NODE_FAILS_S,
    get_pool,
    get_state,
    patch_pool,
    problem,
    replace_node,
    set_phase,
    settled_nodes,
)

pytestmark = pytest.mark.anyio


# --- R-RNODE-01 ----------------------------------------------------------------------------------


async def test_r_rnode_01_accepted_body_names_the_node(door: httpx2.AsyncClient) -> None:
    """R-RNODE-01: 202 with {schema_version "node.public.v1", cluster_id, node_name}."""
    r = await replace_node(door, seed.DEMO_NODE_NAME)
    assert r.status_code == 202, r.text
    body = r.json()
    assert {k: body[k] for k in ("schema_version", "cluster_id", "node_name")} == {
        "schema_version": NODE_SCHEMA,
        "cluster_id": CID,
        "node_name": seed.DEMO_NODE_NAME,
    }
    NodeDeletePending.model_validate(body)


# --- R-RNODE-02 ----------------------------------------------------------------------------------


async def test_r_rnode_02_replacement_gets_a_new_name_and_the_count_stays(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-RNODE-02: the declared count stays 2; the old name disappears and a new Running worker takes its place."""
    before = await settled_nodes(door, clock, pool="workers")
    old_names = {n.name for n in before.items}
    assert seed.DEMO_NODE_NAME in old_names and len(old_names) == 2

    assert (await replace_node(door, seed.DEMO_NODE_NAME)).status_code == 202
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.count == 2

    clock.advance(SETTLE_S)
    after = await settled_nodes(door, clock, pool="workers")
    names = {n.name for n in after.items}
    assert len(after.items) == 2, after.items
    assert seed.DEMO_NODE_NAME not in names
    assert len(names & old_names) == 1
    (new_name,) = names - old_names
    assert new_name.startswith("payments-prod-workers-")
    assert all(n.status == "Running" and n.ready for n in after.items), after.items
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.count == 2


async def test_r_rnode_02_replacement_is_a_node_operation(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-RNODE-02: state shows a node.replace on the node, running then succeeded."""
    assert (await replace_node(door, seed.DEMO_NODE_NAME)).status_code == 202
    op = next(o for o in (await get_state(door)).operations if o.kind == "node.replace")
    assert op.target == seed.DEMO_NODE_NAME and op.status == "running"
    clock.advance(SETTLE_S)
    done = next(o for o in (await get_state(door)).operations if o.id == op.id)
    assert done.status == "succeeded" and done.error is None


# --- R-RNODE-03 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["Payments-prod-workers-abc12", "node_1", "-node", "node-", "node.", "a", "n" * 255, "node%20one"],
)
async def test_r_rnode_03_bad_node_name_is_400(door: httpx2.AsyncClient, name: str) -> None:
    """R-RNODE-03: a name not matching ^[a-z0-9][-a-z0-9.]{0,252}[a-z0-9]$ → 400."""
    problem(await replace_node(door, name), 400, "R-RNODE-03")


@pytest.mark.parametrize("encoded", ["node%0A", "payments-prod-workers-abc12%0A", "node%0D%0A"])
async def test_r_rnode_03_a_node_name_ending_in_a_newline_is_400(door: httpx2.AsyncClient, encoded: str) -> None:
    """R-RNODE-03: the whole name must match; `node%0A` (a trailing newline) is 400, not a 202
    that fails later, and starts no operation."""
    problem(await replace_node(door, encoded), 400, "R-RNODE-03")
    assert (await get_state(door)).operations == []


@pytest.mark.parametrize("name", ["ab", "ip-10-0-0-1.eu-west-1.compute.internal", "n" * 254])
async def test_r_rnode_03_well_formed_names_are_accepted(door: httpx2.AsyncClient, name: str) -> None:
    """R-RNODE-03: names matching the pattern (2 to 254 chars, dots allowed inside) → 202."""
    r = await replace_node(door, name)
    assert r.status_code == 202, r.text


async def test_r_rnode_03_bad_name_is_checked_before_the_phase(door: httpx2.AsyncClient) -> None:
    """R-RNODE-03: on a cluster that is not Provisioned a bad name is still 400 (body before phase)."""
    problem(await replace_node(door, "Bad_Name", cid=PENDING_CID), 400, "R-RNODE-03")


# --- R-RNODE-04 ----------------------------------------------------------------------------------


async def test_r_rnode_04_unknown_name_is_accepted_then_fails(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-RNODE-04: a well-formed unknown name → 202, then a failed node.replace operation; nodes unchanged."""
    before = await settled_nodes(door, clock)
    r = await replace_node(door, "ghost-node-1")
    assert r.status_code == 202, r.text
    assert r.json()["node_name"] == "ghost-node-1"

    state = await get_state(door)
    op = next(o for o in state.operations if o.target == "ghost-node-1")
    assert op.kind == "node.replace" and op.status == "running"

    clock.advance(UNKNOWN_NODE_FAILS_S + 1)
    state = await get_state(door)
    failed = next(o for o in state.operations if o.id == op.id)
    assert failed.status == "failed"
    assert failed.error, failed
    assert failed.finished_at is not None
    assert state.phase == "Provisioned"

    after = await settled_nodes(door, clock)
    assert sorted((n.name, n.status) for n in after.items) == sorted((n.name, n.status) for n in before.items)


# --- R-RNODE-05 ----------------------------------------------------------------------------------


async def test_r_rnode_05_second_delete_of_the_same_node_is_409(door: httpx2.AsyncClient) -> None:
    """R-RNODE-05: another delete for a node whose delete is in flight → 409."""
    assert (await replace_node(door, seed.DEMO_NODE_NAME)).status_code == 202
    problem(await replace_node(door, seed.DEMO_NODE_NAME), 409, "R-RNODE-05")


async def test_r_rnode_05_unknown_name_in_flight_is_409_too(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-RNODE-05: while an unknown name's delete is in flight, the same name again → 409; once it failed → 202."""
    assert (await replace_node(door, "ghost-node-1")).status_code == 202
    problem(await replace_node(door, "ghost-node-1"), 409, "R-RNODE-05")
    clock.advance(UNKNOWN_NODE_FAILS_S + 1)
    assert (await replace_node(door, "ghost-node-1")).status_code == 202


@pytest.mark.parametrize("phase", ["NodesReady", "Deprovisioning"])
async def test_r_rnode_05_not_provisioned_is_409(door: httpx2.AsyncClient, phase: str) -> None:
    """R-RNODE-05: a node delete while the cluster is not Provisioned → 409."""
    await set_phase(door, phase)
    problem(await replace_node(door, seed.DEMO_NODE_NAME), 409, {"R-PHASE-01", "R-RNODE-05"})


async def test_r_rnode_05_seeded_pending_cluster_is_409(door: httpx2.AsyncClient) -> None:
    """R-RNODE-05: payments-staging (NodesReady) refuses a node delete with 409."""
    problem(await replace_node(door, "some-node", cid=PENDING_CID), 409, {"R-PHASE-01", "R-RNODE-05"})


async def test_r_rnode_05_a_node_already_draining_from_a_scale_down_is_409(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-RNODE-05 (decision): a worker a scale-down is draining is being deleted; replacing it → 409."""
    before = await settled_nodes(door, clock, pool="workers")
    newest = next(n.name for n in before.items if n.name != seed.DEMO_NODE_NAME)  # scale-down drains the newest
    assert (await patch_pool(door, "workers", {"count": 1})).status_code == 202
    problem(await replace_node(door, newest), 409, "R-RNODE-05")
    assert (await replace_node(door, seed.DEMO_NODE_NAME)).status_code == 202  # the one that stays
