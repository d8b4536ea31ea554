"""The simulated Door world and the rules it enforces on every request.

The world changes in two ways: a request (add, patch, delete a pool; replace a node; the admin
plane) and the passing of simulated time. Time is handled lazily: every transition a worker,
operation or inventory refresh will make is an event on a time-ordered heap, and the events due up
to ``clock.now()`` are applied, in order and at their own instant, before any request is answered.
No background task runs, so a ``ManualClock`` fully controls the world and tests never sleep.

Size (200 pools × 200 workers): an event costs O(1), never a walk of the cluster's history. The
running operations are indexed by pool (``Cluster.running_by_pool``), each pool counts its workers
by status (``Pool.status_counts``), operations are kept in ``seq`` order, and a snapshot groups
its nodes by pool once. All of it is derived: ``_load`` rebuilds it, and the heap, from the state.

Every method that checks and then changes the world (``add_pool``, ``patch_pool``, ``delete_pool``,
``replace_node``) is synchronous: the app calls it with no ``await`` in between, so on the single
event loop a check (R-OP-01) and the change it guards are atomic.

Decision (R-OP-01, R-RNODE-02): a running ``node.replace`` counts as an operation of its pool, so a
PATCH or DELETE of that pool answers 409 until the replacement is Running; replacing a node while a
pool operation runs is allowed (only R-RNODE-05 refuses a node delete).
"""

from __future__ import annotations

import hashlib
import heapq
import logging
import re
import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from itertools import islice
from pathlib import Path
from typing import Final, Literal

from typing_extensions import TypedDict  # pydantic reads it on Python 3.11 (the admin view)

from backend_client import rules
from backend_client.models import (
    FieldError,
    MachineTier,
    NodePool,
    OperationKind,
    Phase,
    PublicNodePoolCreateRequest,
    PublicNodePoolPatchRequest,
    TierSpec,
)
from reference_backend import catalog
from reference_backend.clock import AdjustableClock, Clock
from reference_backend.errors import Refusal
from reference_backend.faults import FaultBook
from reference_backend.idempotency import IdempotencyStore, StoredAnswer
from reference_backend.store import Key, MemoryStore, SqliteStore, Store
from reference_backend.world import (
    Cluster,
    Doc,
    Inventory,
    Operation,
    Organisation,
    Pool,
    Principal,
    Role,
    Snapshot,
    Worker,
    iso,
    iso_or_none,
    parse_time,
    token_digest,
)

log = logging.getLogger(__name__)

SeedName = Literal["demo", "empty"]

# Simulated durations (seconds of the backend clock), docs/contracts.md.
PENDING_SECONDS: Final = 10.0
PROVISIONING_SECONDS: Final = 90.0
JOIN_TO_READY_SECONDS: Final = 20.0
DRAIN_SECONDS: Final = 30.0
MIN_POOL_OPERATION_SECONDS: Final = 1.0
UNKNOWN_NODE_FAIL_SECONDS: Final = 5.0
INVENTORY_TTL_SECONDS: Final = 30.0
INVENTORY_REFRESH_SECONDS: Final = 2.0
INVENTORY_RETRY_AFTER_SECONDS: Final = 5

_NAME_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
_TORN_DOWN: Final = frozenset({"Deprovisioned"})
_CLUSTER_ID: Final = re.compile(r"(?!\.\.?\Z)[A-Za-z0-9._~-]{1,128}")  # one URL path segment, not . or ..

# A heap entry: (when, sequence, kind, cluster id, first ref, second ref).
Event = tuple[datetime, int, str, str, str, str]

REQUEST_LOG_SIZE: Final = 10_000


class RequestRecord(TypedDict):
    """One answered request outside the admin plane: never its token, headers or query."""

    seq: int
    method: str
    path: str
    status: int
    idempotency_key: bool


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


