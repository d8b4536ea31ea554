"""Persistence: an SQLite state file survives a restart, operations in flight included."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path

import httpx2
import pytest

from reference_backend import seed
from reference_backend.app import create_app
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.world import token_digest
from tests.conftest import ADMIN_TOKEN, BASE_URL, auth

pytestmark = pytest.mark.anyio

ADMIN = auth(seed.DEMO_ADMIN_TOKEN)
CLUSTER = f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}"


@asynccontextmanager
async def serve(backend: ReferenceBackend) -> AsyncIterator[httpx2.AsyncClient]:
    app = create_app(backend, admin_token=ADMIN_TOKEN)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE_URL) as client:
        yield client


async def test_a_restart_keeps_the_world_and_the_operation_in_flight_completes(tmp_path: Path) -> None:
    """Every accepted mutation is committed before its 202; a new backend on the file carries on."""
    state = tmp_path / "door.sqlite"
    first = ReferenceBackend(ManualClock(), state_path=state)
    async with serve(first) as door:
        assert (
            await door.patch(
                f"{CLUSTER}/node-pools/workers", headers=ADMIN | {"Idempotency-Key": "p1"}, json={"count": 3}
            )
        ).status_code == 202
        await door.put("/_reference/organisations/payments", headers=auth(ADMIN_TOKEN), json={"credit": 1234.5})
        await door.put(
            "/_reference/tokens/new-token",
            headers=auth(ADMIN_TOKEN),
            json={"organisation": "payments", "role": "member", "user": "nia"},
        )
        first.clock.advance(50)  # type: ignore[attr-defined]
        before = (await door.get(f"{CLUSTER}/state", headers=ADMIN)).json()
    # No close(): a crash right after the answers must lose nothing.

    clock = ManualClock()
    second = ReferenceBackend(clock, state_path=state)
    assert clock.now().isoformat() == "2026-10-01T12:00:50+00:00"  # the simulated time survives
    assert second.credit("payments") == 1234.5
    async with serve(second) as door:
        assert (await door.get(f"{CLUSTER}/state", headers=ADMIN)).json() == before
        assert before["operations"][0]["status"] == "running"
        assert (await door.get(CLUSTER, headers=auth("new-token"))).status_code == 200
        replay = await door.patch(
            f"{CLUSTER}/node-pools/workers", headers=ADMIN | {"Idempotency-Key": "p1"}, json={"count": 3}
        )
        assert replay.headers["idempotent-replayed"] == "true"
        clock.advance(70)
        op = (await door.get(f"{CLUSTER}/state", headers=ADMIN)).json()["operations"][0]
        assert (op["status"], op["message"], op["finished_at"]) == (
            "succeeded",
            "3/3 workers Running",
            "2026-10-01T12:02:00Z",
        )
    second.close()


async def test_a_new_file_is_seeded_and_an_existing_one_is_reloaded_not_reseeded(tmp_path: Path) -> None:
    """The seed applies to an empty file only."""
    state = tmp_path / "door.sqlite"
    first = ReferenceBackend(ManualClock(), state_path=state, seed="demo")
    async with serve(first) as door:
        await door.post(f"{CLUSTER}/node-pools", headers=ADMIN, json={"name": "batch", "size": "dks.c5.large"})
    first.close()
    second = ReferenceBackend(ManualClock(), state_path=state, seed="empty")
    async with serve(second) as door:
        names = [p["name"] for p in (await door.get(f"{CLUSTER}/node-pools", headers=ADMIN)).json()["items"]]
    assert names == ["workers", "batch"]
    second.close()


async def test_a_mutation_of_one_pool_rewrites_only_its_rows(tmp_path: Path) -> None:
    """Design for size: a patch writes the pool row and the operation row, not every cluster and pool."""
    state = tmp_path / "door.sqlite"
    backend = ReferenceBackend(ManualClock(), state_path=state)
    writes: list[str] = []
    store = backend._store
    original = store.write

    def spy(upserts: dict[tuple[str, str], object], deletes: set[tuple[str, str]]) -> None:
        writes.extend(f"{table}:{key}" for table, key in upserts)
        original(upserts, deletes)

    store.write = spy  # type: ignore[method-assign]
    async with serve(backend) as door:
        await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"count": 3})
    tables = sorted({w.split(":")[0] for w in writes})
    assert tables == ["meta", "operations", "pools"]
    assert [w for w in writes if w.startswith("pools:")] == [f"pools:{seed.DEMO_POOL_ID}"]
    backend.close()


async def test_two_hundred_pools_of_two_hundred_nodes_list_in_one_request(tmp_path: Path) -> None:
    """Design for size: 40,000 workers are listed from memory in one request, no per-node queries."""
    backend = ReferenceBackend(ManualClock(), state_path=tmp_path / "big.sqlite")
    from backend_client.models import PublicNodePoolCreateRequest

    backend.install_cluster(
        name="big",
        organisation="payments",
        cluster_id="big",
        pools=[PublicNodePoolCreateRequest(name=f"p{i}", size="dks.c5.large", count=200) for i in range(200)],
    )
    async with serve(backend) as door:
        await door.get("/v1/public/clusters/big/nodes", headers=ADMIN)
        backend.clock.advance(2)  # type: ignore[attr-defined]
        body = (await door.get("/v1/public/clusters/big/nodes", headers=ADMIN)).json()
        assert body["total"] == 40_000
        pools = (await door.get("/v1/public/clusters/big/node-pools", headers=ADMIN)).json()
        assert pools["total"] == 200
    backend.close()
    rows = sqlite3.connect(tmp_path / "big.sqlite").execute("SELECT COUNT(*) FROM pools").fetchone()[0]
    assert rows == 200 + 3  # the demo seed has three pools


async def test_the_node_inventory_snapshot_survives_a_restart(tmp_path: Path) -> None:
    """R-NODE-03/04: a restart does not turn a fresh snapshot cold again; it is served as it was taken."""
    state = tmp_path / "door.sqlite"
    first = ReferenceBackend(ManualClock(), state_path=state)
    async with serve(first) as door:
        await door.get(f"{CLUSTER}/nodes", headers=ADMIN)
        first.clock.advance(2)  # type: ignore[attr-defined]
        before = (await door.get(f"{CLUSTER}/nodes", headers=ADMIN)).json()
    assert (before["cold"], before["total"]) == (False, 2)
    second = ReferenceBackend(ManualClock(), state_path=state)
    async with serve(second) as door:
        assert (await door.get(f"{CLUSTER}/nodes", headers=ADMIN)).json() == before
    second.close()


class PowerCut(Exception):
    """The process dying between two writes of the state file."""


@pytest.mark.parametrize(
    ("method", "path", "body", "kind"),
    [
        ("POST", f"{CLUSTER}/node-pools", {"name": "batch", "size": "dks.c5.large"}, "pool.create"),
        ("PATCH", f"{CLUSTER}/node-pools/workers", {"count": 3}, "pool.update"),
    ],
)
async def test_a_change_and_its_idempotency_record_are_one_write_so_a_retry_after_a_crash_replays(
    tmp_path: Path, method: str, path: str, body: dict[str, object], kind: str
) -> None:
    """R-ADD-09, R-PATCH-09: the process dies at the first state-file write after the one holding the
    change. The change and the answer stored for its Idempotency-Key must be in that one write, so the
    retry with the same key on the restarted backend is a replay (202, one pool, one operation), not
    409 R-ADD-02 for the pool it created nor a second pool.update."""
    state = tmp_path / "door.sqlite"
    first = ReferenceBackend(ManualClock(), state_path=state)
    store = first._store
    original = store.write
    written: list[set[str]] = []

    def write_then_die(upserts: dict[tuple[str, str], object], deletes: set[tuple[str, str]]) -> None:
        if written:
            raise PowerCut
        written.append({table for table, _ in upserts})
        original(upserts, deletes)  # type: ignore[arg-type]

    store.write = write_then_die  # type: ignore[method-assign]
    key = ADMIN | {"Idempotency-Key": "crash-1"}
    async with serve(first) as door:
        await door.request(method, path, headers=key, json=body)
    assert {"pools", "operations", "idempotency"} <= written[0]

    second = ReferenceBackend(ManualClock(), state_path=state)
    async with serve(second) as door:
        retry = await door.request(method, path, headers=key, json=body)
        assert (retry.status_code, retry.headers.get("idempotent-replayed")) == (202, "true"), retry.text
        operations = (await door.get(f"{CLUSTER}/state", headers=ADMIN)).json()["operations"]
        assert [op["kind"] for op in operations] == [kind]
        pools = (await door.get(f"{CLUSTER}/node-pools", headers=ADMIN)).json()["items"]
        assert sorted(p["name"] for p in pools) == (["batch", "workers"] if method == "POST" else ["workers"])
    second.close()
    store.close()


def _state_bytes(state: Path) -> tuple[list[Path], bytes]:
    """The state file, its WAL and shared-memory index, and all their bytes together."""
    files = sorted(state.parent.glob(state.name + "*"))
    return files, b"".join(path.read_bytes() for path in files)


async def test_the_state_file_keeps_tokens_as_sha256_digests_only(tmp_path: Path) -> None:
    """R-AUTH-01: a token is kept (and looked up) by its SHA-256; no byte of the state file or its WAL
    is a token, and a backend restarted from the file still knows every token, and only those."""
    state = tmp_path / "door.sqlite"
    first = ReferenceBackend(ManualClock(), state_path=state)
    issued, revoked = "nia-3b1f9c-issued-token", "old-7d2e4a-revoked-token"
    async with serve(first) as door:
        for token in (issued, revoked):
            body = {"organisation": "payments", "role": "member", "user": "nia"}
            assert (await door.put(f"/_reference/tokens/{token}", headers=auth(ADMIN_TOKEN), json=body)).is_success
        assert (await door.delete(f"/_reference/tokens/{revoked}", headers=auth(ADMIN_TOKEN))).status_code == 204
        added = await door.post(
            f"{CLUSTER}/node-pools",
            headers=ADMIN | {"Idempotency-Key": "add-batch"},
            json={"name": "batch", "size": "dks.c5.large"},
        )
        assert added.status_code == 202
        assert (await door.get(CLUSTER, headers=auth(issued))).status_code == 200
    # No close: what a crash leaves behind, the write-ahead log included.
    files, raw = _state_bytes(state)
    assert state.with_name("door.sqlite-wal") in files
    for token in (*seed.DEMO_TOKENS, issued, revoked, ADMIN_TOKEN):
        assert token.encode() not in raw, token
    assert token_digest(issued).encode() in raw

    second = ReferenceBackend(ManualClock(), state_path=state)
    async with serve(second) as door:
        assert (await door.get(CLUSTER, headers=auth(issued))).status_code == 200
        assert (await door.get(CLUSTER, headers=ADMIN)).status_code == 200
        assert (await door.get(CLUSTER, headers=auth(revoked))).status_code == 401
        replay = await door.post(
            f"{CLUSTER}/node-pools",
            headers=ADMIN | {"Idempotency-Key": "add-batch"},
            json={"name": "batch", "size": "dks.c5.large"},
        )
        assert (replay.status_code, replay.headers.get("idempotent-replayed")) == (202, "true")
    second.close()
    first.close()


async def test_a_state_file_with_raw_token_keys_is_rewritten_to_digests(tmp_path: Path) -> None:
    """R-AUTH-01: a file written before tokens were hashed still authenticates its tokens, and the
    load rewrites its rows so that the raw token leaves the file."""
    state = tmp_path / "door.sqlite"
    ReferenceBackend(ManualClock(), state_path=state).close()
    with sqlite3.connect(state) as db:  # the old layout: raw tokens as keys, no token_keys marker
        for token in seed.DEMO_TOKENS:
            db.execute("UPDATE tokens SET key = ? WHERE key = ?", (token, token_digest(token)))
        db.execute("UPDATE meta SET doc = json_remove(doc, '$.token_keys')")
    db.close()
    legacy = ReferenceBackend(ManualClock(), state_path=state)
    async with serve(legacy) as door:
        assert (await door.get(CLUSTER, headers=ADMIN)).status_code == 200
    legacy.close()
    with closing(sqlite3.connect(state)) as db:
        keys = {row[0] for row in db.execute("SELECT key FROM tokens")}
    assert keys == {token_digest(token) for token in seed.DEMO_TOKENS}


async def test_a_state_file_from_before_clusters_kept_their_order_still_loads(tmp_path: Path) -> None:
    """A row without a field that has a default (a cluster's ``seq``, added later) loads with the default."""
    state = tmp_path / "door.sqlite"
    ReferenceBackend(ManualClock(), state_path=state).close()
    with closing(sqlite3.connect(state)) as db, db:
        for key, doc in db.execute("SELECT key, doc FROM clusters").fetchall():
            row = json.loads(doc)
            del row["seq"]
            db.execute("UPDATE clusters SET doc = ? WHERE key = ?", (json.dumps(row), key))
    reopened = ReferenceBackend(ManualClock(), state_path=state)
    async with serve(reopened) as door:
        listed = (await door.get("/v1/public/clusters", headers=ADMIN)).json()["items"]
    assert [c["name"] for c in listed] == ["payments-prod", "payments-staging"]
