"""Idempotency keys on mutations (R-ADD-09, R-PATCH-09; decision: DELETEs too)."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import httpx2
import pytest

from reference_backend import seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.conftest import ADMIN_TOKEN, auth

pytestmark = pytest.mark.anyio

CLUSTER = f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}"


def keyed(key: str, token: str = seed.DEMO_ADMIN_TOKEN) -> dict[str, str]:
    return auth(token) | {"Idempotency-Key": key}


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
