"""``DoorClient`` against the real reference backend over ``httpx2.ASGITransport``.

Waiting never sleeps: the client's injected ``sleep`` advances the backend's ``ManualClock``, so a
worker's 120 simulated seconds pass in no real time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx2
import pytest

from backend_client import (
    BadRequest,
    Conflict,
    DoorClient,
    DoorConnectionError,
    Forbidden,
    NotFound,
    OperationFailed,
    OperationNotFound,
    OperationTimeout,
    OutcomeUnknown,
    PaymentRequired,
    ServerError,
    ServiceUnavailable,
    Unauthorized,
    UnprocessableEntity,
)
from backend_client.models import PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from reference_backend import seed
from reference_backend.app import create_app
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.conftest import ADMIN_TOKEN, BASE_URL, auth

pytestmark = pytest.mark.anyio

CLUSTER_ID = seed.DEMO_CLUSTER_ID
PATCH_ROUTE = "PATCH /v1/public/clusters/{cluster_id}/node-pools/{pool_name}"
DELETE_POOL_ROUTE = "DELETE /v1/public/clusters/{cluster_id}/node-pools/{pool_name}"


class ClockSleep:
    """The injected sleep: records each wait and moves the backend's clock by it."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        self.clock.advance(seconds)


@pytest.fixture
def sleep(clock: ManualClock) -> ClockSleep:
    return ClockSleep(clock)


@pytest.fixture
def client_for(door: httpx2.AsyncClient, sleep: ClockSleep) -> Callable[[str], DoorClient]:
    def make(token: str) -> DoorClient:
        return DoorClient(BASE_URL, token, http_client=door, sleep=sleep)

    return make


@pytest.fixture
async def admin(client_for: Callable[[str], DoorClient]) -> AsyncIterator[DoorClient]:
    async with client_for(seed.DEMO_ADMIN_TOKEN) as client:
        yield client


async def _plane(door: httpx2.AsyncClient, method: str, path: str, json: Any = None) -> Any:
    response = await door.request(method, path, json=json, headers=auth(ADMIN_TOKEN))
    assert response.is_success, response.text
    return response.json() if response.content else None


# --- every method --------------------------------------------------------------------------------


async def test_reads(client_for: Callable[[str], DoorClient]) -> None:
    async with client_for(seed.DEMO_MEMBER_TOKEN) as member:
        tiers = await member.list_machine_tiers()
        clusters = await member.list_clusters()
        named = await member.list_clusters(name="payments-prod")
        by_name = await member.resolve_cluster("payments-prod")
        by_id = await member.resolve_cluster(CLUSTER_ID)
        state = await member.get_cluster_state(CLUSTER_ID)
        pools = await member.list_node_pools(CLUSTER_ID)
    assert "dks.c5.xlarge" in {t.id for t in tiers.items}
    assert CLUSTER_ID in {c.id for c in clusters.items}
    assert [c.id for c in named.items] == [CLUSTER_ID]
    assert by_name == by_id
    assert by_id.pool("workers") is not None
    assert state.phase == "Provisioned"
    assert [p.name for p in pools.items] == ["workers"]


async def test_list_nodes_fresh_polls_past_the_cold_read(
    client_for: Callable[[str], DoorClient], sleep: ClockSleep
) -> None:
    async with client_for(seed.DEMO_MEMBER_TOKEN) as member:
        nodes = await member.list_nodes(CLUSTER_ID, fresh=True)
        pool_nodes = await member.list_nodes(CLUSTER_ID, "workers")
    assert nodes.fresh and nodes.total == 2
    assert seed.DEMO_NODE_NAME in {n.name for n in nodes.items}
    assert sleep.delays  # the first read was cold: the client waited (in simulated time)
    assert sum(sleep.delays) < 30
    assert {n.pool for n in pool_nodes.items} == {"workers"}


async def test_list_nodes_fresh_returns_the_stale_snapshot_at_the_bound(
    client_for: Callable[[str], DoorClient], sleep: ClockSleep
) -> None:
    async with client_for(seed.DEMO_MEMBER_TOKEN) as member:
        nodes = await member.list_nodes(CLUSTER_ID, fresh=True, fresh_timeout=0.5)
    assert nodes.cold and not nodes.fresh  # the refresh is due 2 s after the first read, past the bound
    assert sum(sleep.delays) == pytest.approx(0.5)


