"""The simulated world over time: workers, scaling, pool deletion, node replacement, operations."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from reference_backend import seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.world import Worker
from tests.conftest import auth

pytestmark = pytest.mark.anyio

ADMIN = auth(seed.DEMO_ADMIN_TOKEN)
CLUSTER = f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}"


async def pools(door: httpx2.AsyncClient) -> dict[str, dict[str, Any]]:
    response = await door.get(f"{CLUSTER}/node-pools", headers=ADMIN)
    assert response.status_code == 200
    return {p["name"]: p for p in response.json()["items"]}


async def operations(door: httpx2.AsyncClient) -> list[dict[str, Any]]:
    response = await door.get(f"{CLUSTER}/state", headers=ADMIN)
    assert response.status_code == 200
    assert response.json()["phase"] == "Provisioned"  # R-OP-03: the phase stays Provisioned meanwhile
    ops: list[dict[str, Any]] = response.json()["operations"]
    return ops


def workers(backend: ReferenceBackend, pool_name: str) -> list[Worker]:
    cluster = backend.cluster(seed.DEMO_CLUSTER_ID)
    assert cluster is not None
    pool = next(p for p in cluster.pools.values() if p.name == pool_name)
    return sorted(pool.workers.values(), key=lambda w: w.seq)


async def test_a_new_pool_walks_pending_provisioning_provisioned_running(
    door: httpx2.AsyncClient, clock: ManualClock, backend: ReferenceBackend
) -> None:
    """R-ADD-10: the pool appears at once, its workers come up on the simulated clock."""
    response = await door.post(
        f"{CLUSTER}/node-pools", headers=ADMIN, json={"name": "batch", "size": "dks.c5.large", "count": 2}
    )
    assert response.status_code == 202
    assert any(p["name"] == "batch" and p["lifecycle"] == "active" for p in response.json()["node_pools"])
    await door.get(f"{CLUSTER}/state", headers=ADMIN)
    assert [w.status for w in workers(backend, "batch")] == ["Pending", "Pending"]
    assert all(w.name is None for w in workers(backend, "batch"))

    clock.advance(10)
    await operations(door)
    assert [w.status for w in workers(backend, "batch")] == ["Provisioning", "Provisioning"]
    clock.advance(90)
    await operations(door)
    batch = workers(backend, "batch")
    assert [w.status for w in batch] == ["Provisioned", "Provisioned"]
    assert all(
        w.name and w.name.startswith("payments-prod-batch-") and len(w.name) == len("payments-prod-batch-") + 5
        for w in batch
    )
    op = (await operations(door))[0]
    assert (op["kind"], op["status"], op["message"]) == ("pool.create", "running", "0/2 workers Running")

    clock.advance(20)
    op = (await operations(door))[0]
    assert [w.status for w in workers(backend, "batch")] == ["Running", "Running"]
    assert (op["status"], op["message"], op["target"], op["pool"]) == (
        "succeeded",
        "2/2 workers Running",
        "batch",
        "batch",
    )
    assert op["finished_at"] == "2026-10-01T12:02:00Z"


async def test_scale_up_then_down_drains_the_newest_workers_first(
    door: httpx2.AsyncClient, clock: ManualClock, backend: ReferenceBackend
) -> None:
    """R-PATCH-03/R-OP-03: scale-up adds workers, scale-down drains the newest ones (Deleting → gone)."""
    assert (await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"count": 4})).status_code == 202
    clock.advance(120)
    assert (await operations(door))[0]["status"] == "succeeded"
    before = workers(backend, "workers")
    assert len(before) == 4

    assert (await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"count": 2})).status_code == 202
    now = workers(backend, "workers")
    assert [w.status for w in now] == ["Running", "Running", "Deleting", "Deleting"]
    assert now[0].name == seed.DEMO_NODE_NAME
    clock.advance(29)
    assert (await operations(door))[0]["status"] == "running"
    clock.advance(1)
    ops = await operations(door)
    assert [o["status"] for o in ops] == ["succeeded", "succeeded"]
    assert [w.id for w in workers(backend, "workers")] == [w.id for w in before[:2]]


async def test_a_deleted_pool_stays_deleting_until_its_workers_are_gone(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-DEL-02: lifecycle `deleting` while the workers drain, then the pool disappears from every list."""
    await door.post(f"{CLUSTER}/node-pools", headers=ADMIN, json={"name": "batch", "size": "dks.c5.large", "count": 1})
    clock.advance(120)
    response = await door.delete(f"{CLUSTER}/node-pools/batch", headers=ADMIN)
    assert response.status_code == 202
    assert [p["lifecycle"] for p in response.json()["node_pools"] if p["name"] == "batch"] == ["deleting"]
    assert response.json()["total_vcpu"] == 8  # R-CAP-02: only alive pools count
    clock.advance(29)
    assert (await pools(door))["batch"]["lifecycle"] == "deleting"
    clock.advance(1)
    assert "batch" not in await pools(door)
    cluster = (await door.get(CLUSTER, headers=ADMIN)).json()
    assert [p["name"] for p in cluster["node_pools"]] == ["workers"]
    delete = (await operations(door))[0]
    assert (delete["kind"], delete["status"]) == ("pool.delete", "succeeded")


