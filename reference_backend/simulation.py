"""The passing of simulated time: the event heap, the worker lifecycle, operations, and names.

Time is handled lazily: every transition a worker, operation or inventory refresh will make is an
event on a time-ordered heap, and the events due up to ``clock.now()`` are applied, in order and at
their own instant, before any request is answered. No background task runs, so a ``ManualClock``
fully controls the world and tests never sleep.

Size (200 pools × 200 workers): an event costs O(1), never a walk of the cluster's history. The
running operations are indexed by pool (``Cluster.running_by_pool``), each pool counts its workers
by status (``Pool.status_counts``), operations are kept in ``seq`` order, and a snapshot groups
its nodes by pool once. All of it is derived: a load rebuilds it, and the heap, from the state.

Decision (R-OP-01, R-RNODE-02): a running ``node.replace`` counts as an operation of its pool, so a
PATCH or DELETE of that pool answers 409 until the replacement is Running; replacing a node while a
pool operation runs is allowed (only R-RNODE-05 refuses a node delete).
"""

from __future__ import annotations

import hashlib
import heapq
import uuid
from collections import Counter
from datetime import datetime, timedelta
from typing import Final, Literal

from backend_client.models import MachineTier, OperationKind
from reference_backend.clock import Clock
from reference_backend.persistence import PersistentWorld
from reference_backend.store import Store
from reference_backend.world import Cluster, Operation, Pool, Snapshot, Worker

# Simulated durations (seconds of the backend clock), docs/contracts.md.
PENDING_SECONDS: Final = 10.0
PROVISIONING_SECONDS: Final = 90.0
JOIN_TO_READY_SECONDS: Final = 20.0
DRAIN_SECONDS: Final = 30.0
MIN_POOL_OPERATION_SECONDS: Final = 1.0
UNKNOWN_NODE_FAIL_SECONDS: Final = 5.0
INVENTORY_TTL_SECONDS: Final = 30.0
INVENTORY_REFRESH_SECONDS: Final = 2.0
# Decision: Door launches at most this many new workers per cluster per simulated second; the
# rest wait, Pending, for a later second. Scaling 200 pools at once then spreads 40,000 workers
# over 40 s instead of changing them all at one instant, so no single request applies them all.
LAUNCHES_PER_SECOND: Final = 1000

_NAME_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"

# A heap entry: (when, sequence, kind, cluster id, first ref, second ref).
Event = tuple[datetime, int, str, str, str, str]


def seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