async def test_add_wait_and_list_the_new_pool(admin: DoorClient) -> None:
    request = PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge", count=1)
    progress: list[str] = []
    cluster = await admin.add_node_pool(CLUSTER_ID, request, idempotency_key="add-batch")
    done = await admin.wait_for_operation(
        CLUSTER_ID, target="batch", poll_interval=10, on_progress=lambda s: progress.append(s.operations[0].status)
    )
    nodes = await admin.list_nodes(CLUSTER_ID, "batch", fresh=True)
    assert cluster.pool("batch") is not None
    assert done.kind == "pool.create" and done.status == "succeeded"
    assert progress[0] == "running" and progress[-1] == "succeeded"
    assert nodes.total == 1 and nodes.items[0].status == "Running"


async def test_add_with_the_same_key_twice_makes_one_pool(admin: DoorClient) -> None:
    request = PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge", count=1)
    first = await admin.add_node_pool(CLUSTER_ID, request, idempotency_key="same")
    second = await admin.add_node_pool(CLUSTER_ID, request, idempotency_key="same")
    assert first == second
    assert [p.name for p in (await admin.list_node_pools(CLUSTER_ID)).items].count("batch") == 1


async def test_scale_and_autoscale(admin: DoorClient) -> None:
    scaled = await admin.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=4))
    await admin.wait_for_operation(CLUSTER_ID, target="workers", poll_interval=30)
    auto = await admin.update_node_pool(
        CLUSTER_ID, "workers", PublicNodePoolPatchRequest(auto_scale=True, min_nodes=2, max_nodes=6, count=2)
    )
    assert scaled.pool("workers").count == 4  # type: ignore[union-attr]
    workers = auto.pool("workers")
    assert workers is not None and (workers.auto_scale, workers.min_nodes, workers.max_nodes) == (True, 2, 6)


async def test_remove_pool(admin: DoorClient) -> None:
    await admin.add_node_pool(CLUSTER_ID, PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge"))
    await admin.wait_for_operation(CLUSTER_ID, target="batch", poll_interval=30)
    removed = await admin.remove_node_pool(CLUSTER_ID, "batch")
    done = await admin.wait_for_operation(CLUSTER_ID, target="batch", poll_interval=30)
    assert removed.pool("batch") is None
    assert done.kind == "pool.delete" and done.status == "succeeded"
    assert [p.name for p in (await admin.list_node_pools(CLUSTER_ID)).items] == ["workers"]


async def test_replace_node(admin: DoorClient) -> None:
    pending = await admin.replace_node(CLUSTER_ID, seed.DEMO_NODE_NAME, idempotency_key="replace-1")
    done = await admin.wait_for_operation(CLUSTER_ID, target=seed.DEMO_NODE_NAME, poll_interval=30)
    nodes = await admin.list_nodes(CLUSTER_ID, fresh=True)
    assert pending.node_name == seed.DEMO_NODE_NAME
    assert done.status == "succeeded"
    assert seed.DEMO_NODE_NAME not in {n.name for n in nodes.items}


async def test_replacing_an_unknown_node_fails_asynchronously(admin: DoorClient) -> None:
    await admin.replace_node(CLUSTER_ID, "payments-prod-workers-zzzzz")
    with pytest.raises(OperationFailed) as caught:
        await admin.wait_for_operation(CLUSTER_ID, target="payments-prod-workers-zzzzz", poll_interval=2)
    assert caught.value.operation.kind == "node.replace"


# --- every error class ---------------------------------------------------------------------------


async def test_401_unknown_token(client_for: Callable[[str], DoorClient]) -> None:
    async with client_for("nobody") as stranger:
        with pytest.raises(Unauthorized) as caught:
            await stranger.get_cluster(CLUSTER_ID)
    assert caught.value.rule == "R-AUTH-01"
    assert "nobody" not in str(caught.value)


async def test_403_member_mutating(client_for: Callable[[str], DoorClient]) -> None:
    async with client_for(seed.DEMO_MEMBER_TOKEN) as member:
        with pytest.raises(Forbidden) as caught:
            await member.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=3))
    assert caught.value.rule == "R-AUTH-03"
    assert caught.value.request_id


