"""A plan runs only as its owner and says only what is known (DESIGN.md properties 11 and 13; issue 26).

Against the real reference backend on a manual clock. Every request Door receives is written down
with the fingerprint of the token it carried, so "no request after the disconnect" and "every step
went as the owner" are read from what crossed the wire, GETs included. A server killed mid-plan is
played by a card whose lease names a dead process and whose step records say where it was.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import httpx2
import pytest
from fastapi import FastAPI

from backend_client import DoorClient
from backend_client.models import PublicNodePoolCreateRequest
from confirmation_cards import (
    ApprovalService,
    Card,
    CardNotFound,
    CardStatus,
    Planner,
    SqliteCardStore,
    token_fingerprint,
)
from confirmation_cards.approval import HOST, LEASE
from confirmation_cards.models import StepStatus
from confirmation_cards.owners import NoCredential, OwnerDoor
from confirmation_cards.plans import step_key
from confirmation_cards.stores import AuditEntry
from confirmation_cards.tier_plan import plan_tier_change
from reference_backend import seed
from reference_backend.clock import ManualClock
from tests.confirmation_cards.test_outcomes import dead_pid
from tests.conftest import ADMIN_TOKEN, BASE_URL, auth

pytestmark = pytest.mark.anyio

PROD = seed.DEMO_CLUSTER_ID
OWNER = token_fingerprint(seed.DEMO_ADMIN_TOKEN)
NEW = "workers-c5-2xlarge"
Seen = list[tuple[str, str, str | None, str]]  # method, path, Idempotency-Key, token fingerprint


class Wire(httpx2.AsyncBaseTransport):
    """The ASGI app; every request Door receives, whatever it answers, with its token's fingerprint."""

    def __init__(self, app: FastAPI, seen: Seen, before: Callable[[httpx2.Request], Awaitable[None]] | None = None):
        self._inner = httpx2.ASGITransport(app=app)
        self._seen = seen
        self._before = before

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._before is not None:
            await self._before(request)
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        self._seen.append(
            (request.method, request.url.path, request.headers.get("idempotency-key"), token_fingerprint(token))
        )
        return await self._inner.handle_async_request(request)


class Owner:
    """The card owner's credential as a server finds it: present, disconnected or replaced, at will."""

    def __init__(self, door: DoorClient, fingerprint: str = OWNER, seen: Seen | None = None) -> None:
        self.door = door
        self.seen = seen
        self.fingerprint = fingerprint
        self.gone = False
        self.asked = 0

    async def door_for(self, card: Card) -> OwnerDoor:
        self.asked += 1
        if self.seen is not None:
            self.seen.append(("ASK", "", None, ""))
        if self.gone:
            raise NoCredential("its owner has no Door token connected now (disconnected on /connect)")
        return OwnerDoor(self.door, self.fingerprint)


@pytest.fixture
def seen() -> Seen:
    return []


@pytest.fixture
def advancing(clock: ManualClock) -> Callable[[float], Awaitable[None]]:
    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        await anyio.lowlevel.checkpoint()

    return sleep


@pytest.fixture
async def door(app: FastAPI, seen: Seen, advancing: Callable[[float], Awaitable[None]]) -> AsyncIterator[DoorClient]:
    async with DoorClient(BASE_URL, seed.DEMO_ADMIN_TOKEN, transport=Wire(app, seen), sleep=advancing) as client:
        yield client


@pytest.fixture
async def ops(app: FastAPI) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE_URL) as client:
        yield client


def service_of(
    store: SqliteCardStore, clock: ManualClock, owner: Owner, advancing: Callable[[float], Awaitable[None]]
) -> ApprovalService:
    service = ApprovalService(store, clock=clock.now, sleep=advancing, owners=owner, settle_window=6)
    service.plans.resume_window = 4.0
    return service


async def plan_card(door: DoorClient, clock: ManualClock, store: SqliteCardStore, **options: Any) -> Card:
    planner = Planner(door, clock=clock.now, principal=OWNER)
    card = await plan_tier_change(planner, "payments-prod", "workers", "dks.c5.2xlarge", **options)
    return await store.create(card)


