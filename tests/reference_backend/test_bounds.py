"""Bounds that keep one request's cost flat at scale (issue 10), pinned by mechanism, not by timing.

R-OP-03's history is bounded (decision): every running operation and the most recent
``KEPT_FINISHED_OPERATIONS`` finished ones are kept, in memory and in the state file. Worker
launches are spread (decision): at most ``LAUNCHES_PER_SECOND`` new workers of a cluster leave
Pending at one simulated instant, so scaling 200 pools at once never lands on one request.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from contextlib import closing
from datetime import datetime
from pathlib import Path

from backend_client.models import PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from reference_backend import seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.simulation import LAUNCHES_PER_SECOND, PENDING_SECONDS
from reference_backend.world import KEPT_FINISHED_OPERATIONS, Cluster
from tests.reference_backend.test_scaling import assert_indexes_match_the_records, demo_cluster


def relabel(backend: ReferenceBackend, cluster: Cluster, rounds: int, step: float = 2) -> list[str]:
    """``rounds`` labels-only PATCHes of the demo pool, each run to completion; their operation ids."""
    ids = []
    for round_ in range(rounds):
        backend.patch_pool(cluster, "workers", PublicNodePoolPatchRequest(labels={"round": str(round_)}))
        ids.append(next(reversed(cluster.running)))
        backend.clock.advance(step)  # type: ignore[attr-defined]
        backend.now()
    return ids


def stored_operation_ids(state: Path) -> set[str]:
    with closing(sqlite3.connect(state)) as db:
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        assert "operations" in tables, tables
        return {key for (key,) in db.execute("SELECT key FROM operations")}


def test_the_state_keeps_running_operations_and_the_most_recent_finished_ones(tmp_path: Path) -> None:
    state = tmp_path / "door.sqlite"
    backend = ReferenceBackend(ManualClock(), state_path=state)
    cluster = demo_cluster(backend)
    ids = relabel(backend, cluster, KEPT_FINISHED_OPERATIONS + 5)
    backend.patch_pool(cluster, "workers", PublicNodePoolPatchRequest(count=3))  # one still running
    running = next(reversed(cluster.running))

    listed = [op["id"] for op in backend.state_body(cluster)["operations"]]
    kept = ids[-KEPT_FINISHED_OPERATIONS:]
    assert listed == [running, *reversed(kept)]
    assert stored_operation_ids(state) == {running, *kept}  # forgotten rows are deleted too
    assert_indexes_match_the_records(cluster)
    backend.close()

    reloaded = ReferenceBackend(ManualClock(), state_path=state)
    assert [op["id"] for op in reloaded.state_body(demo_cluster(reloaded))["operations"]] == listed
    reloaded.clock.advance(300)  # type: ignore[attr-defined]
    reloaded.now()
    after = [op["id"] for op in reloaded.state_body(demo_cluster(reloaded))["operations"]]
    assert after == listed[:-1]  # the scale-up finished, so the oldest kept one is forgotten
    assert stored_operation_ids(state) == set(after)
    reloaded.close()


def test_a_running_operation_is_never_forgotten(clock: ManualClock) -> None:
    """A pool.create (120 s) outlives more than ``KEPT_FINISHED_OPERATIONS`` one-second operations."""
    backend = ReferenceBackend(clock)
    backend.set_credit(seed.DEMO_ORGANISATION, 1e9)
    cluster = demo_cluster(backend)
    backend.add_pool(cluster, PublicNodePoolCreateRequest(name="slow", size="dks.c5.large", count=1))
    slow = next(reversed(cluster.running))
    ids = relabel(backend, cluster, KEPT_FINISHED_OPERATIONS + 1, step=1)
    listed = {op["id"]: op["status"] for op in backend.state_body(cluster)["operations"]}
    assert listed[slow] == "running"
    assert ids[0] not in listed and len(listed) == 1 + KEPT_FINISHED_OPERATIONS + len(cluster.running) - 1


def pending_launches(cluster: Cluster) -> Counter[datetime]:
    """When each Pending worker leaves Pending, counted by instant."""
    return Counter(
        w.next_at for p in cluster.pools.values() for w in p.workers.values() if w.status == "Pending" and w.next_at
    )


def test_scaling_many_pools_at_once_spreads_the_launches_over_simulated_seconds(tmp_path: Path) -> None:
    state = tmp_path / "door.sqlite"
    clock = ManualClock()
    backend = ReferenceBackend(clock, state_path=state)
    backend.set_credit(seed.DEMO_ORGANISATION, 1e12)
    pools = LAUNCHES_PER_SECOND // 200 + 2
    backend.install_cluster(
        name="big",
        organisation=seed.DEMO_ORGANISATION,
        cluster_id="big",
        pools=[PublicNodePoolCreateRequest(name=f"p{i}", size="dks.c5.large", count=1) for i in range(pools)],
    )
    cluster = backend.cluster("big")
    assert cluster is not None
    start = backend.now()
    for i in range(pools):
        backend.patch_pool(cluster, f"p{i}", PublicNodePoolPatchRequest(count=200))
    launches = pending_launches(cluster)
    assert sum(launches.values()) == pools * 199
    assert max(launches.values()) <= LAUNCHES_PER_SECOND  # never all at one instant
    first = start.timestamp() + PENDING_SECONDS
    assert sorted(t.timestamp() - first for t in launches) == [0, 1]
    backend.close()

    # The launch second is derived from the state file: a reload hands out the same seconds.
    again = ReferenceBackend(ManualClock(), state_path=state)
    big = again.cluster("big")
    assert big is not None
    again.add_pool(big, PublicNodePoolCreateRequest(name="more", size="dks.c5.large", count=200))
    spread = pending_launches(big)
    assert max(spread.values()) <= LAUNCHES_PER_SECOND
    assert sum(spread.values()) == pools * 199 + 200
    again.close()