async def test_403_outsider_reading(client_for: Callable[[str], DoorClient]) -> None:
    async with client_for(seed.DEMO_OUTSIDER_TOKEN) as outsider:
        with pytest.raises(Forbidden):
            await outsider.list_node_pools(CLUSTER_ID)


async def test_404_unknown_cluster(admin: DoorClient) -> None:
    with pytest.raises(NotFound) as caught:
        await admin.get_cluster("00000000-0000-4000-8000-000000000000")
    assert caught.value.rule == "R-AUTH-04"
    with pytest.raises(NotFound):
        await admin.resolve_cluster("no-such-cluster")


async def test_404_unknown_pool(admin: DoorClient) -> None:
    with pytest.raises(NotFound) as caught:
        await admin.update_node_pool(CLUSTER_ID, "ghost", PublicNodePoolPatchRequest(count=3))
    assert caught.value.rule == "R-PATCH-07"


async def test_400_unknown_tier_and_bad_node_name(admin: DoorClient) -> None:
    with pytest.raises(BadRequest) as tier:
        await admin.add_node_pool(CLUSTER_ID, PublicNodePoolCreateRequest(name="batch", size="dks.nope"))
    with pytest.raises(BadRequest) as node:
        await admin.replace_node(CLUSTER_ID, "Not_A_Node")
    assert tier.value.rule == "R-ADD-03"
    assert node.value.rule == "R-RNODE-03"


async def test_402_credit(admin: DoorClient, door: httpx2.AsyncClient) -> None:
    await _plane(door, "PUT", f"/_reference/organisations/{seed.DEMO_ORGANISATION}", {"credit": 0})
    with pytest.raises(PaymentRequired) as caught:
        await admin.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=3))
    assert caught.value.rule == "R-CREDIT-01"
    assert "credit" in str(caught.value)


async def test_409_phase(admin: DoorClient) -> None:
    with pytest.raises(Conflict) as caught:
        await admin.update_node_pool(seed.DEMO_PENDING_CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=3))
    assert caught.value.rule == "R-PHASE-01"
    with pytest.raises(Conflict) as nodes:
        await admin.list_nodes(seed.DEMO_PENDING_CLUSTER_ID)
    assert nodes.value.rule in {"R-PHASE-02", "R-NODE-05"}


async def test_409_last_pool(admin: DoorClient) -> None:
    with pytest.raises(Conflict) as caught:
        await admin.remove_node_pool(CLUSTER_ID, "workers")
    assert caught.value.rule == "R-DEL-01"


async def test_409_busy_pool(admin: DoorClient) -> None:
    await admin.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=3))
    with pytest.raises(Conflict) as caught:
        await admin.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=4))
    assert caught.value.rule == "R-OP-01"
    assert "finish" in str(caught.value)  # says to come back once the running operation is done


async def test_409_name_clash(admin: DoorClient) -> None:
    with pytest.raises(Conflict) as caught:
        await admin.add_node_pool(CLUSTER_ID, PublicNodePoolCreateRequest(name="workers", size="dks.c5.xlarge"))
    assert caught.value.rule == "R-ADD-02"


async def test_422_empty_patch(admin: DoorClient) -> None:
    with pytest.raises(UnprocessableEntity) as caught:
        await admin.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest())
    assert caught.value.rule == "R-PATCH-02"
    assert "at least one of" in str(caught.value)


async def test_422_names_the_field(admin: DoorClient) -> None:
    with pytest.raises(UnprocessableEntity) as caught:
        await admin.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest(auto_scale=True))
    assert "max_nodes" in caught.value.field_errors
    assert "max_nodes" in str(caught.value)


async def test_503_inventory_down_is_retried_then_raised(
    client_for: Callable[[str], DoorClient], door: httpx2.AsyncClient, sleep: ClockSleep
) -> None:
    await _plane(door, "PUT", "/_reference/inventory", {"available": False})
    async with client_for(seed.DEMO_MEMBER_TOKEN) as member:
        with pytest.raises(ServiceUnavailable) as caught:
            await member.list_nodes(CLUSTER_ID)
    assert caught.value.retry_after == 5.0
    assert sleep.delays == [5.0, 5.0]


