"""The simulated world's records: organisations, tokens, clusters, pools, workers, operations.

Plain dataclasses. ``persistence`` writes each as one row of the state file from its fields (a
field marked ``NOT_IN_ROW`` is derived, or kept in a table of its own); ``views`` builds the
response bodies, from the items the records give with ``to_public``.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from types import MappingProxyType
from typing import Any, Final, Literal

from backend_client.models import NodePool, NodeStatus, OperationKind, OperationStatus, Phase, PoolLifecycle

Role = Literal["super_admin", "member"]
Doc = dict[str, Any]

# Phases of a cluster that is gone: 404 to every request (R-AUTH-04), listed nowhere.
TORN_DOWN: Final = frozenset({"Deprovisioned"})

# Decision (R-OP-03): the history a cluster keeps. ``GET …/state`` lists every running operation
# and the most recent ``KEPT_FINISHED_OPERATIONS`` finished ones (by the instant they finished);
# older finished operations are forgotten, in memory and in the state file.
KEPT_FINISHED_OPERATIONS: Final = 100

# Field metadata: not part of the record's row (``persistence.encode`` skips it).
NOT_IN_ROW: Final = MappingProxyType({"stored": False})


def compact_json(value: Any) -> bytes:
    """The bytes of a JSON response body, exactly as Starlette's ``JSONResponse`` renders them."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode("utf-8")


def encode_doc(doc: Doc) -> bytes:
    """``compact_json(doc)``, reusing the cached encoding of a ``Snapshot`` among its values."""
    if not any(isinstance(value, Snapshot) for value in doc.values()):
        return compact_json(doc)
    members = (
        compact_json(key) + b":" + (value.json if isinstance(value, Snapshot) else compact_json(value))
        for key, value in doc.items()
    )
    return b"{" + b",".join(members) + b"}"


def iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def iso_or_none(when: datetime | None) -> str | None:
    return None if when is None else iso(when)


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def parse_time_or_none(text: str | None) -> datetime | None:
    return None if text is None else parse_time(text)


@dataclass
class Organisation:
    name: str
    credit: float