async def killed_after(
    store: SqliteCardStore, clock: ManualClock, card: Card, door: DoorClient, *, step_1: StepStatus
) -> None:
    """The card as a server SIGKILLed mid-plan leaves it: claimed by a dead process, step 1 recorded as
    ``step_1`` (``done``: Door added the pool; ``sending``: Door got the POST and the server died
    before recording the answer; ``pending``: nothing sent)."""
    executor = f"{HOST}:{dead_pid()}:gone"
    now = clock.now()
    claimed = await store.claim(
        card.id,
        executor=executor,
        until=now + LEASE,
        entry=AuditEntry("approved", now, by="ada"),
        update={"approved_by": "ada", "approved_at": now, "credential": OWNER},
        live_at=now,
    )
    assert claimed is not None
    if step_1 is StepStatus.PENDING:
        return
    first = card.steps[0]
    request = PublicNodePoolCreateRequest.model_validate(first.body)
    await door.add_node_pool(PROD, request, idempotency_key=step_key(card.id, first))
    steps = [s.model_copy(update={"status": step_1}) if s.index == 1 else s for s in claimed.steps]
    moved = await store.advance(
        card.id, executor, update={"steps": steps}, entry=AuditEntry("step", now, by=executor, detail="step 1")
    )
    assert moved is not None


def mutations(seen: Seen) -> list[tuple[str, str | None]]:
    return [(method, key) for method, _, key, _ in seen if method != "GET"]


# --- the owner's credential, before every step and every poll -----------------------------------


@pytest.mark.parametrize("how", ["disconnected", "replaced"])
async def test_a_plan_sends_nothing_more_once_its_owner_disconnects_or_replaces_the_token_while_it_waits(
    door: DoorClient,
    clock: ManualClock,
    store: SqliteCardStore,
    seen: Seen,
    advancing: Callable[[float], Awaitable[None]],
    how: str,
) -> None:
    owner = Owner(door)
    service = service_of(store, clock, owner, advancing)
    card = await plan_card(door, clock, store)
    after: list[int] = []

    async def progress(done: float, total: float, message: str) -> None:
        if "Running" in message and not after:  # the wait has begun: the person presses Disconnect
            if how == "disconnected":
                owner.gone = True
            else:
                owner.fingerprint = token_fingerprint("another token of the same person")
            after.append(len(seen))

    done = await service.approve(card.id, approver="ada", door=door, progress=progress)

    assert done.status is CardStatus.STOPPED, done.result
    assert seen[after[0] :] == [], "a request left after the owner's credential was gone"
    assert mutations(seen) == [("POST", f"{card.id}.1")]
    assert done.result is not None
    said = done.result.message
    assert "owner's own Door credential" in said and "Step done: 1 (add pool workers-c5-2xlarge" in said
    assert ("disconnected" in said) if how == "disconnected" else ("changed since the approval" in said)
    assert "Nothing was changed" not in said
    assert [s.status for s in done.steps] == [StepStatus.DONE, StepStatus.SKIPPED, StepStatus.SKIPPED]


async def test_every_step_and_poll_asks_for_the_owner_s_credential_and_goes_with_it(
    door: DoorClient,
    clock: ManualClock,
    store: SqliteCardStore,
    seen: Seen,
    advancing: Callable[[float], Awaitable[None]],
) -> None:
    owner = Owner(door, seen=seen)
    service = service_of(store, clock, owner, advancing)
    card = await plan_card(door, clock, store)
    seen.clear()

    done = await service.approve(card.id, approver="ada", door=None)

    assert done.status is CardStatus.EXECUTED, done.result
    assert done.credential == OWNER
    assert {fp for method, *_, fp in seen if method != "ASK"} == {OWNER}
    # The credential is asked for before every step's request and before every poll of the wait.
    polls = [i for i, (method, path, *_) in enumerate(seen) if method == "GET" and path.endswith("/state")]
    sent = [i for i, (method, *_) in enumerate(seen) if method in ("POST", "DELETE")]
    assert len(polls) > 2 and len(sent) == 2
    for before, at in itertools.pairwise(polls):
        assert any(method == "ASK" for method, *_ in seen[before:at]), (before, at)
    for at in sent:
        last = max(i for i in [0, *polls] if i < at)
        assert any(method == "ASK" for method, *_ in seen[last:at]), at


