"""What the world is, and how it is kept: the records by id, one table registry, commit and load.

Every stored record is a dataclass of ``world`` (or ``idempotency.StoredAnswer``); ``encode`` and
``decode`` turn one into a JSON document and back from its fields' types (a ``datetime`` is ISO
text, a pool's workers are a list), skipping the fields marked ``DERIVED``. ``TABLES`` names, for
each table of the state file, the record it holds and where the live record of a row key is, so a
new field needs no mapper and a new table is one line.

The world marks what a change touched (``_touch``) and ``commit`` writes exactly those rows in one
transaction: scaling one pool of a large world rewrites one pool row and one operation row.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Generic, TypeVar

from backend_client.models import MachineTier
from reference_backend.clock import AdjustableClock, Clock
from reference_backend.idempotency import IdempotencyStore, StoredAnswer
from reference_backend.store import Key, Store
from reference_backend.world import (
    Cluster,
    Doc,
    Inventory,
    Operation,
    Organisation,
    Pool,
    Principal,
    Snapshot,
    iso,
    parse_time,
    parse_time_or_none,
    token_digest,
)

R = TypeVar("R")
Codec = tuple[Callable[[Any], Any], Callable[[Any], Any]]  # (encode a field's value, decode it)


def _same(value: Any) -> Any:
    return value


def _field_codec(hint: Any) -> Codec:
    """How a field of this type is written to a JSON document and read back."""
    if hint is datetime:
        return iso, parse_time
    if hint == datetime | None:
        return (lambda value: None if value is None else iso(value)), parse_time_or_none
    if hint is float:
        return _same, float
    if hint == Snapshot | None:  # kept as is: ``encode_doc`` reuses the snapshot's cached JSON
        return _same, lambda value: None if value is None else Snapshot(value)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is dict and len(args) == 2 and isinstance(args[1], type) and dataclasses.is_dataclass(args[1]):
        member: type[Any] = args[1]  # records by id (a pool's workers), stored as a list in insertion order
        return (
            lambda value: [encode(item) for item in value.values()],
            lambda value: {item.id: item for item in (decode(member, doc) for doc in value)},
        )
    if origin is dict:
        return dict, dict
    if origin is list:
        return list, list
    if origin in (typing.Union, types.UnionType) or origin is typing.Literal or isinstance(hint, type):
        return _same, _same
    raise TypeError(f"no codec for a field of type {hint!r}")


_CODECS: dict[type[Any], tuple[tuple[str, Codec, bool], ...]] = {}


def _codecs(record: type[Any]) -> tuple[tuple[str, Codec, bool], ...]:
    """The stored fields of a record type, their codecs and whether a row may leave them out
    (a field with a default, added after rows were written), worked out once per type."""
    known = _CODECS.get(record)
    if known is None:
        hints = typing.get_type_hints(record)
        stored = (f for f in dataclasses.fields(record) if f.metadata.get("stored", True))
        known = _CODECS[record] = tuple(
            (f.name, _field_codec(hints[f.name]), f.default is not dataclasses.MISSING) for f in stored
        )
    return known


def encode(record: Any) -> Doc:
    """The JSON document of a stored record: every field not marked ``NOT_IN_ROW``."""
    return {name: write(getattr(record, name)) for name, (write, _), _ in _codecs(type(record))}


def decode(record: type[R], doc: Doc) -> R:
    """The record a document holds (``encode`` read back); a field with a default may be missing
    (a row written before the field existed). Raises ``KeyError`` for another missing field."""
    return record(
        **{name: read(doc[name]) for name, (_, read), optional in _codecs(record) if not optional or name in doc}
    )


@dataclass(frozen=True)
class Table(Generic[R]):
    """One table of the state file: the record of its rows, the live record a row key names (None:
    gone), and the keys of every live row (what a snapshot writes)."""

    record: type[R]
    live: Callable[[PersistentWorld, str], R | None]
    keys: Callable[[PersistentWorld], Iterable[str]]


META: Final = "meta"  # one row, "world": the clock, the name counter and the switches


class PersistentWorld:
    """The records of the world by id, what a change touched, and the store they are written to."""

    def __init__(self, clock: Clock, store: Store, catalog: dict[str, MachineTier], rng_seed: int) -> None:
        self.clock = clock
        self.catalog = catalog
        self.rng_seed = rng_seed
        self.idempotency = IdempotencyStore()
        self.inventory_available = True
        self._store = store
        self._organisations: dict[str, Organisation] = {}
        self._tokens: dict[str, Principal] = {}  # by token_digest(token), never by the token
        self._clusters: dict[str, Cluster] = {}
        self._pools: dict[str, Pool] = {}
        self._operations: dict[str, Operation] = {}
        self._counter = 0
        self._now = clock.now()
        self._dirty: set[Key] = set()
        self._holding = 0  # nesting depth of ``transaction()``: while > 0, ``commit`` waits

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
        self._dirty.add((META, "world"))
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
        if table == META:
            return {
                "now": iso(self._now),
                "counter": self._counter,
                "inventory_available": self.inventory_available,
                "rng_seed": self.rng_seed,
                "token_keys": "sha256",
            }
        record = TABLES[table].live(self, key)
        return None if record is None else encode(record)

    def _rows(self, table: str, source: Store) -> Iterator[tuple[str, Any]]:
        record = TABLES[table].record
        for key, doc in source.load(table):
            yield key, decode(record, doc)

    def _load(self, source: Store | None = None) -> None:
        """Read the state file (or ``source``: a snapshot's rows) back, then rebuild what is derived
        (indexes, kubectl names in use)."""
        source = source or self._store
        hashed_tokens = False
        for _, doc in source.load(META):
            hashed_tokens = doc.get("token_keys") == "sha256"
            self._counter = doc["counter"]
            self.inventory_available = doc["inventory_available"]
            stored_now = parse_time(doc["now"])
            if stored_now > self.clock.now() and isinstance(self.clock, AdjustableClock):
                self.clock.set(stored_now)  # the simulated time survives a restart
            self._now = max(self._now, stored_now)
        self._organisations.update(self._rows("organisations", source))
        for key, principal in self._rows("tokens", source):
            if hashed_tokens:
                self._tokens[key] = principal
            else:
                # A state file from before tokens were hashed: rewrite its rows under their digests.
                self._tokens[token_digest(key)] = principal
                self._touch("tokens", key)
                self._touch("tokens", token_digest(key))
        # Rows come back in key order: clusters are listed in the order they were made (``seq``).
        for cluster in sorted((c for _, c in self._rows("clusters", source)), key=lambda c: (c.seq, c.id)):
            self._clusters[cluster.id] = cluster
        for _, pool in self._rows("pools", source):
            self._clusters[pool.cluster_id].pools[pool.id] = pool
            self._pools[pool.id] = pool
        for cluster in self._clusters.values():
            cluster.pools = dict(sorted(cluster.pools.items(), key=lambda item: item[1].seq))
            cluster.node_names = {w.name for p in cluster.pools.values() for w in p.workers.values() if w.name}
        operations: dict[str, list[Operation]] = {}
        for _, op in self._rows("operations", source):
            operations.setdefault(op.cluster_id, []).append(op)
            self._operations[op.id] = op
        for cluster_id, of_cluster in operations.items():
            # Rows come back in key order: sort them by seq and rebuild the running indexes.
            for forgotten in self._clusters[cluster_id].load_operations(of_cluster):
                self._forget_operation(forgotten)
        for key, inventory in self._rows("inventory", source):
            self._clusters[key].inventory = inventory
        self.idempotency.load(self._rows("idempotency", source))

    def _forget_operation(self, op: Operation) -> None:
        """An operation that left the cluster's kept history (``KEPT_FINISHED_OPERATIONS``): its row goes too."""
        self._operations.pop(op.id, None)
        self._touch("operations", op.id)

    def _wipe(self) -> None:
        self._organisations.clear()
        self._tokens.clear()
        self._clusters.clear()
        self._pools.clear()
        self._operations.clear()
        self.idempotency.clear()
        self.inventory_available = True
        self._dirty.clear()

    def close(self) -> None:
        """Commit what is pending and release the state file."""
        self.commit()
        self._store.close()


TABLES: Final[dict[str, Table[Any]]] = {
    "organisations": Table(Organisation, lambda w, key: w._organisations.get(key), lambda w: w._organisations),
    "tokens": Table(Principal, lambda w, key: w._tokens.get(key), lambda w: w._tokens),
    "clusters": Table(Cluster, lambda w, key: w._clusters.get(key), lambda w: w._clusters),
    "pools": Table(Pool, lambda w, key: w._pools.get(key), lambda w: w._pools),
    "operations": Table(Operation, lambda w, key: w._operations.get(key), lambda w: w._operations),
    "inventory": Table(Inventory, lambda w, key: c.inventory if (c := w._clusters.get(key)) else None, lambda w: w._clusters),
    "idempotency": Table(StoredAnswer, lambda w, key: w.idempotency.answers.get(key), lambda w: w.idempotency.answers),
}

__all__ = ["TABLES", "PersistentWorld", "Table", "decode", "encode"]