class Simulation(PersistentWorld):
    """The world as time moves it: ``now()`` applies every event due, each at its own instant."""

    def __init__(self, clock: Clock, store: Store, catalog: dict[str, MachineTier], rng_seed: int) -> None:
        super().__init__(clock, store, catalog, rng_seed)
        self._events: list[Event] = []
        self._event_seq = 0

    # --- time and events -----------------------------------------------------------------------

    def now(self) -> datetime:
        """The simulated time after applying every event due by now (and committing what changed)."""
        target = max(self.clock.now(), self._now)
        while self._events and self._events[0][0] <= target:
            when, _, kind, cluster_id, first, second = heapq.heappop(self._events)
            self._now = max(self._now, when)
            cluster = self._clusters.get(cluster_id)
            if cluster is None:
                continue
            if kind == "worker":
                self._worker_event(cluster, first, second, when)
            elif kind == "operation":
                self._operation_event(cluster, first, when)
            elif kind == "inventory":
                self._inventory_event(cluster, when)
        self._now = target
        self.commit()
        return self._now

    def _schedule(self, when: datetime, kind: str, cluster_id: str, first: str = "", second: str = "") -> None:
        self._event_seq += 1
        heapq.heappush(self._events, (when, self._event_seq, kind, cluster_id, first, second))

    def _worker_event(self, cluster: Cluster, pool_id: str, worker_id: str, when: datetime) -> None:
        pool = cluster.pools.get(pool_id)
        worker = pool.workers.get(worker_id) if pool is not None else None
        if pool is None or worker is None or worker.next_at != when:
            return  # superseded: the worker changed course or is gone
        if worker.status == "Pending":
            pool.set_status(worker, "Provisioning")
            worker.next_at = when + seconds(PROVISIONING_SECONDS)
        elif worker.status == "Provisioning":
            # Joining the cluster gives the worker its kubectl name (R-NODE-06).
            pool.set_status(worker, "Provisioned")
            worker.next_at = when + seconds(JOIN_TO_READY_SECONDS)
            worker.name = self._node_name(cluster, pool)
            worker.kubernetes_version = cluster.kubernetes_version
        elif worker.status == "Provisioned":
            pool.set_status(worker, "Running")
            worker.next_at = None
        elif worker.status == "Deleting":
            pool.remove_worker(worker_id)
            cluster.node_names.discard(worker.visible_name)
        if worker.next_at is not None:
            self._schedule(worker.next_at, "worker", cluster.id, pool.id, worker.id)
        self._touch("pools", pool.id)
        self._settle(cluster, pool.id)

    def _operation_event(self, cluster: Cluster, operation_id: str, when: datetime) -> None:
        operation = cluster.operations.get(operation_id)
        if operation is not None and operation.status == "running" and operation.due_at == when:
            self._evaluate(cluster, operation)

    def _inventory_event(self, cluster: Cluster, when: datetime) -> None:
        inventory = cluster.inventory
        if inventory.refresh_at != when:
            return
        inventory.refresh_at = None
        if self.inventory_available:
            # The snapshot is the world as it is at the refresh instant (R-NODE-04).
            inventory.snapshot = self._node_items(cluster)
            inventory.taken_at = when
        self._touch("inventory", cluster.id)

    def _settle(self, cluster: Cluster, pool_id: str) -> None:
        """Re-evaluate the running operations of a pool whose workers changed (an index look-up)."""
        for operation in cluster.running_operations_of(pool_id):
            self._evaluate(cluster, operation)

    def _evaluate(self, cluster: Cluster, op: Operation) -> None:
        """Finish an operation at the instant its condition holds; otherwise refresh its progress."""
        now = self._now
        pool = cluster.pools.get(op.pool_id or "")
        due = op.due_at is None or now >= op.due_at
        if op.kind in ("pool.create", "pool.update") and pool is not None:
            running, active, draining = pool.running_count, pool.active_count, pool.draining_count
            op.message = f"{running}/{pool.count} workers Running" + (f", {draining} draining" if draining else "")
            if due and running == active == pool.count and not draining:
                self._finish(cluster, op, "succeeded")
        elif op.kind == "pool.delete" and pool is not None:
            left = len(pool.workers)
            op.message = f"{left} workers left to drain"
            if due and not left:
                # R-DEL-02: the pool disappears from every list once its workers are gone.
                del cluster.pools[pool.id]
                self._pools.pop(pool.id, None)
                self._touch("pools", pool.id)
                self._finish(cluster, op, "succeeded")
        elif op.kind == "node.replace" and op.old_worker_id is None:
            if due:
                # R-RNODE-04: an unknown node name fails asynchronously; the node list is unchanged.
                self._finish(cluster, op, "failed", error=f"node {op.target} was not found in cluster {cluster.name}")
        elif op.kind == "node.replace" and pool is not None:
            new = pool.workers.get(op.new_worker_id or "")
            old_gone = op.old_worker_id not in pool.workers
            op.message = (
                f"replacement {new.visible_name if new else '?'} is {new.status if new else 'gone'}; "
                f"{op.target} is {'gone' if old_gone else 'draining'}"
            )
            if old_gone and new is not None and new.status == "Running":
                self._finish(cluster, op, "succeeded")
        else:
            self._finish(cluster, op, "failed", error="the pool of this operation no longer exists")
        self._touch("operations", op.id)

    def _finish(
        self, cluster: Cluster, op: Operation, status: Literal["succeeded", "failed"], error: str | None = None
    ) -> None:
        op.status, op.finished_at, op.error, op.due_at = status, self._now, error, None
        if error is not None:
            op.message = error
        for forgotten in cluster.operation_finished(op):
            self._forget_operation(forgotten)

    def _queue_inventory_refresh(self, cluster: Cluster) -> None:
        """R-NODE-03/04: a cold or stale read queues one refresh, due ``INVENTORY_REFRESH_SECONDS`` from now."""
        inventory = cluster.inventory
        if inventory.refresh_at is None:
            inventory.refresh_at = self._now + seconds(INVENTORY_REFRESH_SECONDS)
            self._schedule(inventory.refresh_at, "inventory", cluster.id)
            self._touch("inventory", cluster.id)

    def _node_items(self, cluster: Cluster) -> Snapshot:
        return Snapshot(w.to_public(pool.name) for pool in cluster.pools.values() for w in pool.workers.values())

    # --- operations and workers ----------------------------------------------------------------

    def _start(
        self,
        cluster: Cluster,
        kind: OperationKind,
        target: str,
        pool: Pool | None,
        *,
        due: float | None,
        workers: tuple[str, str] | None = None,
    ) -> Operation:
        """Record a running operation (R-OP-03); ``workers`` is (old, new) for a node replacement."""
        seq = self._next_counter()
        op = Operation(
            id=self._new_uuid(),
            seq=seq,
            cluster_id=cluster.id,
            kind=kind,
            target=target,
            pool=pool.name if pool is not None else None,
            pool_id=pool.id if pool is not None else None,
            status="running",
            started_at=self._now,
            due_at=None if due is None else self._now + seconds(due),
            old_worker_id=workers[0] if workers else None,
            new_worker_id=workers[1] if workers else None,
        )
        cluster.add_operation(op)
        self._operations[op.id] = op
        if op.due_at is not None:
            self._schedule(op.due_at, "operation", cluster.id, op.id)
        if pool is not None:
            self._evaluate(cluster, op)
        self._touch("operations", op.id)
        return op

    def _reconcile(self, cluster: Cluster, pool: Pool) -> None:
        """Bring the pool's live workers to its declared count; scale-down drains the newest first."""
        active = sorted(pool.active_workers(), key=lambda w: w.seq)
        for _ in range(pool.count - len(active)):
            self._new_worker(cluster, pool)
        for worker in reversed(active[pool.count :]):
            self._drain(cluster, pool, worker)
        self._touch("pools", pool.id)

    def _new_worker(self, cluster: Cluster, pool: Pool) -> Worker:
        seq = self._next_counter()
        worker = Worker(
            id="worker-" + self._digest("worker").hex()[:8],
            seq=seq,
            status="Pending",
            created_at=self._now,
            next_at=self._launch_second(cluster) + seconds(PENDING_SECONDS),
        )
        pool.add_worker(worker)
        assert worker.next_at is not None
        self._schedule(worker.next_at, "worker", cluster.id, pool.id, worker.id)
        self._touch("pools", pool.id)
        return worker

    def _launch_second(self, cluster: Cluster) -> datetime:
        """The start of the first simulated second, from now on, with a launch left (``LAUNCHES_PER_SECOND``)."""
        if cluster.launch_at is None or cluster.launch_at + seconds(1) <= self._now:
            cluster.launch_at, cluster.launched = self._now, 0
        elif cluster.launched >= LAUNCHES_PER_SECOND:
            cluster.launch_at, cluster.launched = cluster.launch_at + seconds(1), 0
        cluster.launched += 1
        return cluster.launch_at

    def _drain(self, cluster: Cluster, pool: Pool, worker: Worker) -> None:
        pool.set_status(worker, "Deleting")
        worker.deleted_at = self._now  # decision: when the drain started
        worker.next_at = self._now + seconds(DRAIN_SECONDS)
        self._schedule(worker.next_at, "worker", cluster.id, pool.id, worker.id)
        self._touch("pools", pool.id)

    # --- names ---------------------------------------------------------------------------------

    def _next_counter(self) -> int:
        self._counter += 1
        self._touch("meta", "world")
        return self._counter

    def _digest(self, purpose: str) -> bytes:
        return hashlib.sha256(f"{self.rng_seed}:{purpose}:{self._next_counter()}".encode()).digest()

    def _new_uuid(self) -> str:
        return str(uuid.UUID(bytes=self._digest("uuid")[:16], version=4))

    def _node_name(self, cluster: Cluster, pool: Pool) -> str:
        """``<cluster>-<pool>-<5 chars>``, deterministic from ``rng_seed`` and unique in the cluster."""
        while True:
            suffix = "".join(_NAME_ALPHABET[b % len(_NAME_ALPHABET)] for b in self._digest("name")[:5])
            name = f"{cluster.name}-{pool.name}-{suffix}"
            if name not in cluster.node_names:
                cluster.node_names.add(name)
                return name

    def _rebuild_events(self) -> None:
        """Every pending transition is in the state itself; the heap (and the launch second) is derived from it."""
        for cluster in self._clusters.values():
            launches: Counter[datetime] = Counter()
            for pool in cluster.pools.values():
                for worker in pool.workers.values():
                    if worker.next_at is not None:
                        self._schedule(worker.next_at, "worker", cluster.id, pool.id, worker.id)
                        if worker.status == "Pending":
                            launches[worker.next_at - seconds(PENDING_SECONDS)] += 1
            if launches:  # the launch second still being handed out, as _launch_second left it
                cluster.launch_at = max(launches)
                cluster.launched = launches[cluster.launch_at]
            for op in cluster.running_operations():
                if op.due_at is not None:
                    self._schedule(op.due_at, "operation", cluster.id, op.id)
            if cluster.inventory.refresh_at is not None:
                self._schedule(cluster.inventory.refresh_at, "inventory", cluster.id)

    def _wipe(self) -> None:
        super()._wipe()
        self._events.clear()