async def test_an_approval_whose_owner_has_no_credential_sends_nothing_and_says_so(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen, advancing: Any
) -> None:
    owner = Owner(door)
    owner.gone = True
    card = await plan_card(door, clock, store)
    seen.clear()

    done = await service_of(store, clock, owner, advancing).approve(card.id, approver="ada")

    assert done.status is CardStatus.FAILED and seen == []
    assert done.result is not None and "Nothing was sent to Door" in done.result.message


# --- a plan whose server died: continued as its owner, or stopped saying what ran -----------------


async def test_a_killed_plan_is_continued_as_its_owner_and_not_with_another_token(
    app: FastAPI, door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen, advancing: Any
) -> None:
    card = await plan_card(door, clock, store)
    await killed_after(store, clock, card, door, step_1=StepStatus.DONE)
    seen.clear()
    async with DoorClient(BASE_URL, ADMIN_TOKEN, transport=Wire(app, seen), sleep=advancing) as server_own:
        # The restarted server has its own token too; it must not be the one that acts.
        assert token_fingerprint(ADMIN_TOKEN) != OWNER
        (settled,) = await service_of(store, clock, Owner(door), advancing).settle_orphans(server_own)

    assert settled.status is CardStatus.EXECUTED, settled.result
    assert {fp for *_, fp in seen} == {OWNER}
    assert mutations(seen) == [("DELETE", f"{card.id}.3")]


@pytest.mark.parametrize("step_1", [StepStatus.DONE, StepStatus.SENDING, StepStatus.PENDING])
async def test_a_killed_plan_without_its_owner_s_credential_stops_and_says_what_is_known(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen, advancing: Any, step_1: StepStatus
) -> None:
    """The restart without the owner's credential (issue 26, point 2): never "nothing was changed"
    while Door holds the plan's new pool."""
    card = await plan_card(door, clock, store)
    await killed_after(store, clock, card, door, step_1=step_1)
    owner = Owner(door)
    owner.gone = True
    seen.clear()

    (settled,) = await service_of(store, clock, owner, advancing).settle_orphans(door)

    assert seen == []  # not a read, not a step: it has no credential of the owner's to send
    assert settled.result is not None
    said = settled.result.message
    if step_1 is StepStatus.DONE:
        assert settled.status is CardStatus.STOPPED
        assert "Step done: 1 (add pool workers-c5-2xlarge" in said and "Nothing was changed" not in said
        assert "check pools workers, workers-c5-2xlarge on cluster payments-prod" in said
    elif step_1 is StepStatus.SENDING:
        assert settled.status is CardStatus.OUTCOME_UNKNOWN
        assert "may have reached Door" in said and f"{card.id}.1" in said and "Nothing was changed" not in said
        assert settled.steps[0].status is StepStatus.OUTCOME_UNKNOWN
    else:
        assert settled.status is CardStatus.FAILED and said.startswith("Nothing was changed")
    new = (await door.get_cluster(PROD)).pool(NEW)
    assert (new is not None) is (step_1 is not StepStatus.PENDING)


# --- a fault at each boundary of a step -------------------------------------------------------------


async def fault(ops: httpx2.AsyncClient, **spec: Any) -> None:
    response = await ops.post("/_reference/faults", headers=auth(ADMIN_TOKEN), json=spec)
    assert response.status_code in (200, 201), response.text


POST_ROUTE = "POST /v1/public/clusters/{cluster_id}/node-pools"
GET_ROUTE = "GET /v1/public/clusters/{cluster_id}"


async def test_a_fault_before_step_1_is_sent_changes_nothing_and_says_so(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, ops: httpx2.AsyncClient, advancing: Any
) -> None:
    card = await plan_card(door, clock, store)
    await fault(ops, route=POST_ROUTE, status=409, when="before", count=1)

    done = await service_of(store, clock, Owner(door), advancing).approve(card.id, approver="ada")

    assert done.status is CardStatus.FAILED and (await door.get_cluster(PROD)).pool(NEW) is None
    assert done.result is not None and "untouched" in done.result.message


