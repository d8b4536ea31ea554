"""Idempotency keys on mutations (R-ADD-09, R-PATCH-09; decision: DELETEs too)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.lowlevel
import httpx2
import pytest

from reference_backend import seed
from reference_backend.app import create_app
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.conftest import ADMIN_TOKEN, BASE_URL, auth

pytestmark = pytest.mark.anyio

CLUSTER = f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}"


def keyed(key: str, token: str = seed.DEMO_ADMIN_TOKEN) -> dict[str, str]:
    return auth(token) | {"Idempotency-Key": key}


@asynccontextmanager
async def serve(backend: ReferenceBackend) -> AsyncIterator[httpx2.AsyncClient]:
    app = create_app(backend, admin_token=ADMIN_TOKEN)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE_URL) as client:
        yield client


async def count_pools(door: httpx2.AsyncClient) -> int:
    total: int = (await door.get(f"{CLUSTER}/node-pools", headers=auth(seed.DEMO_ADMIN_TOKEN))).json()["total"]
    return total


async def test_same_key_and_body_replays_the_first_202_without_a_second_pool(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-ADD-09: the replay has the first status, body and headers plus Idempotent-Replayed."""
    body = {"name": "batch", "size": "dks.c5.large", "count": 1}
    first = await door.post(f"{CLUSTER}/node-pools", headers=keyed("k1"), json=body)
    clock.advance(60)
    again = await door.post(
        f"{CLUSTER}/node-pools", headers=keyed("k1"), json={"count": 1, "size": "dks.c5.large", "name": "batch"}
    )
    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["x-request-id"] == first.headers["x-request-id"]
    assert "idempotent-replayed" not in first.headers
    assert await count_pools(door) == 2


async def test_same_key_with_a_different_body_is_422(door: httpx2.AsyncClient) -> None:
    """R-PATCH-09 decision: same key + different body → 422."""
    assert (
        await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed("k2"), json={"count": 3})
    ).status_code == 202
    other = await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed("k2"), json={"count": 4})
    assert (other.status_code, other.json()["rule"]) == (422, "R-PATCH-09")


async def test_a_key_is_scoped_per_token_and_path(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-ADD-09 decision: a key is remembered per token (and method and path)."""
    await door.put(
        "/_reference/tokens/second-admin",
        headers=auth(ADMIN_TOKEN),
        json={"organisation": "payments", "role": "super_admin", "user": "sam"},
    )
    body = {"name": "batch", "size": "dks.c5.large"}
    assert (await door.post(f"{CLUSTER}/node-pools", headers=keyed("same"), json=body)).status_code == 202
    clash = await door.post(f"{CLUSTER}/node-pools", headers=keyed("same", "second-admin"), json=body)
    assert (clash.status_code, clash.json()["rule"]) == (409, "R-ADD-02")  # not a replay: another token


async def test_a_key_is_scoped_per_method_and_path_too(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-PATCH-09: one key on another pool's path, or with another method, is a new request, not a replay."""
    await door.post(f"{CLUSTER}/node-pools", headers=keyed("setup"), json={"name": "batch", "size": "dks.c5.large"})
    clock.advance(600)
    workers = await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed("same"), json={"count": 3})
    batch = await door.patch(f"{CLUSTER}/node-pools/batch", headers=keyed("same"), json={"count": 3})
    assert (workers.status_code, batch.status_code) == (202, 202)
    assert "idempotent-replayed" not in batch.headers
    listed = await door.get(f"{CLUSTER}/node-pools", headers=auth(seed.DEMO_ADMIN_TOKEN))
    counts = {p["name"]: p["count"] for p in listed.json()["items"]}
    assert counts == {"workers": 3, "batch": 3}
    clock.advance(600)
    deleted = await door.delete(f"{CLUSTER}/node-pools/batch", headers=keyed("same"))
    assert deleted.status_code == 202, deleted.text  # not the PATCH's 422 "key reused with another body"
    assert "idempotent-replayed" not in deleted.headers


