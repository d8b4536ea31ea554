"""The engine's indexes: no worker event or R-OP-01 check scans the cluster's operation history.

Deterministic stand-ins for the benchmark (``benchmarks/provision_large_cluster.py``): the history
is made unscannable and the engine must still run, and the derived indexes (running operations by
pool, worker counts by status, operations in ``seq`` order) must equal a recomputation from the
records, before and after a reload from the state file.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import NoReturn

import pytest

from backend_client.models import PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from reference_backend import seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.errors import Refusal
from reference_backend.world import Cluster, Operation


class UnscannableHistory(dict[str, Operation]):
    """An operations dict that allows look-ups and inserts but fails any walk over it."""

    def _scan(self) -> NoReturn:
        raise AssertionError("the whole operation history was scanned")

    def __iter__(self) -> NoReturn:
        self._scan()

    def __reversed__(self) -> NoReturn:
        self._scan()

    def keys(self) -> NoReturn:
        self._scan()

    def values(self) -> NoReturn:
        self._scan()

    def items(self) -> NoReturn:
        self._scan()


def demo_cluster(backend: ReferenceBackend) -> Cluster:
    cluster = backend.cluster(seed.DEMO_CLUSTER_ID)
    assert cluster is not None
    return cluster


def patch(count: int | None = None, labels: dict[str, str] | None = None) -> PublicNodePoolPatchRequest:
    fields: dict[str, object] = {}
    if count is not None:
        fields["count"] = count
    if labels is not None:
        fields["labels"] = labels
    return PublicNodePoolPatchRequest.model_validate(fields)


def advance_until_idle(backend: ReferenceBackend, clock: ManualClock, cluster: Cluster) -> None:
    for _ in range(400):
        if not cluster.running:
            return
        clock.advance(1)
        backend.now()
    raise AssertionError("operations still running after 400 simulated seconds")


def assert_indexes_match_the_records(cluster: Cluster) -> None:
    ops = list(dict.values(cluster.operations))
    assert [op.seq for op in ops] == sorted(op.seq for op in ops)  # kept oldest first
    running = [op for op in ops if op.status == "running"]
    assert list(cluster.running.values()) == running
    by_pool: dict[str, list[Operation]] = {}
    for op in running:
        if op.pool_id is not None:
            by_pool.setdefault(op.pool_id, []).append(op)
    assert {pool_id: list(of_pool.values()) for pool_id, of_pool in cluster.running_by_pool.items()} == by_pool
    for pool in cluster.pools.values():
        counted = {status: n for status, n in pool.status_counts.items() if n != 0}
        assert counted == Counter(w.status for w in pool.workers.values()), pool.name


def test_worker_events_and_r_op_01_checks_never_walk_the_operation_history(clock: ManualClock) -> None:
    """Scaling up, the R-OP-01 check, node replacements and every worker event use the indexes only."""
    backend = ReferenceBackend(clock)
    backend.set_credit(seed.DEMO_ORGANISATION, 1e9)
    cluster = demo_cluster(backend)
    backend.add_pool(cluster, PublicNodePoolCreateRequest(name="batch", size="dks.c5.large", count=1))
    for round_ in range(5):  # a history of finished operations
        backend.patch_pool(cluster, "workers", patch(labels={"round": str(round_)}))
        advance_until_idle(backend, clock, cluster)
    finished = len(cluster.operations)
    cluster.operations = UnscannableHistory(cluster.operations)

    backend.patch_pool(cluster, "workers", patch(count=6))
    with pytest.raises(Refusal) as busy:
        backend.patch_pool(cluster, "workers", patch(count=7))
    assert busy.value.rule == "R-OP-01"
    backend.replace_node(cluster, seed.DEMO_NODE_NAME)
    backend.replace_node(cluster, "payments-prod-workers-zzzzz")  # unknown: fails asynchronously
    batch = cluster.pool_named("batch")
    assert batch is not None
    backend.delete_pool(cluster, "batch")
    assert len(cluster.running) == 4
    advance_until_idle(backend, clock, cluster)

    assert len(cluster.operations) == finished + 4
    assert cluster.running == {} and cluster.running_by_pool == {}
    cluster.operations = dict(dict.items(cluster.operations))
    statuses = [(op["kind"], op["status"]) for op in backend.state_body(cluster)["operations"][:4]]
    assert statuses == [
        ("pool.delete", "succeeded"),
        ("node.replace", "failed"),
        ("node.replace", "succeeded"),
        ("pool.update", "succeeded"),
    ]
    assert batch.id not in cluster.pools
    assert_indexes_match_the_records(cluster)


def test_the_indexes_are_rebuilt_from_the_state_file(tmp_path: Path) -> None:
    """Operations in flight, finished ones and worker counts survive a reload, indexes included."""
    state = tmp_path / "door.sqlite"
    first = ReferenceBackend(ManualClock(), state_path=state)
    first.set_credit(seed.DEMO_ORGANISATION, 1e9)
    cluster = demo_cluster(first)
    first.add_pool(cluster, PublicNodePoolCreateRequest(name="batch", size="dks.c5.large", count=2))
    for round_ in range(3):
        first.patch_pool(cluster, "workers", patch(labels={"round": str(round_)}))
        first.clock.advance(2)  # type: ignore[attr-defined]
        first.now()
    first.patch_pool(cluster, "workers", patch(count=5))
    first.replace_node(cluster, "payments-prod-workers-zzzzz")
    first.clock.advance(3)  # type: ignore[attr-defined]
    first.now()
    before = first.state_body(cluster)
    assert [op["status"] for op in before["operations"][:2]] == ["running", "running"]
    assert [op.kind for op in cluster.running.values()] == ["pool.create", "pool.update", "node.replace"]
    assert_indexes_match_the_records(cluster)

    clock = ManualClock()
    second = ReferenceBackend(clock, state_path=state)
    reloaded = demo_cluster(second)
    assert second.state_body(reloaded) == before
    assert_indexes_match_the_records(reloaded)
    assert list(reloaded.running) == list(cluster.running)
    assert {p: list(ops) for p, ops in reloaded.running_by_pool.items()} == {
        p: list(ops) for p, ops in cluster.running_by_pool.items()
    }
    for pool_id, pool in cluster.pools.items():
        assert +reloaded.pools[pool_id].status_counts == +pool.status_counts
    with pytest.raises(Refusal) as busy:
        second.patch_pool(reloaded, "workers", patch(count=1))
    assert busy.value.rule == "R-OP-01"

    advance_until_idle(second, clock, reloaded)
    assert reloaded.running == {} and reloaded.running_by_pool == {}
    assert_indexes_match_the_records(reloaded)
    statuses = [op["status"] for op in second.state_body(reloaded)["operations"]]
    assert statuses[:2] == ["failed", "succeeded"] and statuses[-1] == "succeeded"  # the pool.create too
    second.close()
    first.close()


def test_one_pool_s_nodes_are_the_cluster_s_nodes_of_that_pool(clock: ManualClock) -> None:
    """R-NODE-01: the per-pool grouping of a snapshot lists what filtering the whole snapshot would."""
    backend = ReferenceBackend(clock)
    backend.set_credit(seed.DEMO_ORGANISATION, 1e9)
    cluster = demo_cluster(backend)
    backend.add_pool(cluster, PublicNodePoolCreateRequest(name="batch", size="dks.c5.large", count=3))
    backend.nodes_body(cluster)  # cold: queues the first refresh
    clock.advance(5)
    backend.now()
    everything = backend.nodes_body(cluster)["items"]
    assert {n["pool"] for n in everything} == {"workers", "batch"}
    for name in ("workers", "batch"):
        assert backend.nodes_body(cluster, name)["items"] == [n for n in everything if n["pool"] == name]