async def test_a_lost_answer_after_step_1_is_read_back_and_the_plan_goes_on(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, ops: httpx2.AsyncClient, seen: Seen, advancing: Any
) -> None:
    card = await plan_card(door, clock, store)
    await fault(ops, route=POST_ROUTE, status=503, when="after", count=3)  # Door applied it; every answer lost

    done = await service_of(store, clock, Owner(door), advancing).approve(card.id, approver="ada")

    assert done.status is CardStatus.EXECUTED, done.result
    assert "reading Door back shows it took effect" in done.steps[0].note
    assert [key for method, key in mutations(seen) if method == "DELETE"] == [f"{card.id}.3"]


async def test_an_unreadable_door_after_step_1_s_lost_answer_is_outcome_unknown_never_nothing_changed(
    app: FastAPI, door: DoorClient, clock: ManualClock, store: SqliteCardStore, ops: httpx2.AsyncClient, advancing: Any
) -> None:
    posted: list[bool] = []

    async def unreachable_after_the_post(request: httpx2.Request) -> None:
        if posted:
            raise httpx2.ConnectError("Door cannot be reached", request=request)
        posted.extend([True] if request.method == "POST" else [])

    async with DoorClient(
        BASE_URL, seed.DEMO_ADMIN_TOKEN, transport=Wire(app, [], unreachable_after_the_post), sleep=advancing
    ) as cut_off:
        card = await plan_card(door, clock, store)
        await fault(ops, route=POST_ROUTE, status=503, when="after", count=3)
        done = await service_of(store, clock, Owner(cut_off), advancing).approve(card.id, approver="ada")

    assert done.status is CardStatus.OUTCOME_UNKNOWN, done.result
    assert done.result is not None and "Nothing was changed" not in done.result.message
    assert f"{card.id}.1" in done.result.message


@pytest.mark.parametrize("where", ["in the wait", "in the settle of step 3"])
async def test_an_unexpected_error_mid_plan_stops_it_saying_which_steps_ran_and_what_door_holds(
    app: FastAPI, clock: ManualClock, store: SqliteCardStore, seen: Seen, advancing: Any, where: str
) -> None:
    """A bug or an answer nothing expected (issue 26, point 3's TypeError) ends the plan honestly instead of
    leaving it to be swept into the same error or settled as "nothing was changed"."""

    async def odd(request: httpx2.Request) -> None:
        if where == "in the wait" and request.url.path.endswith(f"/node-pools/{NEW}/nodes"):
            raise TypeError("can't compare offset-naive and offset-aware datetimes")
        if where != "in the wait" and request.method == "DELETE":
            raise TypeError("an answer nothing here expected")

    async with DoorClient(BASE_URL, seed.DEMO_ADMIN_TOKEN, transport=Wire(app, seen, odd), sleep=advancing) as door:
        card = await plan_card(door, clock, store)
        done = await service_of(store, clock, Owner(door), advancing).approve(card.id, approver="ada")

        assert done.result is not None
        said = done.result.message
        assert "unexpected error (TypeError)" in said and "Nothing was changed" not in said
        assert "Step done: 1 (add pool workers-c5-2xlarge" in said
        if where == "in the wait":
            assert done.status is CardStatus.STOPPED
            assert (
                "On Door now: pool workers in dks.c5.xlarge with 2 workers" in said
                and f"pool {NEW} in dks.c5.2xlarge" in said
            )
        else:  # the DELETE may have left: unknown, with its key
            assert done.status is CardStatus.OUTCOME_UNKNOWN and f"{card.id}.3" in said


# --- keep_name: the old name is added back only once the old pool is gone (R-DEL-02) ---------------


