"""Snapshots: the whole world saved to one JSON file, restored byte for byte, forked, continued as it would have."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from reference_backend import seed, snapshots
from reference_backend.app import create_app
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import DEFAULT_START, ManualClock
from reference_backend.persistence import TABLES
from tests.conftest import ADMIN_TOKEN, BASE_URL, auth

pytestmark = pytest.mark.anyio

ADMIN = auth(seed.DEMO_ADMIN_TOKEN)
CLUSTER = f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}"


@asynccontextmanager
async def serve(backend: ReferenceBackend) -> AsyncIterator[httpx2.AsyncClient]:
    app = create_app(backend, admin_token=ADMIN_TOKEN)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE_URL) as client:
        yield client


def restored(data: bytes) -> ReferenceBackend:
    return ReferenceBackend(ManualClock(), snapshot=snapshots.parse(data))


def advance(backend: ReferenceBackend, seconds: float) -> None:
    clock = backend.clock
    assert isinstance(clock, ManualClock)
    clock.advance(seconds)


async def busy(backend: ReferenceBackend) -> None:
    """A world with something of everything in flight: a pool provisioning (with an idempotent answer),
    a pool scaling, a node replacement, a queued inventory refresh, workers mid-lifecycle."""
    async with serve(backend) as door:
        body = {"name": "batch", "size": "dks.c5.large", "count": 2}
        added = await door.post(f"{CLUSTER}/node-pools", json=body, headers=ADMIN | {"Idempotency-Key": "add-batch"})
        assert added.status_code == 202, added.text
        advance(backend, 3)
        assert (await door.patch(f"{CLUSTER}/node-pools/workers", json={"count": 4}, headers=ADMIN)).status_code == 202
        replaced = await door.delete(f"{CLUSTER}/nodes/{seed.DEMO_NODE_NAME}", headers=ADMIN)
        assert replaced.status_code == 202
        assert (await door.get(f"{CLUSTER}/nodes", headers=ADMIN)).json()["cold"] is True
        advance(backend, 15)


async def test_a_snapshot_round_trip_is_byte_identical() -> None:
    """Save, restore, save again: the same bytes, for the demo world and for one with everything in flight."""
    backend = ReferenceBackend(ManualClock())
    assert restored(backend.save_snapshot()).save_snapshot() == backend.save_snapshot()
    await busy(backend)
    saved = backend.save_snapshot()
    assert restored(saved).save_snapshot() == saved
    backend.restore_snapshot(saved)  # in place, into the world it came from
    assert backend.save_snapshot() == saved


async def test_the_file_is_json_with_sorted_keys_and_every_table_of_the_world() -> None:
    backend = ReferenceBackend(ManualClock())
    await busy(backend)
    saved = backend.save_snapshot()
    document = json.loads(saved)
    assert saved == (json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()
    assert set(document["tables"]) == {"meta", *TABLES}
    assert document["tables"]["meta"]["world"]["now"] == "2026-10-01T12:00:18Z"  # the clock
    assert len(document["tables"]["idempotency"]) == 1  # the add's answer, replayable
    running = [op for op in document["tables"]["operations"].values() if op["status"] == "running"]
    assert {op["kind"] for op in running} == {"pool.create", "pool.update", "node.replace"}
    for token in seed.DEMO_TOKENS:
        assert token.encode() not in saved  # tokens only as their SHA-256 digests


async def test_a_running_operation_continues_after_a_restore_as_it_would_have() -> None:
    """The restored world and the original, moved on alike, answer alike at every step and end in the same bytes."""
    original = ReferenceBackend(ManualClock())
    await busy(original)
    copy = restored(original.save_snapshot())
    async with serve(original) as left, serve(copy) as right:
        for _ in range(30):
            advance(original, 7)
            advance(copy, 7)
            for path in (f"{CLUSTER}/state", f"{CLUSTER}/nodes", f"{CLUSTER}/node-pools"):
                assert (await left.get(path, headers=ADMIN)).json() == (await right.get(path, headers=ADMIN)).json()
        state = (await right.get(f"{CLUSTER}/state", headers=ADMIN)).json()
    assert [op["status"] for op in state["operations"]] == ["succeeded"] * 3
    assert copy.save_snapshot() == original.save_snapshot()


async def test_workers_joining_at_one_instant_keep_their_order_and_names_after_a_restore() -> None:
    """Pool `batch` (made later) launches its workers before `workers` scales at the same instant; the heap
    rebuilt from the rows alone would name `workers`' first. The snapshot keeps the order."""
    original = ReferenceBackend(ManualClock())
    async with serve(original) as door:
        body = {"name": "batch", "size": "dks.c5.large", "count": 2}
        assert (await door.post(f"{CLUSTER}/node-pools", json=body, headers=ADMIN)).status_code == 202
        assert (await door.patch(f"{CLUSTER}/node-pools/workers", json={"count": 4}, headers=ADMIN)).status_code == 202
    advance(original, 5)
    copy = restored(original.save_snapshot())
    for world in (original, copy):
        advance(world, 200)
    assert copy.save_snapshot() == original.save_snapshot()


