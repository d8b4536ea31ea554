"""change_pool_tier as one approved plan, against the real reference backend on a manual clock.

Door is reached through an ASGI transport that records each mutation's method, path and
``Idempotency-Key``, so "Door sees exactly add, then delete, each once, each with its own key" is
read from what crossed the wire.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import anyio
import httpx2
import pytest
from fastapi import FastAPI

from backend_client import DoorClient
from backend_client.models import PublicNodePoolPatchRequest
from confirmation_cards import ApprovalService, Card, CardStatus, Planner, PreflightError, SqliteCardStore
from confirmation_cards.models import StepStatus
from confirmation_cards.plans import step_key
from confirmation_cards.tier_plan import derive_name, plan_tier_change
from reference_backend import seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.conftest import BASE_URL

pytestmark = pytest.mark.anyio

PROD = seed.DEMO_CLUSTER_ID
Seen = list[tuple[str, str, str | None]]


class Recording(httpx2.AsyncBaseTransport):
    """The ASGI transport, noting every mutation (method, path, Idempotency-Key) Door answered 2xx."""

    def __init__(self, app: FastAPI, seen: Seen) -> None:
        self._inner = httpx2.ASGITransport(app=app)
        self._seen = seen

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if request.method != "GET" and response.status_code < 300:
            self._seen.append((request.method, request.url.path, request.headers.get("idempotency-key")))
        return response


@pytest.fixture
def seen() -> Seen:
    return []


@pytest.fixture
async def door(app: FastAPI, seen: Seen, clock: ManualClock) -> AsyncIterator[DoorClient]:
    async def sleep(seconds: float) -> None:
        clock.advance(seconds)

    transport = Recording(app, seen)
    async with DoorClient(BASE_URL, seed.DEMO_ADMIN_TOKEN, transport=transport, sleep=sleep) as client:
        yield client


@pytest.fixture
def runner(store: SqliteCardStore, clock: ManualClock) -> ApprovalService:
    async def sleep(seconds: float) -> None:
        clock.advance(seconds)

    return ApprovalService(store, clock=clock.now, sleep=sleep)


async def planned(door: DoorClient, clock: ManualClock, store: SqliteCardStore, **options: object) -> Card:
    planner = Planner(door, clock=clock.now)
    card = await plan_tier_change(planner, "payments-prod", "workers", "dks.c5.2xlarge", **options)  # type: ignore[arg-type]
    return await store.create(card)


async def test_one_approval_adds_waits_until_running_then_removes_each_once_with_its_own_key(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, runner: ApprovalService, seen: Seen
) -> None:
    card = await planned(door, clock, store)
    assert [s.kind for s in card.steps] == ["add", "wait", "remove"]
    assert card.steps[0].body == {
        "name": "workers-c5-2xlarge",
        "size": "dks.c5.2xlarge",
        "count": 2,
        "labels": {},
        "tags": {},
    }
    assert seen == []  # planning only reads
    told: list[str] = []

    async def progress(done: float, total: float, message: str) -> None:
        told.append(message)

    done = await runner.approve(card.id, approver="ada", door=door, progress=progress)

    assert done.status is CardStatus.EXECUTED, done.result
    pools = "/v1/public/clusters/" + PROD + "/node-pools"
    assert seen == [
        ("POST", pools, f"{card.id}.1"),
        ("DELETE", pools + "/workers", f"{card.id}.3"),
    ]
    assert [s.status for s in done.steps] == [StepStatus.DONE] * 3
    assert done.steps[0].operation_id is not None and done.steps[2].operation_id is not None
    assert any("2 of 2 workers of pool workers-c5-2xlarge Running" in m for m in told)
    cluster = await door.get_cluster(PROD)
    new = cluster.pool("workers-c5-2xlarge")
    assert new is not None and new.size == "dks.c5.2xlarge" and cluster.pool("workers") is None
    assert done.result is not None and "pool workers-c5-2xlarge in dks.c5.2xlarge with 2 workers" in done.result.message
    events = [e.event for e in await store.audit(card.id)]
    assert events[:2] == ["created", "approved"] and events[-1] == "executed" and events.count("step") >= 6


async def test_the_delete_is_sent_only_after_every_new_worker_is_running(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, runner: ApprovalService, backend: ReferenceBackend
) -> None:
    card = await planned(door, clock, store)
    done = await runner.approve(card.id, approver="ada", door=door)

    wait, remove = done.steps[1], done.steps[2]
    assert wait.finished_at is not None and remove.started_at is not None
    assert remove.started_at >= wait.finished_at
    assert wait.started_at is not None and wait.finished_at - wait.started_at >= timedelta(seconds=100)


async def test_keep_name_brings_the_old_name_back_in_the_new_tier_in_four_calls(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, runner: ApprovalService, seen: Seen
) -> None:
    card = await planned(door, clock, store, keep_name=True)
    done = await runner.approve(card.id, approver="ada", door=door)

    assert done.status is CardStatus.EXECUTED, done.result
    pools = "/v1/public/clusters/" + PROD + "/node-pools"
    assert seen == [
        ("POST", pools, f"{card.id}.1"),
        ("DELETE", pools + "/workers", f"{card.id}.3"),
        ("POST", pools, f"{card.id}.4"),
        ("DELETE", pools + "/workers-c5-2xlarge", f"{card.id}.6"),
    ]
    cluster = await door.get_cluster(PROD)
    back = cluster.pool("workers")
    assert back is not None and back.size == "dks.c5.2xlarge" and back.count == 2
    assert cluster.pool("workers-c5-2xlarge") is None


async def test_a_402_at_step_one_leaves_the_old_pool_untouched_and_says_so(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, runner: ApprovalService, backend: ReferenceBackend
) -> None:
    card = await planned(door, clock, store)
    backend.set_credit("payments", 0.0)

    done = await runner.approve(card.id, approver="ada", door=door)

    assert done.status is CardStatus.FAILED
    assert done.result is not None and done.result.status_code == 402
    assert "Pool workers is untouched" in done.result.message
    assert [s.status for s in done.steps] == [StepStatus.FAILED, StepStatus.PENDING, StepStatus.PENDING]
    pool = (await door.get_cluster(PROD)).pool("workers")
    assert pool is not None and pool.size == "dks.c5.xlarge"


async def test_the_old_pool_scaled_after_approval_stops_the_plan_before_removal(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, backend: ReferenceBackend
) -> None:
    card = await planned(door, clock, store)
    scaled = False

    async def sleep(seconds: float) -> None:
        nonlocal scaled
        clock.advance(seconds)
        if not scaled:  # someone else scales the old pool while the new one comes up
            scaled = True
            await door.update_node_pool(PROD, "workers", PublicNodePoolPatchRequest(count=3))

    done = await ApprovalService(store, clock=clock.now, sleep=sleep).approve(card.id, approver="ada", door=door)

    assert done.status is CardStatus.STOPPED
    assert done.result is not None and "count was 2 and is now 3" in done.result.message
    assert "remove the new pool workers-c5-2xlarge" in done.result.message
    assert done.steps[2].status is StepStatus.SKIPPED
    assert (await door.get_cluster(PROD)).pool("workers") is not None


async def test_a_plan_asked_to_stop_sends_nothing_further(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen
) -> None:
    card = await planned(door, clock, store)
    service: ApprovalService

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        await service.stop_plan(card.id, by="bob")

    service = ApprovalService(store, clock=clock.now, sleep=sleep)
    done = await service.approve(card.id, approver="ada", door=door)

    assert done.status is CardStatus.STOPPED
    assert done.result is not None and "bob asked to stop the plan" in done.result.message
    assert [m for m, _, _ in seen] == ["POST"]
    assert (await door.get_cluster(PROD)).pool("workers") is not None


async def test_the_new_pool_never_running_stops_at_the_deadline_with_the_old_pool_untouched(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, backend: ReferenceBackend, seen: Seen
) -> None:
    card = await planned(door, clock, store)

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)

    service = ApprovalService(store, clock=clock.now, sleep=sleep, step_timeout=60.0)  # workers need ~120 s
    done = await service.approve(card.id, approver="ada", door=door)

    assert done.status is CardStatus.STOPPED
    assert done.result is not None and "did not reach Running within 60 s" in done.result.message
    assert [m for m, _, _ in seen] == ["POST"]


async def test_a_request_door_would_refuse_at_step_one_gets_no_card(door: DoorClient, clock: ManualClock) -> None:
    planner = Planner(door, clock=clock.now)
    with pytest.raises(PreflightError, match="R-ADD-03"):
        await plan_tier_change(planner, "payments-prod", "workers", "dks.nope")
    with pytest.raises(PreflightError, match="R-ADD-02"):
        await plan_tier_change(planner, "payments-prod", "workers", "dks.c5.2xlarge", new_name="workers")
    with pytest.raises(PreflightError, match="R-PATCH-10"):
        await plan_tier_change(planner, "payments-prod", "workers", "dks.c5.xlarge")


def test_the_derived_name_is_a_free_dns_label() -> None:
    assert derive_name("workers", "dks.c5.2xlarge", set()) == "workers-c5-2xlarge"
    assert derive_name("workers", "dks.c5.2xlarge", {"workers-c5-2xlarge"}) == "workers-c5-2xlarge-2"
    long = derive_name("w" * 63, "dks.c5.2xlarge", set())
    assert len(long) <= 63 and long.endswith("-c5-2xlarge")


def test_step_keys_are_the_card_id_and_the_step() -> None:
    from confirmation_cards.models import PlanStep

    step = PlanStep(index=3, kind="remove", pool="p", method="DELETE", path="/x", digest="d", title="t", takes="s")
    assert step_key("card_abc", step) == "card_abc.3"


async def test_fifty_concurrent_approvals_run_one_plan(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, runner: ApprovalService, seen: Seen
) -> None:
    card = await planned(door, clock, store)
    results: list[Card] = []

    async def approve(n: int) -> None:
        results.append(await runner.approve(card.id, approver=f"person {n}", door=door))

    async with anyio.create_task_group() as group:
        for n in range(50):
            group.start_soon(approve, n)

    assert [m for m, _, _ in seen] == ["POST", "DELETE"]
    winners = {r.approved_by for r in results}
    assert len(winners) == 1
    assert [e.event for e in await store.audit(card.id)].count("approved") == 1


@pytest.mark.parametrize("keep_name", [False, True])
async def test_the_cards_peak_price_and_credit_are_the_catalogs_and_door_asks_that_credit(
    door: DoorClient,
    clock: ManualClock,
    store: SqliteCardStore,
    runner: ApprovalService,
    backend: ReferenceBackend,
    keep_name: bool,
) -> None:
    """R-CREDIT-01 with R-PATCH-10: the card's figures, from Door's own catalog by hand (workers: two
    dks.c5.xlarge moving to dks.c5.2xlarge; both pools run at the peak), and Door's 402 at exactly that
    credit: one cent short is refused at step 1, the figure itself is enough."""
    tiers = {t.id: t for t in (await door.list_machine_tiers()).items}
    old, new = tiers["dks.c5.xlarge"], tiers["dks.c5.2xlarge"]
    card = await planned(door, clock, store, keep_name=keep_name)

    assert card.price_before == pytest.approx(2 * old.price_per_hour)
    assert card.price_peak == pytest.approx(2 * old.price_per_hour + 2 * new.price_per_hour)
    assert card.price_after == pytest.approx(2 * new.price_per_hour)
    assert card.capacity_peak is not None and card.capacity_peak.total_vcpu == 2 * old.vcpu + 2 * new.vcpu
    needed = round(2 * new.price_per_hour * 24, 2)  # the peak adds the new pool, for R-CREDIT-01's 24 h
    assert card.credit_needed == pytest.approx(needed)

    backend.set_credit("payments", needed - 0.01)
    short = await runner.approve(card.id, approver="ada", door=door)
    assert short.status is CardStatus.FAILED and short.result is not None and short.result.status_code == 402

    backend.set_credit("payments", needed)
    again = await store.create(
        await plan_tier_change(
            Planner(door, clock=clock.now), "payments-prod", "workers", "dks.c5.2xlarge", keep_name=keep_name
        )
    )
    done = await runner.approve(again.id, approver="ada", door=door)
    assert done.steps[0].status is not StepStatus.FAILED, done.result
