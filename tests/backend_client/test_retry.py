"""The retry policy: what is retried, how long the client waits, and how ambiguity is settled."""

from __future__ import annotations

import random
from datetime import timedelta

import httpx2
import pytest

from backend_client import DoorClient
from backend_client import _constants as C
from backend_client._retry import fresh_poll_delay, retry_delay
from backend_client.errors import (
    Conflict,
    DoorConnectionError,
    DoorTimeoutError,
    OutcomeUnknown,
    ServerError,
    ServiceUnavailable,
)
from backend_client.models import PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from tests.backend_client.fakes import (
    CLUSTER_ID,
    NOW,
    FakeDoor,
    Sleeps,
    cluster,
    make_client,
    node_list,
    ok,
    operation,
    pool,
    problem,
    sent_json,
    state,
)

pytestmark = pytest.mark.anyio

CLUSTER = f"/clusters/{CLUSTER_ID}"
WORKERS = f"{CLUSTER}/node-pools/workers"


def test_policy_constants_follow_the_anthropic_sdk() -> None:
    assert C.DEFAULT_MAX_RETRIES == 2
    assert C.INITIAL_RETRY_DELAY == 0.5
    assert C.MAX_RETRY_DELAY == 8.0
    assert C.MAX_RETRY_AFTER == 60.0
    assert 503 in C.RETRYABLE_STATUSES and 500 in C.RETRYABLE_STATUSES