async def test_a_fork_diverges_and_leaves_the_other_world_alone() -> None:
    """Two backends from one snapshot: a change to one is not in the other, and each goes on by itself."""
    source = ReferenceBackend(ManualClock())
    await busy(source)
    saved = source.save_snapshot()
    left, right = restored(saved), restored(saved)
    async with serve(left) as door:
        assert (await door.patch(f"{CLUSTER}/node-pools/batch", json={"labels": {"fork": "left"}}, headers=ADMIN)).status_code == 409
        advance(left, 300)
        assert (await door.patch(f"{CLUSTER}/node-pools/batch", json={"labels": {"fork": "left"}}, headers=ADMIN)).status_code == 202
    assert right.save_snapshot() == saved
    async with serve(right) as door:
        pools = (await door.get(f"{CLUSTER}/node-pools", headers=ADMIN)).json()["items"]
    assert [p["labels"] for p in pools if p["name"] == "batch"] == [{}]
    assert left.save_snapshot() != saved


async def test_an_idempotency_record_replays_after_a_restore() -> None:
    """R-ADD-09: the key's first answer is part of the world; the restored world replays it, adding nothing."""
    original = ReferenceBackend(ManualClock())
    await busy(original)
    copy = restored(original.save_snapshot())
    async with serve(copy) as door:
        body = {"name": "batch", "size": "dks.c5.large", "count": 2}
        replay = await door.post(f"{CLUSTER}/node-pools", json=body, headers=ADMIN | {"Idempotency-Key": "add-batch"})
        assert replay.status_code == 202 and replay.headers["idempotent-replayed"] == "true"
        pools = (await door.get(f"{CLUSTER}/node-pools", headers=ADMIN)).json()["items"]
    assert [p["name"] for p in pools].count("batch") == 1


async def test_clusters_keep_the_order_they_were_made_in() -> None:
    """`GET /clusters` lists in creation order; rows are keyed by id, so a snapshot must not sort them by id."""
    backend = ReferenceBackend(ManualClock())
    backend.install_cluster(name="zulu", organisation="payments", cluster_id="zz-cluster")
    backend.install_cluster(name="alpha", organisation="payments", cluster_id="aa-cluster")
    async with serve(restored(backend.save_snapshot())) as door:
        names = [c["name"] for c in (await door.get("/v1/public/clusters", headers=ADMIN)).json()["items"]]
    assert names == ["payments-prod", "payments-staging", "zulu", "alpha"]


async def test_a_restore_brings_the_clock_back_to_the_snapshots_time() -> None:
    clock = ManualClock()
    backend = ReferenceBackend(clock)
    saved = backend.save_snapshot()
    clock.advance(3600)
    backend.restore_snapshot(saved)
    assert clock.now() == DEFAULT_START
    fresh = ManualClock()
    fresh.advance(86_400)
    ReferenceBackend(fresh, snapshot=snapshots.parse(saved))
    assert fresh.now() == DEFAULT_START


def _edited(data: bytes, change: Any) -> bytes:
    document = json.loads(data)
    change(document)
    return json.dumps(document).encode()