async def test_keep_name_adds_the_old_name_back_only_once_the_old_pool_has_left_door_s_list(
    app: FastAPI, clock: ManualClock, store: SqliteCardStore, seen: Seen, advancing: Any
) -> None:
    """A Door that counts a deleting pool as alive (answers 409 to its name) still gets a plan that works."""
    inner = httpx2.ASGITransport(app=app)
    listed_at_post: list[list[str]] = []

    async def strict(request: httpx2.Request) -> None:
        if request.method == "POST" and request.headers.get("idempotency-key", "").endswith(".4"):
            cluster = await inner.handle_async_request(
                httpx2.Request(
                    "GET",
                    f"{BASE_URL}/v1/public/clusters/{PROD}",
                    headers={"authorization": request.headers["authorization"]},
                )
            )
            await cluster.aread()
            listed_at_post.append([p["name"] for p in cluster.json()["node_pools"]])

    async with DoorClient(BASE_URL, seed.DEMO_ADMIN_TOKEN, transport=Wire(app, seen, strict), sleep=advancing) as door:
        card = await plan_card(door, clock, store, keep_name=True)
        assert "once the old workers is gone" in card.steps[3].title
        service = service_of(store, clock, Owner(door), advancing)
        service.plans.step_timeout = 3600
        done = await service.approve(card.id, approver="ada")

    assert done.status is CardStatus.EXECUTED, done.result
    assert listed_at_post and "workers" not in listed_at_post[0], listed_at_post
    assert [key for _, key in mutations(seen)] == [f"{card.id}.{n}" for n in (1, 3, 4, 6)]


# --- single use and the owner check, with approvals that truly overlap ------------------------------


async def test_fifty_overlapping_approvals_of_one_plan_send_its_first_step_once(
    app: FastAPI, clock: ManualClock, store: SqliteCardStore, seen: Seen, advancing: Any
) -> None:
    """Door answers slowly (every request yields to the other approvals), the credential is read from a
    database (it yields too), and the wait's sleep yields: the fifty approvals overlap, and Door receives
    one POST of step 1, counted among every request it received, not only the accepted ones."""

    async def slow(request: httpx2.Request) -> None:
        for _ in range(25):
            await anyio.lowlevel.checkpoint()

    class SlowOwner(Owner):
        async def door_for(self, card: Card) -> OwnerDoor:
            await anyio.lowlevel.checkpoint()
            return await super().door_for(card)

    async with DoorClient(BASE_URL, seed.DEMO_ADMIN_TOKEN, transport=Wire(app, seen, slow), sleep=advancing) as door:
        card = await plan_card(door, clock, store)
        seen.clear()
        service = service_of(store, clock, SlowOwner(door), advancing)
        results: list[Card] = []
        started = anyio.Event()

        async def approve(n: int) -> None:
            started.set()
            results.append(await service.approve(card.id, approver=f"person {n}"))

        async with anyio.create_task_group() as group:
            for n in range(50):
                group.start_soon(approve, n)

    assert len(results) == 50
    assert [(method, key) for method, _, key, _ in seen if method != "GET"] == [
        ("POST", f"{card.id}.1"),
        ("DELETE", f"{card.id}.3"),
    ]
    assert len({r.approved_by for r in results}) == 1
    assert [e.event for e in await store.audit(card.id)].count("approved") == 1
    # They overlapped: some approvals came back while the winner's plan was still executing.
    assert any(r.status is CardStatus.EXECUTING for r in results)


async def test_another_principal_cannot_stop_someone_s_running_plan(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen, advancing: Any
) -> None:
    card = await plan_card(door, clock, store)
    service = service_of(store, clock, Owner(door), advancing)
    refused: list[BaseException] = []

    async def progress(done: float, total: float, message: str) -> None:
        if "Running" in message and not refused:
            try:
                await service.stop_plan(card.id, by="mel", principal=token_fingerprint(seed.DEMO_MEMBER_TOKEN))
            except CardNotFound as error:
                refused.append(error)

    done = await service.approve(card.id, approver="ada", principal=OWNER, progress=progress)

    assert refused, "another principal's stop_plan was not refused"
    assert done.status is CardStatus.EXECUTED and done.stop_requested_by is None
    assert [method for method, *_ in seen if method != "GET"] == ["POST", "DELETE"]