def test_backoff_doubles_from_the_initial_delay_up_to_the_cap_with_jitter() -> None:
    no_jitter = random.Random()
    no_jitter.random = lambda: 0.0  # type: ignore[method-assign]
    full_jitter = random.Random()
    full_jitter.random = lambda: 1.0  # type: ignore[method-assign]
    assert [retry_delay(n, rng=no_jitter) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert retry_delay(0, rng=full_jitter) == C.INITIAL_RETRY_DELAY * (1 - C.RETRY_JITTER)
    for attempt in range(8):
        delay = retry_delay(attempt)
        base = min(C.INITIAL_RETRY_DELAY * 2**attempt, C.MAX_RETRY_DELAY)
        assert base * (1 - C.RETRY_JITTER) <= delay <= base


def test_retry_after_wins_and_is_capped() -> None:
    assert retry_delay(0, 5.0) == 5.0
    assert retry_delay(3, 0.0) == 0.0
    assert retry_delay(0, 3600.0) == C.MAX_RETRY_AFTER


async def test_get_retries_a_503_after_its_retry_after() -> None:
    door = FakeDoor(
        {
            f"GET {CLUSTER}/nodes": [
                problem(503, "Service Unavailable", rule="R-NODE-05", headers={"Retry-After": "5"}),
                problem(503, "Service Unavailable", rule="R-NODE-05", headers={"Retry-After": "7"}),
                ok(node_list()),
            ]
        }
    )
    sleeps = Sleeps()
    async with make_client(door, sleeps) as client:
        nodes = await client.list_nodes(CLUSTER_ID)
    assert nodes.total == 1
    assert sleeps.delays == [5.0, 7.0]
    assert len(door.requests) == 3


async def test_retry_after_beyond_the_cap_waits_only_the_cap() -> None:
    door = FakeDoor(
        {
            f"GET {CLUSTER}": [
                problem(503, "Service Unavailable", headers={"Retry-After": "86400"}),
                ok(cluster()),
            ]
        }
    )
    sleeps = Sleeps()
    async with make_client(door, sleeps) as client:
        await client.get_cluster(CLUSTER_ID)
    assert sleeps.delays == [C.MAX_RETRY_AFTER]


async def test_get_gives_up_after_max_retries_with_backoff() -> None:
    door = FakeDoor({f"GET {CLUSTER}": [problem(500, "Internal Server Error")]})
    sleeps = Sleeps()
    async with make_client(door, sleeps) as client:
        with pytest.raises(ServerError):
            await client.get_cluster(CLUSTER_ID)
    assert len(door.requests) == 1 + C.DEFAULT_MAX_RETRIES
    assert len(sleeps.delays) == C.DEFAULT_MAX_RETRIES
    first, second = sleeps.delays
    assert C.INITIAL_RETRY_DELAY * (1 - C.RETRY_JITTER) <= first <= C.INITIAL_RETRY_DELAY
    assert 2 * C.INITIAL_RETRY_DELAY * (1 - C.RETRY_JITTER) <= second <= 2 * C.INITIAL_RETRY_DELAY


async def test_get_retries_connection_errors_and_timeouts() -> None:
    door = FakeDoor({f"GET {CLUSTER}": [httpx2.ConnectError("refused"), httpx2.ReadTimeout("slow"), ok(cluster())]})
    async with make_client(door) as client:
        assert (await client.get_cluster(CLUSTER_ID)).id == CLUSTER_ID
    assert len(door.requests) == 3


async def test_max_retries_zero_sends_once() -> None:
    door = FakeDoor({f"GET {CLUSTER}": [httpx2.ReadTimeout("slow")]})
    async with make_client(door, max_retries=0) as client:
        with pytest.raises(DoorTimeoutError):
            await client.get_cluster(CLUSTER_ID)
    assert len(door.requests) == 1


async def test_client_errors_are_never_retried() -> None:
    door = FakeDoor({f"PATCH {WORKERS}": [problem(409, "Conflict", rule="R-OP-01")]})
    sleeps = Sleeps()
    async with make_client(door, sleeps) as client:
        with pytest.raises(Conflict):
            await client.update_node_pool(CLUSTER_ID, "workers", _patch(), idempotency_key="k")
    assert len(door.requests) == 1
    assert sleeps.delays == []


async def test_keyed_patch_is_retried_with_the_same_key_and_body() -> None:
    door = FakeDoor({f"PATCH {WORKERS}": [problem(503, "Service Unavailable"), ok(cluster(pool(count=4)), 202)]})
    async with make_client(door) as client:
        result = await client.update_node_pool(CLUSTER_ID, "workers", _patch(), idempotency_key="card-1")
    assert result.pool("workers").count == 4  # type: ignore[union-attr]
    first, second = door.requests
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"] == "card-1"
    assert first.content == second.content
    assert sent_json(second) == {"count": 4}


@pytest.mark.parametrize("method", ["POST", "PATCH", "DELETE", "DELETE node"])
async def test_mutations_without_key_are_never_retried(method: str) -> None:
    """A refused-before-sending failure is raised as it is: the request did not leave, nothing changed."""
    door = FakeDoor(
        {
            f"POST {CLUSTER}/node-pools": [httpx2.ConnectError("refused")],
            f"PATCH {WORKERS}": [httpx2.ConnectError("refused")],
            f"DELETE {WORKERS}": [httpx2.ConnectError("refused")],
            f"DELETE {CLUSTER}/nodes/n1": [httpx2.ConnectError("refused")],
        }
    )
    sleeps = Sleeps()
    async with make_client(door, sleeps) as client:
        with pytest.raises(DoorConnectionError) as caught:
            await _mutate(client, method)
    assert len(door.requests) == 1
    assert sleeps.delays == []
    assert caught.value.request_sent is False


async def test_patch_without_key_whose_answer_was_lost_reads_the_pool_back() -> None:
    door = FakeDoor(
        {
            f"PATCH {WORKERS}": [problem(503, "Service Unavailable", headers={"Retry-After": "1"})],
            f"GET {CLUSTER}": [ok(cluster(pool(count=4)))],
        }
    )
    sleeps = Sleeps()
    async with make_client(door, sleeps) as client:
        result = await client.update_node_pool(CLUSTER_ID, "workers", _patch())
    assert result.pool("workers").count == 4  # type: ignore[union-attr]
    assert len(door.calls(f"PATCH {WORKERS}")) == 1
    assert sleeps.delays == []


async def test_patch_without_key_refused_by_a_5xx_is_reported_as_not_applied() -> None:
    door = FakeDoor(
        {
            f"PATCH {WORKERS}": [problem(500, "Internal Server Error")],
            f"GET {CLUSTER}": [ok(cluster(pool(count=2)))],
        }
    )
    async with make_client(door) as client:
        with pytest.raises(ServerError) as caught:
            await client.update_node_pool(CLUSTER_ID, "workers", _patch())
    assert "not applied" in str(caught.value)
    assert len(door.calls(f"PATCH {WORKERS}")) == 1


async def test_delete_without_key_after_a_timeout_finds_the_pool_deleting() -> None:
    door = FakeDoor(
        {
            f"DELETE {CLUSTER}/node-pools/batch": [httpx2.ReadTimeout("slow")],
            f"GET {CLUSTER}": [ok(cluster(pool(), pool("batch", lifecycle="deleting")))],
        }
    )
    async with make_client(door) as client:
        result = await client.remove_node_pool(CLUSTER_ID, "batch")
    assert result.pool("batch") is None
    assert len(door.calls(f"DELETE {CLUSTER}/node-pools/batch")) == 1


async def test_delete_without_key_after_a_timeout_with_the_pool_still_active_is_unknown() -> None:
    door = FakeDoor(
        {
            f"DELETE {CLUSTER}/node-pools/batch": [httpx2.ReadTimeout("slow")],
            f"GET {CLUSTER}": [ok(cluster(pool(), pool("batch")))],
        }
    )
    async with make_client(door) as client:
        with pytest.raises(OutcomeUnknown) as caught:
            await client.remove_node_pool(CLUSTER_ID, "batch")
    assert "unknown whether" in str(caught.value)
    assert isinstance(caught.value.cause, DoorTimeoutError)
    assert len(door.calls(f"DELETE {CLUSTER}/node-pools/batch")) == 1


async def test_delete_without_key_when_the_read_back_fails_too_is_unknown() -> None:
    door = FakeDoor(
        {
            f"DELETE {CLUSTER}/node-pools/batch": [httpx2.RemoteProtocolError("dropped")],
            f"GET {CLUSTER}": [httpx2.ConnectError("refused")],
        }
    )
    async with make_client(door, max_retries=0) as client:
        with pytest.raises(OutcomeUnknown) as caught:
            await client.remove_node_pool(CLUSTER_ID, "batch")
    assert "reading the cluster back failed too" in str(caught.value)


async def test_add_without_key_after_a_502_finds_the_new_pool() -> None:
    door = FakeDoor(
        {
            f"POST {CLUSTER}/node-pools": [problem(502, "Bad Gateway")],
            f"GET {CLUSTER}": [ok(cluster(pool(), pool("batch", size="dks.m5.xlarge", count=1)))],
        }
    )
    async with make_client(door) as client:
        result = await client.add_node_pool(
            CLUSTER_ID, PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge", count=1)
        )
    assert result.pool("batch") is not None
    assert len(door.calls(f"POST {CLUSTER}/node-pools")) == 1


async def test_add_without_key_is_not_mistaken_for_a_pool_of_that_name_in_another_size() -> None:
    door = FakeDoor(
        {
            f"POST {CLUSTER}/node-pools": [problem(500, "Internal Server Error")],
            f"GET {CLUSTER}": [ok(cluster(pool(), pool("batch", size="dks.c5.large", count=1)))],
        }
    )
    async with make_client(door) as client:
        with pytest.raises(ServerError) as caught:
            await client.add_node_pool(CLUSTER_ID, PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge"))
    assert "not applied" in str(caught.value)


async def test_replace_node_without_key_after_a_timeout_finds_its_operation() -> None:
    door = FakeDoor(
        {
            f"DELETE {CLUSTER}/nodes/n1": [httpx2.ReadTimeout("slow")],
            f"GET {CLUSTER}/state": [ok(state(operation(kind="node.replace", target="n1")))],
        }
    )
    async with make_client(door) as client:
        pending = await client.replace_node(CLUSTER_ID, "n1")
    assert (pending.cluster_id, pending.node_name) == (CLUSTER_ID, "n1")
    assert len(door.calls(f"DELETE {CLUSTER}/nodes/n1")) == 1


async def test_a_keyed_mutation_exhausting_its_retries_raises_the_last_error() -> None:
    door = FakeDoor({f"DELETE {WORKERS}": [problem(503, "Service Unavailable", headers={"Retry-After": "2"})]})
    sleeps = Sleeps()
    async with make_client(door, sleeps) as client:
        with pytest.raises(ServiceUnavailable):
            await client.remove_node_pool(CLUSTER_ID, "workers", idempotency_key="k")
    assert sleeps.delays == [2.0, 2.0]
    assert not door.calls(f"GET {CLUSTER}")


async def test_keyed_patch_meeting_its_own_first_request_in_flight_waits_for_its_answer() -> None:
    """A timeout, then Door's 409 "the first request with this key is in flight" (R-PATCH-09): the same
    keyed request is sent again until Door replays the first answer; it is never re-keyed."""
    in_flight = problem(409, "Conflict", rule="R-PATCH-09", detail="the first request with this key is in flight")
    door = FakeDoor({f"PATCH {WORKERS}": [httpx2.ReadTimeout("slow"), in_flight, ok(cluster(pool(count=4)), 202)]})
    sleeps = Sleeps()
    async with make_client(door, sleeps, max_retries=3) as client:
        result = await client.update_node_pool(CLUSTER_ID, "workers", _patch(), idempotency_key="card-7")
    assert result.pool("workers").count == 4  # type: ignore[union-attr]
    assert {r.headers["idempotency-key"] for r in door.requests} == {"card-7"}
    assert len(door.requests) == 3 and len(sleeps.delays) == 2


async def test_a_key_still_in_flight_after_the_bounded_wait_raises_and_says_not_to_use_a_new_key() -> None:
    """Waiting out an in-flight key (R-ADD-09) is bounded by KEY_IN_FLIGHT_WAIT and is no retry: then it raises."""
    in_flight = problem(409, "Conflict", rule="R-ADD-09", detail="still in flight")
    door = FakeDoor({f"POST {CLUSTER}/node-pools": [in_flight]})
    sleeps = Sleeps()
    async with make_client(door, sleeps, max_retries=0) as client:
        with pytest.raises(Conflict) as caught:
            await client.add_node_pool(
                CLUSTER_ID, PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge"), idempotency_key="k"
            )
    assert sum(sleeps.delays) == C.KEY_IN_FLIGHT_WAIT
    assert len(door.requests) == 1 + len(sleeps.delays)
    assert "same key" in str(caught.value) and "use a new key" not in str(caught.value)


async def test_waiting_for_an_in_flight_key_honours_retry_after_and_spends_no_retry() -> None:
    in_flight = problem(409, "Conflict", rule="R-PATCH-09", headers={"Retry-After": "3"})
    door = FakeDoor({f"PATCH {WORKERS}": [in_flight, in_flight, ok(cluster(pool(count=4)), 202)]})
    sleeps = Sleeps()
    async with make_client(door, sleeps, max_retries=0) as client:
        result = await client.update_node_pool(CLUSTER_ID, "workers", _patch(), idempotency_key="card-8")
    assert result.pool("workers").count == 4  # type: ignore[union-attr]
    assert sleeps.delays == [3.0, 3.0]


async def test_an_unkeyed_conflict_naming_the_key_rule_is_not_retried() -> None:
    door = FakeDoor({f"PATCH {WORKERS}": [problem(409, "Conflict", rule="R-PATCH-09")]})
    async with make_client(door) as client:
        with pytest.raises(Conflict):
            await client.update_node_pool(CLUSTER_ID, "workers", _patch())
    assert len(door.requests) == 1


async def test_replace_without_key_is_not_mistaken_for_an_earlier_finished_replacement() -> None:
    """A failed replacement of the same name (R-RNODE-04) is an earlier request, not this one."""
    earlier = operation(kind="node.replace", target="n1", status="failed", error="node n1 not found")
    door = FakeDoor(
        {
            f"DELETE {CLUSTER}/nodes/n1": [problem(502, "Bad Gateway")],
            f"GET {CLUSTER}/state": [ok(state(earlier))],
        }
    )
    async with make_client(door) as client:
        with pytest.raises(ServerError) as caught:
            await client.replace_node(CLUSTER_ID, "n1")
    assert "not applied" in str(caught.value)
    assert len(door.calls(f"DELETE {CLUSTER}/nodes/n1")) == 1


def test_fresh_poll_delay_uses_the_server_clock_and_stays_bounded() -> None:
    assert fresh_poll_delay(NOW + timedelta(seconds=2), NOW) == 2 + C.FRESH_POLL_MIN
    assert fresh_poll_delay(NOW + timedelta(hours=1), NOW) == C.FRESH_POLL_MAX
    assert fresh_poll_delay(NOW - timedelta(seconds=1), NOW) == C.FRESH_POLL_MIN
    # long overdue: the Date header is not on the snapshot's clock (simulated backend, real server)
    assert fresh_poll_delay(NOW - timedelta(days=59), NOW) == C.FRESH_POLL_UNKNOWN
    assert fresh_poll_delay(NOW, None) == C.FRESH_POLL_UNKNOWN
    assert fresh_poll_delay(None, NOW) == C.FRESH_POLL_UNKNOWN


# --- helpers -------------------------------------------------------------------------------------


def _patch() -> PublicNodePoolPatchRequest:
    return PublicNodePoolPatchRequest(count=4)


async def _mutate(client: DoorClient, method: str) -> object:
    if method == "POST":
        return await client.add_node_pool(CLUSTER_ID, PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge"))
    if method == "PATCH":
        return await client.update_node_pool(CLUSTER_ID, "workers", _patch())
    if method == "DELETE":
        return await client.remove_node_pool(CLUSTER_ID, "workers")
    return await client.replace_node(CLUSTER_ID, "n1")