async def test_a_deleting_pool_does_not_block_its_name(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-ADD-02 decision: a pool still `deleting` does not block a new pool of the same name."""
    await door.post(f"{CLUSTER}/node-pools", headers=ADMIN, json={"name": "batch", "size": "dks.c5.large", "count": 1})
    clock.advance(120)
    await door.delete(f"{CLUSTER}/node-pools/batch", headers=ADMIN)
    again = await door.post(
        f"{CLUSTER}/node-pools", headers=ADMIN, json={"name": "batch", "size": "dks.c5.large", "count": 1}
    )
    assert again.status_code == 202
    assert sorted(p["lifecycle"] for p in again.json()["node_pools"] if p["name"] == "batch") == ["active", "deleting"]


async def test_replacing_a_node_keeps_the_count_and_gives_a_new_name(
    door: httpx2.AsyncClient, clock: ManualClock, backend: ReferenceBackend
) -> None:
    """R-RNODE-01/02: 202 with the pending body; the old node drains, a replacement with a new name comes up."""
    response = await door.delete(f"{CLUSTER}/nodes/{seed.DEMO_NODE_NAME}", headers=ADMIN)
    assert response.status_code == 202
    assert response.json() == {
        "schema_version": "node.public.v1",
        "cluster_id": seed.DEMO_CLUSTER_ID,
        "node_name": seed.DEMO_NODE_NAME,
    }
    assert [w.status for w in workers(backend, "workers")] == ["Deleting", "Running", "Pending"]
    assert (await pools(door))["workers"]["count"] == 2
    clock.advance(119)
    op = (await operations(door))[0]
    assert (op["kind"], op["target"], op["pool"], op["status"]) == (
        "node.replace",
        seed.DEMO_NODE_NAME,
        "workers",
        "running",
    )
    clock.advance(1)
    op = (await operations(door))[0]
    assert op["status"] == "succeeded"
    names = [w.name for w in workers(backend, "workers")]
    assert len(names) == 2 and seed.DEMO_NODE_NAME not in names
    assert all(w.status == "Running" for w in workers(backend, "workers"))


async def test_an_unknown_node_name_is_accepted_and_fails_asynchronously(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-RNODE-04: not a 404; a failed node.replace operation after 5 s, the node list unchanged."""
    response = await door.delete(f"{CLUSTER}/nodes/payments-prod-workers-zzzzz", headers=ADMIN)
    assert response.status_code == 202
    assert (await operations(door))[0]["status"] == "running"
    clock.advance(5)
    op = (await operations(door))[0]
    assert (op["kind"], op["status"], op["pool"]) == ("node.replace", "failed", None)
    assert "not found" in op["error"]
    assert op["finished_at"] == "2026-10-01T12:00:05Z"


async def test_a_second_delete_of_the_same_node_is_409(door: httpx2.AsyncClient) -> None:
    """R-RNODE-05: another delete for the same node in flight → 409."""
    assert (await door.delete(f"{CLUSTER}/nodes/{seed.DEMO_NODE_NAME}", headers=ADMIN)).status_code == 202
    second = await door.delete(f"{CLUSTER}/nodes/{seed.DEMO_NODE_NAME}", headers=ADMIN)
    assert second.status_code == 409
    assert second.json()["rule"] == "R-RNODE-05"


async def test_a_running_node_replacement_blocks_a_patch_of_its_pool(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-OP-01 decision: a node.replace is an operation of its pool until the replacement is Running."""
    await door.delete(f"{CLUSTER}/nodes/{seed.DEMO_NODE_NAME}", headers=ADMIN)
    blocked = await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"count": 3})
    assert (blocked.status_code, blocked.json()["rule"]) == (409, "R-OP-01")
    clock.advance(120)
    assert (await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"count": 3})).status_code == 202


async def test_a_labels_only_patch_is_an_operation_of_one_second(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-PATCH-03/R-OP-03: labels replace the stored map; the operation succeeds after 1 s."""
    response = await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"labels": {"team": "pay"}})
    assert response.status_code == 202
    assert response.json()["node_pools"][0]["labels"] == {"team": "pay"}
    assert (await operations(door))[0]["status"] == "running"
    clock.advance(1)
    op = (await operations(door))[0]
    assert (op["kind"], op["status"], op["message"]) == ("pool.update", "succeeded", "2/2 workers Running")


async def test_operations_are_listed_newest_first(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-OP-03: newest first."""
    await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"tags": {"a": "b"}})
    clock.advance(1)
    await door.post(f"{CLUSTER}/node-pools", headers=ADMIN, json={"name": "batch", "size": "dks.c5.large", "count": 1})
    kinds = [o["kind"] for o in await operations(door)]
    assert kinds == ["pool.create", "pool.update"]


def demo_node_names(rng_seed: int) -> list[str | None]:
    cluster = ReferenceBackend(ManualClock(), rng_seed=rng_seed).cluster(seed.DEMO_CLUSTER_ID)
    assert cluster is not None
    return [w.name for w in cluster.pools[seed.DEMO_POOL_ID].workers.values()]


def test_worker_names_are_deterministic_from_the_rng_seed() -> None:
    """R-NODE-06: names are `<cluster>-<pool>-<5 chars>`, the same for the same rng_seed."""
    assert demo_node_names(7) == demo_node_names(7)
    assert demo_node_names(7) != demo_node_names(8)