async def test_503_inventory_back_before_the_retry(
    client_for: Callable[[str], DoorClient], door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    await _plane(door, "PUT", "/_reference/inventory", {"available": False})

    async def inventory_returns(seconds: float) -> None:
        clock.advance(seconds)
        await _plane(door, "PUT", "/_reference/inventory", {"available": True})

    async with DoorClient(BASE_URL, seed.DEMO_MEMBER_TOKEN, http_client=door, sleep=inventory_returns) as member:
        nodes = await member.list_nodes(CLUSTER_ID)
    assert nodes.cluster_id == CLUSTER_ID


# --- retries with injected faults ----------------------------------------------------------------


async def _fault(door: httpx2.AsyncClient, route: str, *, when: str, status: int = 503, **extra: Any) -> None:
    await _plane(
        door, "POST", "/_reference/faults", {"route": route, "status": status, "count": 1, "when": when, **extra}
    )


async def _pool_updates(admin: DoorClient) -> list[Any]:
    state = await admin.get_cluster_state(CLUSTER_ID)
    return [op for op in state.operations if op.kind == "pool.update" and op.target == "workers"]


async def test_keyed_patch_whose_answer_is_lost_is_retried_and_applied_once(
    admin: DoorClient, door: httpx2.AsyncClient, sleep: ClockSleep
) -> None:
    await _fault(door, PATCH_ROUTE, when="after", retry_after=1)
    cluster = await admin.update_node_pool(
        CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=3), idempotency_key="card-42"
    )
    assert cluster.pool("workers").count == 3  # type: ignore[union-attr]
    assert sleep.delays == [1.0]
    assert len(await _pool_updates(admin)) == 1
    assert (await admin.get_cluster(CLUSTER_ID)).pool("workers").count == 3  # type: ignore[union-attr]


async def test_keyed_patch_refused_before_it_ran_is_retried_and_applied_once(
    admin: DoorClient, door: httpx2.AsyncClient
) -> None:
    await _fault(door, PATCH_ROUTE, when="before")
    cluster = await admin.update_node_pool(
        CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=3), idempotency_key="card-43"
    )
    assert cluster.pool("workers").count == 3  # type: ignore[union-attr]
    assert len(await _pool_updates(admin)) == 1


async def test_unkeyed_patch_whose_answer_is_lost_is_read_back_not_resent(
    admin: DoorClient, door: httpx2.AsyncClient, sleep: ClockSleep
) -> None:
    await _fault(door, PATCH_ROUTE, when="after")
    cluster = await admin.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=3))
    assert cluster.pool("workers").count == 3  # type: ignore[union-attr]
    assert sleep.delays == []
    assert len(await _pool_updates(admin)) == 1


async def test_unkeyed_patch_refused_before_it_ran_is_raised_as_not_applied(
    admin: DoorClient, door: httpx2.AsyncClient
) -> None:
    await _fault(door, PATCH_ROUTE, when="before")
    with pytest.raises(ServiceUnavailable) as caught:
        await admin.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=3))
    assert "not applied" in str(caught.value)
    assert await _pool_updates(admin) == []