async def test_a_key_is_forgotten_after_24_hours(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-ADD-09 decision: 24 h of simulated time."""
    await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed("k3"), json={"labels": {"a": "1"}})
    clock.advance(24 * 3600)
    fresh = await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed("k3"), json={"labels": {"a": "2"}})
    assert fresh.status_code == 202
    assert "idempotent-replayed" not in fresh.headers


async def test_a_refused_request_does_not_store_its_key(door: httpx2.AsyncClient) -> None:
    """Only 2xx answers are stored: a corrected retry with the same key is handled afresh."""
    refused = await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed("k4"), json={"count": 0})
    assert refused.status_code == 422
    assert (
        await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed("k4"), json={"count": 3})
    ).status_code == 202


async def test_a_replayed_delete_does_not_delete_twice(door: httpx2.AsyncClient) -> None:
    """Decision: Idempotency-Key on DELETE too; the replay is the first 202, not a 404 for a deleting pool."""
    await door.post(
        f"{CLUSTER}/node-pools", headers=auth(seed.DEMO_ADMIN_TOKEN), json={"name": "batch", "size": "dks.c5.large"}
    )
    first = await door.delete(f"{CLUSTER}/node-pools/batch", headers=keyed("d1"))
    assert first.status_code == 409  # R-OP-01: the create is still running
    await door.put("/_reference/clock", headers=auth(ADMIN_TOKEN), json={"now": "2026-10-01T12:05:00Z"})
    first = await door.delete(f"{CLUSTER}/node-pools/batch", headers=keyed("d1"))
    again = await door.delete(f"{CLUSTER}/node-pools/batch", headers=keyed("d1"))
    assert (first.status_code, again.status_code) == (202, 202)
    assert again.headers["idempotent-replayed"] == "true"


async def test_same_key_while_the_first_is_in_flight_is_409(
    door: httpx2.AsyncClient, backend: ReferenceBackend
) -> None:
    """R-PATCH-09: a concurrent retry with the same key meets 409 while the first waits on a latency fault."""
    fault = {
        "route": "PATCH /v1/public/clusters/{cluster_id}/node-pools/{pool_name}",
        "status": None,
        "latency_ms": 300,
        "count": 1,
    }
    assert (await door.post("/_reference/faults", headers=auth(ADMIN_TOKEN), json=fault)).status_code == 201
    answers: dict[str, httpx2.Response] = {}

    async def send(label: str) -> None:
        answers[label] = await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed("slow"), json={"count": 3})

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(send, "first")
            while not backend.idempotency.in_flight:
                await anyio.lowlevel.checkpoint()
            group.start_soon(send, "second")
    assert answers["first"].status_code == 202
    assert (answers["second"].status_code, answers["second"].json()["rule"]) == (409, "R-PATCH-09")
    replay = await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed("slow"), json={"count": 3})
    assert replay.headers["idempotent-replayed"] == "true"


async def test_expired_keys_are_forgotten_not_kept_forever(tmp_path: Path) -> None:
    """R-ADD-09 decision (24 h): after a day the answer is dropped from memory and from the state file."""
    clock = ManualClock()
    backend = ReferenceBackend(clock, state_path=tmp_path / "door.sqlite")
    async with serve(backend) as door:
        for key in ("old-1", "old-2"):
            await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed(key), json={"labels": {"k": key}})
            clock.advance(2)
        clock.advance(24 * 3600)
        await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed("new"), json={"labels": {"k": "new"}})
    assert len(backend.idempotency.answers) == 1
    rows = sqlite3.connect(tmp_path / "door.sqlite").execute("SELECT COUNT(*) FROM idempotency").fetchone()[0]
    assert rows == 1
    backend.close()


async def test_a_reloaded_state_file_forgets_its_expired_keys_too(tmp_path: Path) -> None:
    """Answers are reloaded in expiry order, whatever the order of their rows, so the oldest go first."""
    state = tmp_path / "door.sqlite"
    first = ReferenceBackend(ManualClock(), state_path=state)
    workers = f"{CLUSTER}/node-pools/workers"
    async with serve(first) as door:
        await door.patch(workers, headers=keyed("reused"), json={"labels": {"at": "0h"}})
        first.clock.advance(12 * 3600)  # type: ignore[attr-defined]
        await door.patch(workers, headers=keyed("middle"), json={"labels": {"at": "12h"}})
        first.clock.advance(12 * 3600)  # type: ignore[attr-defined]
        # Expired, so a new request: its row is updated in place and now holds the latest expiry.
        await door.patch(workers, headers=keyed("reused"), json={"labels": {"at": "24h"}})
    first.close()
    clock = ManualClock()
    second = ReferenceBackend(clock, state_path=state)
    clock.advance(12 * 3600 + 1)  # "middle" has expired, "reused" has not
    async with serve(second) as door:
        await door.patch(workers, headers=keyed("third"), json={"labels": {"at": "36h"}})
        replay = await door.patch(workers, headers=keyed("reused"), json={"labels": {"at": "24h"}})
    assert replay.headers["idempotent-replayed"] == "true"
    assert len(second.idempotency.answers) == 2
    second.close()