def token_digest(token: str) -> str:
    """The SHA-256 (hex) a bearer token is kept and looked up by: the state file never holds a token."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Principal:
    """Who a bearer token names. The token itself is never kept here, so it cannot leak into logs."""

    user: str
    organisation: str
    role: Role


@dataclass
class Worker:
    """One worker VM. ``name`` is its kubectl name once it joins; before that, its internal ``id``."""

    id: str
    seq: int
    status: NodeStatus
    created_at: datetime
    next_at: datetime | None
    name: str | None = None
    kubernetes_version: str | None = None
    deleted_at: datetime | None = None

    @property
    def visible_name(self) -> str:
        return self.name or self.id

    def to_public(self, pool: str | None) -> Doc:
        """R-NODE-06: no addresses, no provider ids."""
        return {
            "name": self.visible_name,
            "pool": pool,
            "status": self.status,
            "kubernetes_version": self.kubernetes_version,
            "ready": self.status == "Running",
            "created_at": iso(self.created_at),
            "deleted_at": iso_or_none(self.deleted_at),
        }


@dataclass
class Pool:
    id: str
    cluster_id: str
    name: str
    size: str
    count: int
    auto_scale: bool
    min_nodes: int | None
    max_nodes: int | None
    labels: dict[str, str]
    tags: dict[str, str]
    root_volume_size_gib: int
    lifecycle: PoolLifecycle
    created_at: datetime
    seq: int = 0  # creation order: lists keep it across a restart
    workers: dict[str, Worker] = field(default_factory=dict)
    # Derived, not stored: how many of ``workers`` are in each status, kept by ``add_worker``,
    # ``set_status`` and ``remove_worker`` so an operation's progress is O(1), not a scan of the pool.
    status_counts: Counter[NodeStatus] = field(default_factory=Counter, repr=False, compare=False, metadata=NOT_IN_ROW)

    def __post_init__(self) -> None:
        self.status_counts = Counter(w.status for w in self.workers.values())  # a pool read back with its workers

    def to_model(self) -> NodePool:
        return NodePool.model_validate(self.to_public())

    def to_public(self) -> Doc:
        """R-POOL-02: the pool item; nodes are never embedded (R-POOL-01)."""
        return {
            "id": self.id,
            "name": self.name,
            "size": self.size,
            "count": self.count,
            "auto_scale": self.auto_scale,
            "min_nodes": self.min_nodes,
            "max_nodes": self.max_nodes,
            "labels": dict(self.labels),
            "tags": dict(self.tags),
            "root_volume_size_gib": self.root_volume_size_gib,
            "lifecycle": self.lifecycle,
        }

    def apply(self, model: NodePool) -> None:
        """Take the declared fields of a merged, validated pool (R-PATCH-03)."""
        self.count = model.count
        self.auto_scale = model.auto_scale
        self.min_nodes = model.min_nodes
        self.max_nodes = model.max_nodes
        self.labels = dict(model.labels)
        self.tags = dict(model.tags)

    def active_workers(self) -> list[Worker]:
        return [w for w in self.workers.values() if w.status != "Deleting"]

    def add_worker(self, worker: Worker) -> None:
        self.workers[worker.id] = worker
        self.status_counts[worker.status] += 1

    def set_status(self, worker: Worker, status: NodeStatus) -> None:
        """The one way to change the status of a worker of this pool (keeps ``status_counts``)."""
        self.status_counts[worker.status] -= 1
        self.status_counts[status] += 1
        worker.status = status

    def remove_worker(self, worker_id: str) -> Worker:
        worker = self.workers.pop(worker_id)
        self.status_counts[worker.status] -= 1
        return worker

    @property
    def running_count(self) -> int:
        return self.status_counts["Running"]

    @property
    def draining_count(self) -> int:
        return self.status_counts["Deleting"]

    @property
    def active_count(self) -> int:
        return len(self.workers) - self.draining_count


@dataclass
class Operation:
    """R-OP-03. ``pool_id``, ``due_at`` and the worker ids are internal bookkeeping, never served."""

    id: str
    seq: int
    cluster_id: str
    kind: OperationKind
    target: str
    pool: str | None
    pool_id: str | None
    status: OperationStatus
    started_at: datetime
    finished_at: datetime | None = None
    error: str | None = None
    message: str | None = None
    due_at: datetime | None = None
    old_worker_id: str | None = None
    new_worker_id: str | None = None

    def to_public(self) -> Doc:
        return {
            "id": self.id,
            "kind": self.kind,
            "target": self.target,
            "pool": self.pool,
            "status": self.status,
            "started_at": iso(self.started_at),
            "finished_at": iso_or_none(self.finished_at),
            "error": self.error,
            "message": self.message,
        }


class Snapshot(list[Doc]):
    """The node items of one inventory refresh (R-NODE-04), never changed once taken.

    Every read of the cluster's nodes serves the same snapshot until the next refresh, so its JSON
    is encoded once and reused (40,000 workers are a 6 MB body).
    """

    @cached_property
    def json(self) -> bytes:
        return compact_json(self)

    @cached_property
    def by_pool(self) -> dict[str | None, Snapshot]:
        """The same items grouped by pool name (in order), so one pool's nodes are not a scan of all."""
        groups: dict[str | None, Snapshot] = {}
        for item in self:
            groups.setdefault(item["pool"], Snapshot()).append(item)
        return groups


@dataclass
class Inventory:
    """The node inventory cache of one cluster (R-NODE-01..04): a snapshot and a queued refresh."""

    snapshot: Snapshot | None = None
    taken_at: datetime | None = None
    refresh_at: datetime | None = None