async def test_unkeyed_delete_whose_answer_is_lost_is_read_back(admin: DoorClient, door: httpx2.AsyncClient) -> None:
    await admin.add_node_pool(CLUSTER_ID, PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge"))
    await admin.wait_for_operation(CLUSTER_ID, target="batch", poll_interval=30)
    await _fault(door, DELETE_POOL_ROUTE, when="after", status=500)
    cluster = await admin.remove_node_pool(CLUSTER_ID, "batch")
    assert cluster.pool("batch") is None
    state = await admin.get_cluster_state(CLUSTER_ID)
    assert [op.kind for op in state.operations if op.target == "batch"].count("pool.delete") == 1


async def test_keyed_replace_whose_answer_is_lost_is_replayed_once(admin: DoorClient, door: httpx2.AsyncClient) -> None:
    await _fault(door, "DELETE /v1/public/clusters/{cluster_id}/nodes/{node_name}", when="after", status=502)
    pending = await admin.replace_node(CLUSTER_ID, seed.DEMO_NODE_NAME, idempotency_key="replace-once")
    state = await admin.get_cluster_state(CLUSTER_ID)
    assert pending.node_name == seed.DEMO_NODE_NAME
    assert [op.kind for op in state.operations if op.target == seed.DEMO_NODE_NAME] == ["node.replace"]


async def test_a_read_failing_on_every_try_is_a_server_error_after_backoff(
    admin: DoorClient, door: httpx2.AsyncClient, sleep: ClockSleep
) -> None:
    route = "GET /v1/public/clusters/{cluster_id}/node-pools"
    await _plane(door, "POST", "/_reference/faults", {"route": route, "status": 500, "count": None})
    with pytest.raises(ServerError) as caught:
        await admin.list_node_pools(CLUSTER_ID)
    assert caught.value.status_code == 500 and caught.value.request_id
    assert len(sleep.delays) == admin.max_retries
    assert sleep.delays[0] < sleep.delays[1]  # backoff


class _AnswerLost(httpx2.AsyncBaseTransport):
    """Door handles the request, then the connection drops before its answer arrives."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, method: str) -> None:
        self.inner = inner
        self.method = method

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if request.method == self.method:
            await response.aread()
            raise httpx2.ReadError("connection reset by peer")
        return response


async def test_unkeyed_delete_whose_answer_is_lost_reports_the_outcome_it_reads_back(
    admin: DoorClient, backend: ReferenceBackend, sleep: ClockSleep
) -> None:
    await admin.add_node_pool(CLUSTER_ID, PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge"))
    await admin.wait_for_operation(CLUSTER_ID, target="batch", poll_interval=30)
    sleep.delays.clear()
    app = create_app(backend, admin_token=ADMIN_TOKEN)  # fault rules belong to an app: set them on this one
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE_URL) as plane:
        await _plane(plane, "POST", "/_reference/faults", {"route": DELETE_POOL_ROUTE, "status": 503, "count": 1})
    transport = _AnswerLost(httpx2.ASGITransport(app=app), "DELETE")
    async with DoorClient(BASE_URL, seed.DEMO_ADMIN_TOKEN, transport=transport, sleep=sleep) as lossy:
        # Door refused before acting, but the client only saw the connection drop: unknown, not resent.
        with pytest.raises(OutcomeUnknown) as unknown:
            await lossy.remove_node_pool(CLUSTER_ID, "batch")
        assert isinstance(unknown.value.cause, DoorConnectionError) and unknown.value.cause.request_sent
        assert (await lossy.get_cluster(CLUSTER_ID)).pool("batch") is not None
        # Door deleted it and the answer was lost: the read-back finds the pool deleting.
        removed = await lossy.remove_node_pool(CLUSTER_ID, "batch")
    assert removed.pool("batch") is None
    assert sleep.delays == []


async def test_wait_for_operation_times_out_or_finds_nothing(admin: DoorClient, sleep: ClockSleep) -> None:
    with pytest.raises(OperationNotFound):
        await admin.wait_for_operation(CLUSTER_ID, target="batch")
    await admin.add_node_pool(CLUSTER_ID, PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge"))
    with pytest.raises(OperationTimeout) as caught:
        await admin.wait_for_operation(CLUSTER_ID, target="batch", timeout=30, poll_interval=10)
    assert caught.value.operation.kind == "pool.create" and caught.value.operation.status == "running"
    assert sleep.delays == [10, 10, 10]


async def test_keyed_patch_meeting_its_first_request_in_flight_gets_that_answer(
    client_for: Callable[[str], DoorClient], door: httpx2.AsyncClient
) -> None:
    """Two sends with one key overlap (a retry after a timeout): the second meets Door's 409 "in
    flight" (R-PATCH-09), waits and gets the first answer replayed; the pool changes once."""
    fault = {"route": PATCH_ROUTE, "status": None, "count": 1, "latency_ms": 300}
    await _plane(door, "POST", "/_reference/faults", fault)

    async def real_wait(seconds: float) -> None:
        await anyio.sleep(0.5)  # past the first request's 300 ms of (real) latency

    patch = PublicNodePoolPatchRequest(count=3)
    answers: list[Any] = []
    first = client_for(seed.DEMO_ADMIN_TOKEN)
    second = DoorClient(BASE_URL, seed.DEMO_ADMIN_TOKEN, http_client=door, sleep=real_wait)

    async def send(client: DoorClient) -> None:
        answers.append(await client.update_node_pool(CLUSTER_ID, "workers", patch, idempotency_key="card-in-flight"))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(send, first)
            await anyio.sleep(0.1)
            tasks.start_soon(send, second)
    assert len(answers) == 2 and answers[0] == answers[1]
    async with first:
        assert len(await _pool_updates(first)) == 1
