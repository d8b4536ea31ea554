"""Snapshots: the whole world as one JSON file, to save, restore and start from (a fork).

A snapshot holds every row of the state file (``persistence.TABLES`` and the ``meta`` row: the
clock's time, the name counter, the inventory switch, the rng seed), as the SQLite store writes
them, and the scheduler's order: which transitions are pending and in which order events due at the
same instant run, and the launch second being handed out (``LAUNCHES_PER_SECOND``). The heap itself
is derived from the rows; the order is not, and without it two workers joining at one instant could
take each other's kubectl names after a restore. So a world restored from a snapshot goes on exactly
as the world it was saved from would have: same names, same operations finishing at the same
instant, and saving it again gives the same bytes.

The file is JSON with sorted keys, two-space indents and a final newline; lists keep the world's
order (a pool's workers, a snapshot of the node inventory, the pending events by instant). Fault
rules, the request log and idempotency keys of requests still in flight are not part of the world,
and a snapshot does not hold them. Tokens are only their SHA-256 digests, as in the state file.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from reference_backend.clock import AdjustableClock, ManualClock
from reference_backend.persistence import META, TABLES, decode
from reference_backend.simulation import Event, Simulation
from reference_backend.store import MemoryStore, Store
from reference_backend.world import Doc, iso, parse_time

SNAPSHOT_FORMAT: Final = "door-reference-backend.snapshot"
SNAPSHOT_VERSION: Final = 1
EventKind = Literal["worker", "operation", "inventory"]


class SnapshotError(ValueError):
    """A snapshot that cannot be read or restored; the message says where and what to do."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PendingEvent(_Model):
    """One pending transition: its instant, its place in the order of that instant, and what it moves."""

    at: str
    seq: int
    kind: EventKind
    cluster: str
    refs: tuple[str, str]


class LaunchSecond(_Model):
    at: str
    count: int


class Scheduler(_Model):
    event_seq: int
    events: list[PendingEvent]
    launches: dict[str, LaunchSecond]


class MetaRow(_Model):
    now: str
    counter: int
    inventory_available: bool
    rng_seed: int
    token_keys: Literal["sha256"]


class WorldSnapshot(_Model):
    """The file's outline; the rows are checked by decoding them into the world's records."""

    format: Literal["door-reference-backend.snapshot"]
    version: Literal[1]
    tables: dict[str, dict[str, dict[str, Any]]]
    scheduler: Scheduler


def dumps(doc: Doc) -> bytes:
    """The bytes of a snapshot: sorted keys, two-space indents, UTF-8, a final newline."""
    text = json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def snapshot_of(world: Simulation) -> Doc:
    """The world as a snapshot document, once every event due by the clock's time has been applied."""
    world.now()
    tables: dict[str, dict[str, Doc]] = {META: {"world": _required(world._doc_of(META, "world"))}}
    for name, table in TABLES.items():
        rows = {key: world._doc_of(name, key) for key in sorted(table.keys(world))}
        tables[name] = {key: row for key, row in rows.items() if row is not None}
    return {
        "format": SNAPSHOT_FORMAT,
        "version": SNAPSHOT_VERSION,
        "tables": tables,
        "scheduler": _scheduler_of(world),
    }


def _required(doc: Doc | None) -> Doc:
    assert doc is not None, "the meta row is always there"
    return doc


def _scheduler_of(world: Simulation) -> Doc:
    order: dict[tuple[datetime, str, str, str, str], int] = {}
    for when, seq, kind, cluster_id, first, second in world._events:
        key = (when, kind, cluster_id, first, second)
        if _pending(world, key) and seq < order.get(key, seq + 1):
            order[key] = seq  # a duplicate entry of one transition runs once: the first is the one that counts
    events = sorted(((when, seq, kind, c, f, s) for (when, kind, c, f, s), seq in order.items()), key=lambda e: e[:2])
    return {
        "event_seq": world._event_seq,
        "events": [
            {"at": iso(when), "seq": seq, "kind": kind, "cluster": c, "refs": [f, s]} for when, seq, kind, c, f, s in events
        ],
        "launches": {
            cluster.id: {"at": iso(cluster.launch_at), "count": cluster.launched}
            for cluster in sorted(world._clusters.values(), key=lambda c: c.id)
            if cluster.launch_at is not None
        },
    }


def _pending(world: Simulation, key: tuple[datetime, str, str, str, str]) -> bool:
    """Whether a heap entry will still move something (the handlers of ``Simulation.now`` skip the rest)."""
    when, kind, cluster_id, first, second = key
    cluster = world._clusters.get(cluster_id)
    if cluster is None:
        return False
    if kind == "worker":
        pool = cluster.pools.get(first)
        worker = pool.workers.get(second) if pool is not None else None
        return worker is not None and worker.next_at == when
    if kind == "operation":
        op = cluster.operations.get(first)
        return op is not None and op.status == "running" and op.due_at == when
    return cluster.inventory.refresh_at == when