class ReferenceBackend:
    """The whole simulated world: organisations, tokens, clusters, pools, workers, operations."""

    def __init__(
        self,
        clock: Clock,
        *,
        seed: SeedName = "demo",
        state_path: Path | None = None,
        rng_seed: int = 0,
    ) -> None:
        self.clock = clock
        self.catalog: dict[str, MachineTier] = dict(catalog.TIERS)
        self.rng_seed = rng_seed
        self.idempotency = IdempotencyStore()
        # Fault rules belong to the world, so every app serving this backend (the embedded one and a
        # test's admin client) injects the same faults.
        self.faults = FaultBook()
        self.inventory_available = True
        # Every request outside the admin plane, as answered (faults included); memory only, kept across resets.
        self.request_log: deque[RequestRecord] = deque(maxlen=REQUEST_LOG_SIZE)
        self._request_seq = 0
        self._store: Store = SqliteStore(state_path) if state_path is not None else MemoryStore()
        self._organisations: dict[str, Organisation] = {}
        self._tokens: dict[str, Principal] = {}  # by token_digest(token), never by the token
        self._clusters: dict[str, Cluster] = {}
        self._pools: dict[str, Pool] = {}
        self._operations: dict[str, Operation] = {}
        self._events: list[Event] = []
        self._event_seq = 0
        self._counter = 0
        self._now = clock.now()
        self._dirty: set[Key] = set()
        self._holding = 0  # nesting depth of ``transaction()``: while > 0, ``commit`` waits
        if self._store.empty:
            self._seed(seed)
        else:
            self._load()
        self.commit()

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
            worker.next_at = when + _seconds(PROVISIONING_SECONDS)
        elif worker.status == "Provisioning":
            # Joining the cluster gives the worker its kubectl name (R-NODE-06).
            pool.set_status(worker, "Provisioned")
            worker.next_at = when + _seconds(JOIN_TO_READY_SECONDS)
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
        cluster.operation_finished(op)

    # --- who asks (steps 2-4 of the order of checks) --------------------------------------------

    def authenticate(self, token: str | None) -> Principal:
        """R-AUTH-01: the principal a bearer token names; 401 when missing or unknown."""
        principal = self._tokens.get(token_digest(token)) if token else None
        if principal is None:
            raise Refusal(
                401,
                "R-AUTH-01: no valid bearer token. Send Authorization: Bearer <token> with a token Door issued.",
                rule="R-AUTH-01",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return principal

    def cluster_for(self, principal: Principal, cluster_id: str) -> Cluster:
        """R-AUTH-04 then R-AUTH-02: 404 for an unknown or torn-down cluster, 403 for a non-member."""
        cluster = self._clusters.get(cluster_id)
        if cluster is None or cluster.phase in _TORN_DOWN:
            raise Refusal(
                404,
                f"R-AUTH-04: no cluster {cluster_id}. List your clusters with GET /v1/public/clusters.",
                rule="R-AUTH-04",
            )
        if cluster.organisation != principal.organisation:
            raise Refusal(
                403,
                "R-AUTH-02: this cluster belongs to another organisation. Use a token of its organisation.",
                rule="R-AUTH-02",
            )
        return cluster

    @staticmethod
    def require_super_admin(principal: Principal) -> None:
        """R-AUTH-03: mutations need role super_admin."""
        if principal.role != "super_admin":
            raise Refusal(
                403,
                f"R-AUTH-03: role {principal.role} cannot change pools or nodes. Ask a super_admin of the organisation.",
                rule="R-AUTH-03",
            )

    # --- reads ---------------------------------------------------------------------------------

    def list_clusters(self, principal: Principal, name: str | None = None) -> Doc:
        items = [
            self.cluster_body(c)
            for c in self._clusters.values()
            if c.organisation == principal.organisation
            and c.phase not in _TORN_DOWN
            and (name is None or c.name == name)
        ]
        return {"schema_version": "cluster.public.v1", "items": items, "total": len(items)}

    def cluster_body(self, cluster: Cluster) -> Doc:
        """R-POOL-03: the cluster, its pools (deleting ones included) and the capacity totals (R-CAP-*)."""
        pools = [p.to_model() for p in cluster.pools.values()]
        totals = rules.capacity(pools, self.catalog)
        return {
            "schema_version": "cluster.public.v1",
            **cluster.doc(),
            "node_pools": [p.model_dump(mode="json") for p in pools],
            "total_vcpu": totals.total_vcpu,
            "total_memory_gib": totals.total_memory_gib,
            "total_volume_gib": totals.total_volume_gib,
        }

    def pools_body(self, cluster: Cluster) -> Doc:
        """R-POOL-01: the pool list envelope, 200 in any phase (R-PHASE-02)."""
        items = [p.to_public() for p in cluster.pools.values()]
        return {"schema_version": "nodepool.public.v1", "cluster_id": cluster.id, "items": items, "total": len(items)}

    def state_body(self, cluster: Cluster) -> Doc:
        """R-OP-03: the phase and every operation, newest first."""
        operations = reversed(cluster.operations.values())  # kept in seq order (Cluster.add_operation)
        return {
            "schema_version": "clusterstate.public.v1",
            "cluster_id": cluster.id,
            "phase": cluster.phase,
            "operations": [op.to_public() for op in operations],
        }

    def nodes_body(self, cluster: Cluster, pool_name: str | None = None) -> Doc:
        """R-NODE-01..05: the best-known snapshot of the cluster's workers, with its freshness.

        Raises 409 before Provisioned (R-PHASE-02), 404 for an unknown pool and 503 while the
        inventory is down (R-NODE-05), in that order.
        """
        if not rules.is_provisioned(cluster.phase):
            raise Refusal(
                409,
                f"R-PHASE-02: cluster not ready yet (phase {cluster.phase}). Wait until it is Provisioned.",
                rule="R-PHASE-02",
            )
        # A deleting pool still exists (R-DEL-02: listed until its workers are gone), so its draining
        # nodes can be watched here; only a name no pool has is 404.
        if pool_name is not None and not any(p.name == pool_name for p in cluster.pools.values()):
            raise Refusal(
                404,
                f"R-NODE-05: no pool {pool_name!r} in cluster {cluster.name}. List pools to see their names.",
                rule="R-NODE-05",
            )
        if not self.inventory_available:
            raise Refusal(
                503,
                f"R-NODE-05: the node inventory is temporarily unavailable. Retry after {INVENTORY_RETRY_AFTER_SECONDS} s.",
                rule="R-NODE-05",
                headers={"Retry-After": str(INVENTORY_RETRY_AFTER_SECONDS)},
            )
        inventory = cluster.inventory
        now = self._now
        cold = inventory.snapshot is None
        stale = (
            not cold
            and inventory.taken_at is not None
            and (now - inventory.taken_at).total_seconds() > INVENTORY_TTL_SECONDS
        )
        if (cold or stale) and inventory.refresh_at is None:
            inventory.refresh_at = now + _seconds(INVENTORY_REFRESH_SECONDS)
            self._schedule(inventory.refresh_at, "inventory", cluster.id)
            self._touch("inventory", cluster.id)
        items: list[Doc] = inventory.snapshot or []
        if pool_name is not None and inventory.snapshot is not None:
            items = inventory.snapshot.by_pool.get(pool_name, [])  # grouped once per snapshot
        self.commit()
        return {
            "schema_version": "node.public.v1",
            "cluster_id": cluster.id,
            "items": items,
            "total": len(items),
            "cold": cold,
            "stale": stale,
            "next_refresh_at": iso_or_none(inventory.refresh_at),
        }

    def _node_items(self, cluster: Cluster) -> Snapshot:
        return Snapshot(w.to_public(pool.name) for pool in cluster.pools.values() for w in pool.workers.values())

    # --- mutations (steps 7-12 of the order of checks) -------------------------------------------

    def add_pool(self, cluster: Cluster, request: PublicNodePoolCreateRequest) -> Doc:
        """Add a pool (R-ADD-*): 202 body; its workers come up in the background (R-ADD-10)."""
        self._require_provisioned(cluster)
        tier = self.catalog[request.size]
        planned = rules.pool_from_create(request, tier, pool_id="pending")
        self._refuse(rules.pool_violations(planned, add=True))
        if cluster.pool_named(request.name) is not None:
            raise Refusal(
                409,
                f"R-ADD-02: a pool named {request.name!r} already exists in cluster {cluster.name}. Choose another name.",
                rule="R-ADD-02",
            )
        before = [p.to_model() for p in cluster.alive_pools()]
        self._refuse_credit(cluster, before, [*before, planned])
        pool_id = self._new_uuid()
        pool = Pool(
            cluster_id=cluster.id,
            created_at=self._now,
            seq=self._next_counter(),
            **planned.model_copy(update={"id": pool_id}).model_dump(),
        )
        cluster.pools[pool.id] = pool
        self._pools[pool.id] = pool
        self._reconcile(cluster, pool)
        self._start(cluster, "pool.create", pool.name, pool, due=MIN_POOL_OPERATION_SECONDS)
        self.commit()
        return self.cluster_body(cluster)

    def patch_pool(self, cluster: Cluster, pool_name: str, patch: PublicNodePoolPatchRequest) -> Doc:
        """Change a pool (R-PATCH-*): merge, validate, then reconcile its workers to the new count."""
        self._require_provisioned(cluster)
        pool = self._alive_pool(cluster, pool_name, rule="R-PATCH-07")
        self._require_idle(cluster, pool)
        merged = rules.merge_patch(pool.to_model(), patch)
        self._refuse(rules.pool_violations(merged, add=False))
        before = [p.to_model() for p in cluster.alive_pools()]
        after = [merged if p.id == pool.id else p for p in before]
        self._refuse_credit(cluster, before, after)
        pool.apply(merged)
        self._reconcile(cluster, pool)
        self._start(cluster, "pool.update", pool.name, pool, due=MIN_POOL_OPERATION_SECONDS)
        self.commit()
        return self.cluster_body(cluster)

    def delete_pool(self, cluster: Cluster, pool_name: str) -> Doc:
        """Remove a pool (R-DEL-*): it stays ``deleting`` until its workers have drained."""
        self._require_provisioned(cluster)
        pool = self._alive_pool(cluster, pool_name, rule="R-DEL-03")
        self._require_idle(cluster, pool)
        if len(cluster.alive_pools()) <= 1:
            raise Refusal(
                409,
                f"R-DEL-01: {pool_name!r} is the last pool of cluster {cluster.name}; a cluster keeps at least one. "
                "Add another pool first, or scale this one instead.",
                rule="R-DEL-01",
            )
        pool.lifecycle = "deleting"
        for worker in pool.active_workers():
            self._drain(cluster, pool, worker)
        self._touch("pools", pool.id)
        self._start(cluster, "pool.delete", pool.name, pool, due=MIN_POOL_OPERATION_SECONDS)
        self.commit()
        return self.cluster_body(cluster)

    def replace_node(self, cluster: Cluster, node_name: str) -> Doc:
        """Replace a worker (R-RNODE-*): drain it and bring up a new one, keeping the pool's count."""
        self._require_provisioned(cluster)
        for op in cluster.running_operations():  # the running ones only, never the whole history
            if op.kind == "node.replace" and op.target == node_name:
                raise self._node_busy(node_name)
        found = self._find_worker(cluster, node_name)
        if found is None:
            op = self._start(cluster, "node.replace", node_name, None, due=UNKNOWN_NODE_FAIL_SECONDS)
            op.message = f"looking for node {node_name}"
        else:
            pool, worker = found
            if worker.status == "Deleting":
                raise self._node_busy(node_name)
            self._drain(cluster, pool, worker)
            replacement = self._new_worker(cluster, pool)
            self._start(cluster, "node.replace", node_name, pool, due=None, workers=(worker.id, replacement.id))
        self.commit()
        return {"schema_version": "node.public.v1", "cluster_id": cluster.id, "node_name": node_name}

    def _require_provisioned(self, cluster: Cluster) -> None:
        violation = rules.phase_violation(cluster.phase)
        if violation is not None:
            raise Refusal.of([violation])

    def _alive_pool(self, cluster: Cluster, pool_name: str, *, rule: str) -> Pool:
        pool = cluster.pool_named(pool_name)
        if pool is None:
            raise Refusal(
                404,
                f"{rule}: no pool {pool_name!r} in cluster {cluster.name} (or it is being deleted). "
                "List pools to see their names.",
                rule=rule,
            )
        return pool

    def _require_idle(self, cluster: Cluster, pool: Pool) -> None:
        """R-OP-01: one running operation per pool (a running node.replace in the pool counts)."""
        busy = cluster.running_operations_of(pool.id)  # an index look-up, not a scan of the history
        if busy:
            op = busy[0]
            raise Refusal(
                409,
                f"R-OP-01: pool {pool.name!r} is busy with operation {op.id} ({op.kind}, started "
                f"{iso(op.started_at)}). Try again after it finishes (GET .../state).",
                rule="R-OP-01",
            )

    @staticmethod
    def _node_busy(node_name: str) -> Refusal:
        return Refusal(
            409,
            f"R-RNODE-05: node {node_name} is already being deleted. Wait for that operation to finish.",
            rule="R-RNODE-05",
        )

    @staticmethod
    def _refuse(violations: Sequence[rules.Violation]) -> None:
        if violations:
            raise Refusal.of(violations)

    def _refuse_credit(self, cluster: Cluster, before: Iterable[NodePool], after: Iterable[NodePool]) -> None:
        credit = (
            self._organisations[cluster.organisation].credit if cluster.organisation in self._organisations else 0.0
        )
        violation = rules.credit_violation(credit, before, after, self.catalog)
        if violation is not None:
            raise Refusal.of([violation])

    def _find_worker(self, cluster: Cluster, node_name: str) -> tuple[Pool, Worker] | None:
        for pool in cluster.pools.values():
            for worker in pool.workers.values():
                if worker.visible_name == node_name:
                    return pool, worker
        return None

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
            due_at=None if due is None else self._now + _seconds(due),
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
            next_at=self._now + _seconds(PENDING_SECONDS),
        )
        pool.add_worker(worker)
        assert worker.next_at is not None
        self._schedule(worker.next_at, "worker", cluster.id, pool.id, worker.id)
        self._touch("pools", pool.id)
        return worker

    def _drain(self, cluster: Cluster, pool: Pool, worker: Worker) -> None:
        pool.set_status(worker, "Deleting")
        worker.deleted_at = self._now  # decision: when the drain started
        worker.next_at = self._now + _seconds(DRAIN_SECONDS)
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

    # --- admin plane -----------------------------------------------------------------------------

    def reset(self, seed: SeedName) -> None:
        """Forget the world and seed it again."""
        self._store.clear()
        self._wipe()
        self._seed(seed)
        self.commit()

    def install_cluster(
        self,
        *,
        name: str,
        organisation: str,
        phase: Phase = "Provisioned",
        cluster_id: str | None = None,
        kubernetes_version: str = "v1.32.4",
        pools: Sequence[PublicNodePoolCreateRequest] = (),
        tags: Sequence[str] = (),
        created_at: datetime | None = None,
    ) -> Cluster:
        """A cluster whose workers are born Running (seeds, tests, benchmarks).

        Raises ``Refusal`` 422 for an id that is not one URL path segment, 409 when the id is taken or
        the organisation already has a cluster of that name (``GET /clusters?name=`` resolves a name
        to one id), and 422 for a pool the rules refuse or two pools of one name (R-ADD-02); an unknown
        tier is installed as a retired one (``_tier``).
        """
        if cluster_id is not None and not _CLUSTER_ID.fullmatch(cluster_id):
            raise Refusal(
                422,
                f"cluster id {cluster_id!r} is not usable in a URL path. Use letters, digits, '.', '_', '~' or '-'.",
                errors=[FieldError(field="id", message="letters, digits, '.', '_', '~' or '-', 1 to 128 characters")],
            )
        cluster_id = cluster_id or self._new_uuid()
        if cluster_id in self._clusters:
            raise Refusal(409, f"a cluster with id {cluster_id} already exists. Choose another id.")
        for other in self._clusters.values():
            if other.organisation == organisation and other.name == name and other.phase not in _TORN_DOWN:
                raise Refusal(
                    409,
                    f"organisation {organisation} already has a cluster named {name!r} ({other.id}). Choose another name.",
                )
        for request in pools:
            self._refuse(rules.create_shape_violations(request))
        pool_names = [request.name for request in pools]
        if len(set(pool_names)) != len(pool_names):
            twice = sorted({n for n in pool_names if pool_names.count(n) > 1})
            raise Refusal(
                422,
                f"R-ADD-02: pool names must be unique in a cluster; {', '.join(twice)} given twice. Rename one.",
                rule="R-ADD-02",
                errors=[FieldError(field="node_pools", message=f"pool names given twice: {', '.join(twice)}")],
            )
        cluster = Cluster(
            id=cluster_id,
            name=name,
            organisation=organisation,
            phase=phase,
            kubernetes_version=kubernetes_version,
            tags=list(tags),
            created_at=created_at or self._now,
        )
        for request in pools:
            planned = rules.pool_from_create(request, self._tier(request.size), pool_id="pending")
            self._refuse(rules.pool_violations(planned, add=True))
        self._clusters[cluster.id] = cluster
        self._touch("clusters", cluster.id)
        self._touch("inventory", cluster.id)
        for request in pools:
            self.install_pool(cluster, request)
        self.commit()
        return cluster

    def install_pool(
        self,
        cluster: Cluster,
        request: PublicNodePoolCreateRequest,
        *,
        pool_id: str | None = None,
        node_names: Sequence[str] = (),
        created_at: datetime | None = None,
    ) -> Pool:
        """A pool with ``count`` Running workers, no operation (the seed and the admin plane)."""
        planned = rules.pool_from_create(request, self._tier(request.size), pool_id=pool_id or self._new_uuid())
        born = created_at or self._now
        pool = Pool(cluster_id=cluster.id, created_at=born, seq=self._next_counter(), **planned.model_dump())
        for index in range(pool.count):
            worker = Worker(
                id="worker-" + self._digest("worker").hex()[:8],
                seq=self._next_counter(),
                status="Running",
                created_at=born,
                next_at=None,
                kubernetes_version=cluster.kubernetes_version,
            )
            pool.add_worker(worker)
            if index < len(node_names):
                worker.name = node_names[index]
                cluster.node_names.add(worker.name)
            else:
                worker.name = self._node_name(cluster, pool)
        cluster.pools[pool.id] = pool
        self._pools[pool.id] = pool
        self._touch("pools", pool.id)
        return pool

    def _tier(self, size: str) -> MachineTier:
        """The catalog tier, or (admin plane only) a retired one: unknown to the catalog, 0 GiB disk.

        Decision: the admin plane may install pools of a size the catalog no longer lists, so that
        the R-CAP-02 null totals can be reached; the public API refuses such a size (R-ADD-03).
        """
        known = self.catalog.get(size)
        if known is not None:
            return known
        return MachineTier(id=size, vcpu=0, memory_gib=0, spec=TierSpec(disk_gib=0), price_per_hour=0)

    def cluster(self, cluster_id: str) -> Cluster | None:
        return self._clusters.get(cluster_id)

    def set_phase(self, cluster: Cluster, phase: Phase) -> None:
        cluster.phase = phase
        self._touch("clusters", cluster.id)
        self.commit()

    def set_credit(self, name: str, credit: float) -> Organisation:
        organisation = Organisation(name, credit)
        self._organisations[name] = organisation
        self._touch("organisations", name)
        self.commit()
        return organisation

    def credit(self, name: str) -> float | None:
        organisation = self._organisations.get(name)
        return None if organisation is None else organisation.credit

    def put_token(self, token: str, user: str, organisation: str, role: Role) -> Principal:
        """Issue (or re-issue) a token; only its SHA-256 is kept, in memory and in the state file."""
        principal = Principal(user, organisation, role)
        digest = token_digest(token)
        self._tokens[digest] = principal
        if organisation not in self._organisations:
            self._organisations[organisation] = Organisation(organisation, 0.0)
            self._touch("organisations", organisation)
        self._touch("tokens", digest)
        self.commit()
        return principal

    def delete_token(self, token: str) -> None:
        digest = token_digest(token)
        self._tokens.pop(digest, None)
        self._touch("tokens", digest)
        self.commit()

    def set_inventory(self, available: bool) -> None:
        self.inventory_available = available
        self._touch("meta", "world")
        self.commit()

    # --- request log (for tests: what did Door see?) -----------------------------------------------

    def log_request(self, method: str, path: str, status: int, *, idempotency_key: bool) -> RequestRecord:
        """Record an answered request; the oldest records go once there are ``REQUEST_LOG_SIZE``."""
        self._request_seq += 1
        record = RequestRecord(
            seq=self._request_seq, method=method, path=path, status=status, idempotency_key=idempotency_key
        )
        self.request_log.append(record)
        return record

    @property
    def last_request_seq(self) -> int:
        """The seq of the newest record (0 before any request): pass it to ``requests_since`` next time."""
        return self._request_seq

    def requests_since(self, seq: int) -> list[RequestRecord]:
        """The records newer than ``seq``, oldest first (those still kept: the log holds the last 10,000)."""
        if not self.request_log:
            return []
        first = self.request_log[0]["seq"]  # seqs in the log are consecutive
        return list(islice(self.request_log, max(0, seq - first + 1), None))

    # --- persistence -----------------------------------------------------------------------------

    def _touch(self, table: str, key: str) -> None:
        self._dirty.add((table, key))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold back every ``commit`` of the block and write what it touched in one ``Store.write``.

        A mutation and its idempotency record (R-ADD-09, R-PATCH-09) are made in one such block,
        so a crash leaves either both in the state file or neither: never a pool without the
        answer that would replay it (a retry would be 409 R-ADD-02, or a second pool.update).
        """
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1
            if not self._holding:
                self.commit()

    def remember_answer(self, key_scope: str, answer: StoredAnswer | None) -> None:
        """Store (or release) an idempotent answer; inside ``transaction()`` it lands with the change."""
        self.idempotency.finish(key_scope, answer)
        self.commit()

    def commit(self) -> None:
        """Write every row touched since the last commit, in one transaction (deferred inside ``transaction()``)."""
        if self._holding:
            return
        for key_scope in self.idempotency.dirty:
            self._dirty.add(("idempotency", key_scope))
        self.idempotency.dirty.clear()
        if not self._dirty:
            return
        if not self._store.persistent:
            # In memory there is nothing to write: building the rows (a pool's row holds every one
            # of its workers) would cost a serialisation of every touched pool per event batch.
            self._dirty.clear()
            return
        self._dirty.add(("meta", "world"))
        upserts: dict[Key, Doc] = {}
        deletes: set[Key] = set()
        for table, key in self._dirty:
            doc = self._doc_of(table, key)
            if doc is None:
                deletes.add((table, key))
            else:
                upserts[(table, key)] = doc
        self._store.write(upserts, deletes)
        self._dirty.clear()  # only once written: rows a failed write held are written by the next commit

    def _doc_of(self, table: str, key: str) -> Doc | None:
        if table == "meta":
            return {
                "now": iso(self._now),
                "counter": self._counter,
                "inventory_available": self.inventory_available,
                "rng_seed": self.rng_seed,
                "token_keys": "sha256",
            }
        if table == "organisations":
            organisation = self._organisations.get(key)
            return None if organisation is None else organisation.doc()
        if table == "tokens":
            principal = self._tokens.get(key)
            return None if principal is None else principal.doc()
        if table == "clusters":
            cluster = self._clusters.get(key)
            return None if cluster is None else cluster.doc()
        if table == "pools":
            pool = self._pools.get(key)
            return None if pool is None else pool.doc()
        if table == "operations":
            op = self._operations.get(key)
            return None if op is None else op.doc()
        if table == "inventory":
            cluster = self._clusters.get(key)
            return None if cluster is None else cluster.inventory.doc()
        if table == "idempotency":
            answer = self.idempotency.answers.get(key)
            return None if answer is None else answer.doc()
        raise KeyError(table)

    def _load(self) -> None:
        hashed_tokens = False
        for _, doc in self._store.load("meta"):
            hashed_tokens = doc.get("token_keys") == "sha256"
            self._counter = doc["counter"]
            self.inventory_available = doc["inventory_available"]
            stored_now = parse_time(doc["now"])
            if stored_now > self.clock.now() and isinstance(self.clock, AdjustableClock):
                self.clock.set(stored_now)  # the simulated time survives a restart
            self._now = max(self._now, stored_now)
        for key, doc in self._store.load("organisations"):
            self._organisations[key] = Organisation.from_doc(doc)
        for key, doc in self._store.load("tokens"):
            if hashed_tokens:
                self._tokens[key] = Principal.from_doc(doc)
            else:
                # A state file from before tokens were hashed: rewrite its rows under their digests.
                self._tokens[token_digest(key)] = Principal.from_doc(doc)
                self._touch("tokens", key)
                self._touch("tokens", token_digest(key))
        for _, doc in self._store.load("clusters"):
            cluster = Cluster.from_doc(doc)
            self._clusters[cluster.id] = cluster
        for _, doc in self._store.load("pools"):
            pool = Pool.from_doc(doc)
            self._clusters[pool.cluster_id].pools[pool.id] = pool
            self._pools[pool.id] = pool
        for cluster in self._clusters.values():
            cluster.pools = dict(sorted(cluster.pools.items(), key=lambda item: item[1].seq))
            cluster.node_names = {w.name for p in cluster.pools.values() for w in p.workers.values() if w.name}
        operations: dict[str, list[Operation]] = {}
        for _, doc in self._store.load("operations"):
            op = Operation.from_doc(doc)
            operations.setdefault(op.cluster_id, []).append(op)
            self._operations[op.id] = op
        for cluster_id, of_cluster in operations.items():
            # Rows come back in key order: sort them by seq and rebuild the running indexes.
            self._clusters[cluster_id].load_operations(of_cluster)
        for key, doc in self._store.load("inventory"):
            self._clusters[key].inventory = Inventory.from_doc(doc)
        self.idempotency.load((key, StoredAnswer.from_doc(doc)) for key, doc in self._store.load("idempotency"))
        self._rebuild_events()

    def _rebuild_events(self) -> None:
        """Every pending transition is in the state itself; the heap is derived from it."""
        for cluster in self._clusters.values():
            for pool in cluster.pools.values():
                for worker in pool.workers.values():
                    if worker.next_at is not None:
                        self._schedule(worker.next_at, "worker", cluster.id, pool.id, worker.id)
            for op in cluster.running_operations():
                if op.due_at is not None:
                    self._schedule(op.due_at, "operation", cluster.id, op.id)
            if cluster.inventory.refresh_at is not None:
                self._schedule(cluster.inventory.refresh_at, "inventory", cluster.id)

    def _wipe(self) -> None:
        self._organisations.clear()
        self._tokens.clear()
        self._clusters.clear()
        self._pools.clear()
        self._operations.clear()
        self._events.clear()
        self.idempotency.clear()
        self.inventory_available = True
        self._dirty.clear()

    def _seed(self, seed: SeedName) -> None:
        from reference_backend import seed as seeds

        seeds.populate(self, seed)
        self._touch("meta", "world")

    def close(self) -> None:
        """Commit what is pending and release the state file."""
        self.commit()
        self._store.close()