@dataclass
class Cluster:
    id: str
    name: str
    organisation: str
    phase: Phase
    kubernetes_version: str
    tags: list[str]
    created_at: datetime
    seq: int = 0  # the order clusters were made in, which ``GET /clusters`` keeps across a restart or a snapshot
    # Pools, operations and the inventory are rows of their own tables.
    pools: dict[str, Pool] = field(default_factory=dict, metadata=NOT_IN_ROW)
    # The running operations and the kept finished ones (``KEPT_FINISHED_OPERATIONS``), oldest first
    # (``seq`` order; ``add_operation`` keeps it).
    operations: dict[str, Operation] = field(default_factory=dict, metadata=NOT_IN_ROW)
    inventory: Inventory = field(default_factory=Inventory, metadata=NOT_IN_ROW)
    node_names: set[str] = field(default_factory=set, metadata=NOT_IN_ROW)  # derived: kubectl names in use
    # Derived: the running operations, oldest first, and the same by pool id, so that neither a
    # worker's state change nor an R-OP-01 check scans the cluster's whole history.
    running: dict[str, Operation] = field(default_factory=dict, metadata=NOT_IN_ROW)
    running_by_pool: dict[str, dict[str, Operation]] = field(default_factory=dict, metadata=NOT_IN_ROW)
    # Derived: the kept finished operations in the order they finished (the oldest is forgotten first).
    finished: dict[str, Operation] = field(default_factory=dict, metadata=NOT_IN_ROW)
    # Derived: the simulated second whose worker launches are being handed out, and how many it has.
    launch_at: datetime | None = field(default=None, metadata=NOT_IN_ROW)
    launched: int = field(default=0, metadata=NOT_IN_ROW)

    @property
    def torn_down(self) -> bool:
        return self.phase in TORN_DOWN

    def pool_named(self, name: str) -> Pool | None:
        """The alive pool of that name; a ``deleting`` pool does not count (R-PATCH-07, R-ADD-02)."""
        return next((p for p in self.pools.values() if p.name == name and p.lifecycle == "active"), None)

    def alive_pools(self) -> list[Pool]:
        return [p for p in self.pools.values() if p.lifecycle == "active"]

    def running_operations(self) -> list[Operation]:
        return list(self.running.values())

    def running_operations_of(self, pool_id: str) -> list[Operation]:
        """The running operations of one pool, oldest first (a copy: evaluating one may finish it)."""
        return list(self.running_by_pool.get(pool_id, {}).values())

    def add_operation(self, op: Operation) -> None:
        """Record an operation; operations are added in ``seq`` order (``load_operations`` sorts them)."""
        self.operations[op.id] = op
        if op.status == "running":
            self.running[op.id] = op
            if op.pool_id is not None:
                self.running_by_pool.setdefault(op.pool_id, {})[op.id] = op

    def operation_finished(self, op: Operation) -> list[Operation]:
        """Move an operation that is no longer running to the finished ones; returns the finished
        operations this pushes out of the kept history (``KEPT_FINISHED_OPERATIONS``)."""
        self.running.pop(op.id, None)
        if op.pool_id is not None:
            of_pool = self.running_by_pool.get(op.pool_id)
            if of_pool is not None:
                of_pool.pop(op.id, None)
                if not of_pool:
                    del self.running_by_pool[op.pool_id]
        self.finished[op.id] = op
        return self._forget_oldest()

    def _forget_oldest(self) -> list[Operation]:
        forgotten: list[Operation] = []
        while len(self.finished) > KEPT_FINISHED_OPERATIONS:
            oldest = self.finished.pop(next(iter(self.finished)))
            del self.operations[oldest.id]
            forgotten.append(oldest)
        return forgotten

    def load_operations(self, operations: Iterable[Operation]) -> list[Operation]:
        """Replace the operations with stored ones (any order) and rebuild the derived indexes;
        returns the finished ones beyond the kept history (a state file from before the bound)."""
        self.operations.clear()
        self.running.clear()
        self.running_by_pool.clear()
        self.finished.clear()
        ordered = sorted(operations, key=lambda op: op.seq)
        for op in ordered:
            self.add_operation(op)
        done = (op for op in ordered if op.status != "running")
        for op in sorted(done, key=lambda op: (op.finished_at or op.started_at, op.seq)):
            self.finished[op.id] = op
        return self._forget_oldest()