def _orphan_pool(document: dict[str, Any]) -> None:
    pool = document["tables"]["pools"][seed.DEMO_POOL_ID]
    pool["cluster_id"] = "no-such-cluster"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("scheduler"), "snapshot field scheduler"),
        (lambda d: d.update(format="sqlite"), "not a reference backend snapshot"),
        (lambda d: d.update(version=2), "version 2"),
        (lambda d: d["tables"].pop("idempotency"), "missing ['idempotency']"),
        (lambda d: d["tables"]["pools"][seed.DEMO_POOL_ID].pop("count"), f"tables.pools['{seed.DEMO_POOL_ID}']"),
        (lambda d: d["tables"]["meta"]["world"].update(now="yesterday"), "tables.meta.world"),
        (_orphan_pool, "must belong to a cluster of the snapshot"),
    ],
)
async def test_a_snapshot_that_cannot_be_restored_names_why_and_changes_nothing(change: Any, message: str) -> None:
    backend = ReferenceBackend(ManualClock())
    await busy(backend)
    before = backend.save_snapshot()
    with pytest.raises(snapshots.SnapshotError, match=message.replace("[", r"\[").replace("]", r"\]")):
        backend.restore_snapshot(_edited(ReferenceBackend(ManualClock()).save_snapshot(), change))
    assert backend.save_snapshot() == before
    with pytest.raises(snapshots.SnapshotError, match="not JSON"):
        backend.restore_snapshot(b"{not json")


async def test_a_restore_rewrites_the_state_file(tmp_path: Path) -> None:
    """With --state, the snapshot's world replaces the file's; a backend opened on the file later has it."""
    busy_world = ReferenceBackend(ManualClock())
    await busy(busy_world)
    saved = busy_world.save_snapshot()
    state = tmp_path / "door.sqlite3"
    on_file = ReferenceBackend(ManualClock(), seed="empty", state_path=state, snapshot=snapshots.parse(saved))
    on_file.close()
    reopened = json.loads(ReferenceBackend(ManualClock(), state_path=state).save_snapshot())
    # The rows; the state file keeps no scheduler order (a restart rebuilds it from the rows).
    assert reopened["tables"] == json.loads(saved)["tables"]


async def test_the_admin_plane_saves_and_restores_a_world_larger_than_any_other_body() -> None:
    """`GET`/`PUT /_reference/snapshot`; a 200-worker pool's snapshot is far over the 64 KiB body limit."""
    backend = ReferenceBackend(ManualClock())
    backend.set_credit("payments", 1e9)
    async with serve(backend) as door:
        admin = auth(ADMIN_TOKEN)
        assert (await door.patch(f"{CLUSTER}/node-pools/workers", json={"count": 200}, headers=ADMIN)).status_code == 202
        await door.post("/_reference/clock/advance", json={"seconds": 200}, headers=admin)
        saved = (await door.get("/_reference/snapshot", headers=admin)).content
        assert len(saved) > 64 * 1024
        await door.post("/_reference/faults", json={"route": "*", "status": 500, "count": None}, headers=admin)
        assert (await door.post("/_reference/reset", json={"seed": "empty"}, headers=admin)).status_code == 200
        put = await door.put("/_reference/snapshot", content=saved, headers=admin | {"Content-Type": "application/json"})
        assert put.status_code == 200 and put.json() == {"ok": True, "now": "2026-10-01T12:03:20Z"}
        assert (await door.get("/_reference/snapshot", headers=admin)).content == saved
        assert (await door.get("/_reference/faults", headers=admin)).json() == []  # cleared, as on a reset
        refused = await door.put("/_reference/snapshot", json={"format": "x"}, headers=admin)
        assert refused.status_code == 422 and "not a reference backend snapshot" in refused.json()["detail"]
        assert (await door.get("/_reference/snapshot")).status_code == 401
        unauthenticated = await door.put("/_reference/snapshot", content=saved, headers=ADMIN)
        assert unauthenticated.status_code == 401
        assert (await door.get("/_reference/snapshot", headers=admin)).content == saved
