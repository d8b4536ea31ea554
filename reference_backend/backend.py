"""The Door public API's rules on the simulated world: who asks, what they may read, what they may change.

The world is built in layers, one module each: ``persistence`` (the records by id, the table
registry, commit and load) ← ``simulation`` (the clock, the event heap, the worker lifecycle) ←
``setters`` (the admin plane's direct changes) ← ``ReferenceBackend`` here (the public API's checks
and changes). ``views`` builds the response bodies; the HTTP side (``app``, ``routes``, ``edge``)
only calls this class.

Every method that checks and then changes the world (``add_pool``, ``patch_pool``, ``delete_pool``,
``replace_node``) is synchronous: the app calls it with no ``await`` in between, so on the single
event loop a check (R-OP-01) and the change it guards are atomic.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from backend_client import rules
from backend_client.models import NodePool, PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from reference_backend import catalog, seed, snapshots, views
from reference_backend.clock import Clock
from reference_backend.errors import Refusal
from reference_backend.faults import FaultBook
from reference_backend.request_log import REQUEST_LOG_SIZE, RequestLog, RequestRecord
from reference_backend.seed import SeedName
from reference_backend.setters import WorldSetters, refuse
from reference_backend.simulation import (
    INVENTORY_TTL_SECONDS,
    MIN_POOL_OPERATION_SECONDS,
    UNKNOWN_NODE_FAIL_SECONDS,
)
from reference_backend.store import MemoryStore, SqliteStore
from reference_backend.world import Cluster, Doc, Pool, Principal, Worker, iso, token_digest

log = logging.getLogger(__name__)

INVENTORY_RETRY_AFTER_SECONDS: Final = 5


class ReferenceBackend(WorldSetters):
    """The whole simulated world: organisations, tokens, clusters, pools, workers, operations."""

    def __init__(
        self,
        clock: Clock,
        *,
        seed: SeedName = "demo",
        state_path: Path | None = None,
        rng_seed: int = 0,
        snapshot: snapshots.WorldSnapshot | None = None,
    ) -> None:
        """A world seeded with ``seed``, or the one a state file holds, or (``snapshot``) the one a
        snapshot holds, which then replaces the state file's; the clock is set to the snapshot's time."""
        store = SqliteStore(state_path) if state_path is not None else MemoryStore()
        super().__init__(clock, store, dict(catalog.TIERS), rng_seed)
        # Fault rules belong to the world, so every app serving this backend (the embedded one and a
        # test's admin client) injects the same faults.
        self.faults = FaultBook()
        # Every request outside the admin plane, as answered (faults included); memory only, kept across resets.
        self.request_log = RequestLog()
        if snapshot is not None:
            self.restore_snapshot(snapshot)
        elif store.empty:
            self._seed(seed)
        else:
            self._load()
            self._rebuild_events()
        self.commit()

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
        if cluster is None or cluster.torn_down:
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
        violation = rules.role_violation(principal.role == "super_admin", principal.organisation, principal.role)
        if violation is not None:
            raise Refusal.of([violation])

    # --- reads ---------------------------------------------------------------------------------

    def list_clusters(self, principal: Principal, name: str | None = None) -> Doc:
        clusters = (
            c
            for c in self._clusters.values()
            if c.organisation == principal.organisation and not c.torn_down and (name is None or c.name == name)
        )
        return views.cluster_list_body(clusters, self.catalog)

    def cluster_body(self, cluster: Cluster) -> Doc:
        """R-POOL-03: the cluster, its pools (deleting ones included) and the capacity totals (R-CAP-*)."""
        return views.cluster_body(cluster, self.catalog)

    def pools_body(self, cluster: Cluster) -> Doc:
        """R-POOL-01: the pool list envelope, 200 in any phase (R-PHASE-02)."""
        return views.pools_body(cluster)

    def state_body(self, cluster: Cluster) -> Doc:
        """R-OP-03: the phase, every running operation and the most recent finished ones
        (``KEPT_FINISHED_OPERATIONS``), newest first."""
        return views.state_body(cluster)

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
        cold = inventory.snapshot is None
        stale = (
            not cold
            and inventory.taken_at is not None
            and (self._now - inventory.taken_at).total_seconds() > INVENTORY_TTL_SECONDS
        )
        if cold or stale:
            self._queue_inventory_refresh(cluster)
        self.commit()
        return views.nodes_body(cluster, pool_name, cold=cold, stale=stale)

    # --- mutations (steps 7-12 of the order of checks) -------------------------------------------

    def add_pool(self, cluster: Cluster, request: PublicNodePoolCreateRequest) -> Doc:
        """Add a pool (R-ADD-*): 202 body; its workers come up in the background (R-ADD-10)."""
        self._require_provisioned(cluster)
        tier = self.catalog[request.size]
        planned = rules.pool_from_create(request, tier, pool_id="pending")
        refuse(rules.pool_violations(planned, add=True))
        refuse([rules.name_clash_violation(request.name, cluster.name, (p.name for p in cluster.alive_pools()))])
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
        refuse(rules.pool_violations(merged, add=False))
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
        refuse([rules.last_pool_violation(pool_name, cluster.name, len(cluster.alive_pools()))])
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
        return views.node_deleting_body(cluster, node_name)

    def _require_provisioned(self, cluster: Cluster) -> None:
        violation = rules.phase_violation(cluster.phase)
        if violation is not None:
            raise Refusal.of([violation])

    def _alive_pool(self, cluster: Cluster, pool_name: str, *, rule: str) -> Pool:
        pool = cluster.pool_named(pool_name)
        if pool is None:
            alive = [p.name for p in cluster.alive_pools()]
            deleting = [p.name for p in cluster.pools.values() if p.lifecycle != "active"]
            refuse([rules.missing_pool_violation(pool_name, cluster.name, alive, deleting, rule=rule)])
            raise AssertionError("unreachable: a missing pool is always a violation")
        return pool

    def _require_idle(self, cluster: Cluster, pool: Pool) -> None:
        """R-OP-01: one running operation per pool (a running node.replace in the pool counts)."""
        busy = cluster.running_operations_of(pool.id)  # an index look-up, not a scan of the history
        running = (busy[0].id, busy[0].kind, iso(busy[0].started_at)) if busy else None
        refuse([rules.busy_pool_violation(pool.name, running)])

    @staticmethod
    def _node_busy(node_name: str) -> Refusal:
        violation = rules.node_busy_violation(node_name, replacing=True)
        assert violation is not None
        return Refusal.of([violation])

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

    # --- the admin plane's reset and the request log --------------------------------------------

    def reset(self, seed: SeedName) -> None:
        """Forget the world and seed it again."""
        self._store.clear()
        self._wipe()
        self._seed(seed)
        self.commit()

    def save_snapshot(self) -> bytes:
        """The whole world as a snapshot file's bytes (``reference_backend.snapshots``)."""
        return snapshots.dumps(snapshots.snapshot_of(self))

    def restore_snapshot(self, snapshot: snapshots.WorldSnapshot | bytes) -> None:
        """Replace the world with a snapshot's, its time included; fault rules and the request log stay.

        Raises ``snapshots.SnapshotError`` (the world unchanged) for a snapshot that cannot be restored.
        """
        snapshots.restore(self, snapshot if isinstance(snapshot, snapshots.WorldSnapshot) else snapshots.parse(snapshot))

    def _seed(self, name: SeedName) -> None:
        seed.populate(self, name)
        self._touch("meta", "world")

    def log_request(
        self, method: str, path: str, status: int, *, idempotency_key: bool, token: str | None = None
    ) -> RequestRecord:
        """Record an answered request (with a digest of its bearer and the user Door issued it to, never the
        token); the oldest records go once there are ``REQUEST_LOG_SIZE``."""
        digest = token_digest(token) if token else None
        principal = self._tokens.get(digest) if digest else None
        return self.request_log.record(
            method,
            path,
            status,
            idempotency_key=idempotency_key,
            token=digest[:16] if digest else None,
            user=principal.user if principal is not None else None,
        )

    @property
    def last_request_seq(self) -> int:
        """The seq of the newest record (0 before any request): pass it to ``requests_since`` next time."""
        return self.request_log.last_seq

    def requests_since(self, seq: int) -> list[RequestRecord]:
        """The records newer than ``seq``, oldest first (those still kept: the log holds the last 10,000)."""
        return self.request_log.since(seq)


__all__ = ["REQUEST_LOG_SIZE", "ReferenceBackend", "RequestRecord", "SeedName", "token_digest"]