def parse(data: object) -> WorldSnapshot:
    """A snapshot's bytes (or its parsed JSON) checked for its outline and every row's fields.

    Raises ``SnapshotError`` naming the first problem: not JSON, another format or version, a table
    missing or unknown, a row that is not the record of its table.
    """
    if isinstance(data, bytes | str):
        try:
            data = json.loads(data)
        except ValueError as error:
            raise SnapshotError(f"the snapshot is not JSON ({error}). Give a file `snapshot save` wrote.") from None
    if not isinstance(data, Mapping) or data.get("format") != SNAPSHOT_FORMAT:
        raise SnapshotError(
            f"this is not a reference backend snapshot (no \"format\": \"{SNAPSHOT_FORMAT}\"). "
            "Give a file `snapshot save` wrote."
        )
    if data.get("version") != SNAPSHOT_VERSION:
        raise SnapshotError(
            f"snapshot version {data.get('version')!r} is not {SNAPSHOT_VERSION}, the version this backend reads."
        )
    try:
        snapshot = WorldSnapshot.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise SnapshotError(f"snapshot field {where}: {first['msg']}. Fix it, or save the snapshot again.") from None
    expected = {META, *TABLES}
    if set(snapshot.tables) != expected:
        missing, extra = sorted(expected - set(snapshot.tables)), sorted(set(snapshot.tables) - expected)
        raise SnapshotError(f"snapshot tables: missing {missing}, unknown {extra}; a snapshot has exactly {sorted(expected)}.")
    try:
        MetaRow.model_validate(snapshot.tables[META].get("world"))
        parse_time(snapshot.tables[META]["world"]["now"])
    except (ValidationError, ValueError) as error:
        raise SnapshotError(f"snapshot tables.meta.world is not the world's meta row ({error}).") from None
    instants = [("scheduler.events", e.at) for e in snapshot.scheduler.events]
    instants += [(f"scheduler.launches[{key!r}]", launch.at) for key, launch in snapshot.scheduler.launches.items()]
    for where, text in instants:
        try:
            parse_time(text)
        except ValueError:
            raise SnapshotError(f"snapshot {where}: {text!r} is not an ISO 8601 instant.") from None
    for name, table in TABLES.items():
        for key, row in snapshot.tables[name].items():
            try:
                decode(table.record, row)
            except (KeyError, TypeError, ValueError, AttributeError) as error:
                raise SnapshotError(
                    f"snapshot tables.{name}[{key!r}] is not a {table.record.__name__} row ({type(error).__name__}: "
                    f"{error}). Fix that row, or save the snapshot again."
                ) from None
    return snapshot


class _Rows(Store):
    """A snapshot's rows, read by ``PersistentWorld._load`` as it reads the state file's."""

    def __init__(self, tables: Mapping[str, Mapping[str, Doc]]) -> None:
        self._tables = tables

    def load(self, table: str) -> Iterator[tuple[str, Any]]:
        yield from self._tables[table].items()

    @property
    def empty(self) -> bool:
        return False


def snapshot_time(snapshot: WorldSnapshot) -> datetime:
    return parse_time(snapshot.tables[META]["world"]["now"])


def restore(world: Simulation, snapshot: WorldSnapshot) -> None:
    """Replace the world, its clock's time included, with the snapshot's; a persistent store is rewritten.

    The snapshot is first loaded into a scratch world, so one that does not hold together (a pool of
    a cluster it does not have) raises ``SnapshotError`` and leaves this world as it was. Raises
    ``SnapshotError`` too when the world's clock cannot be set back or forth (not an ``AdjustableClock``).
    """
    if not isinstance(world.clock, AdjustableClock):
        raise SnapshotError("this backend's clock cannot be set to the snapshot's time; run it on a manual or scaled clock.")
    scratch = Simulation(ManualClock(snapshot_time(snapshot)), MemoryStore(), world.catalog, world.rng_seed)
    try:
        _install(scratch, snapshot)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise SnapshotError(
            f"the snapshot's rows do not make one world ({type(error).__name__}: {error}): every pool, operation and "
            "inventory row must belong to a cluster of the snapshot. Save the snapshot again."
        ) from None
    world.clock.restart(snapshot_time(snapshot))
    world._store.clear()
    world._wipe()
    _install(world, snapshot)
    for name, table in TABLES.items():
        for key in table.keys(world):
            world._touch(name, key)
    world._touch(META, "world")
    world.commit()


def _install(world: Simulation, snapshot: WorldSnapshot) -> None:
    meta = snapshot.tables[META]["world"]
    world.rng_seed = meta["rng_seed"]
    world._now = snapshot_time(snapshot)
    world._load(_Rows(snapshot.tables))
    world._rebuild_events()
    _restore_order(world, snapshot.scheduler)


def _restore_order(world: Simulation, scheduler: Scheduler) -> None:
    """Give the rebuilt heap the saved order; a transition the snapshot did not list (a row edited
    by hand) runs after the listed ones of its instant, and one already due is left out."""
    saved: dict[tuple[datetime, str, str, str, str], int] = {
        (parse_time(e.at), e.kind, e.cluster, *e.refs): e.seq for e in scheduler.events
    }
    next_seq = max(scheduler.event_seq, max(saved.values(), default=0))
    events: list[Event] = []
    for when, _, kind, cluster_id, first, second in sorted(world._events, key=lambda e: e[1]):
        if when <= world._now:
            continue  # an operation's due instant already passed: the saved world evaluated it then
        seq = saved.get((when, kind, cluster_id, first, second))
        if seq is None:
            next_seq += 1
            seq = next_seq
        events.append((when, seq, kind, cluster_id, first, second))
    heapq.heapify(events)
    world._events = events
    world._event_seq = next_seq
    for cluster in world._clusters.values():
        launch = scheduler.launches.get(cluster.id)
        cluster.launch_at, cluster.launched = (parse_time(launch.at), launch.count) if launch is not None else (None, 0)


__all__ = ["SNAPSHOT_FORMAT", "SNAPSHOT_VERSION", "SnapshotError", "WorldSnapshot", "dumps", "parse", "restore", "snapshot_of"]
