"""The approvers' webhook (``MAYA_APPROVAL_WEBHOOK_URL``, issue 28): a message when a card starts waiting
for the policy's approvers and when it is decided, retried with backoff, bounded, never blocking the card.

The cards are planned against the real reference backend (ASGI) and kept in a real SQLite store; the
receiver is a real Starlette app reached through ``httpx2.ASGITransport``; the backoff's sleep is
recorded, never waited.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import anyio
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from backend_client import DoorClient
from backend_client.models import PublicNodePoolPatchRequest
from confirmation_cards import ApprovalService, Approver, Card, CardStatus, Planner, SqliteCardStore
from confirmation_cards.owners import FixedDoor
from confirmation_cards.policy import parse_policy
from confirmation_cards.stores import AuditEntry
from maya_tools.settings import ConfigError, Settings
from maya_tools.webhook import QUEUE_CAP, Webhook, notifying
from reference_backend.clock import ManualClock
from tests.confirmation_cards.conftest import SECRETS, admin

pytestmark = pytest.mark.anyio

__all__ = ["admin"]  # the Door client fixture of tests/confirmation_cards

PUBLIC = "https://maya.example.test"
HOOK = "https://hooks.example.test/services/T000/B000/very-secret-path"
POLICY = parse_policy(
    {
        "rule": [
            {
                "name": "prod-four-eyes",
                "clusters": ["tag:prod"],
                "approvals": 1,
                "approvers": {"claim": "groups", "any_of": ["platform"]},
                "self_approval": False,
            }
        ]
    }
)
PAT = Approver(
    principal="sub_pat", issuer="https://id.test", subject="pat", name="Pat", claims={"groups": ["platform"]}
)


class Receiver:
    """A webhook receiver: answers each post with the next of ``statuses`` (then 200) and keeps the bodies."""

    def __init__(self, *statuses: int) -> None:
        self.statuses = list(statuses)
        self.bodies: list[dict[str, Any]] = []
        self.tries = 0
        self.got = anyio.Event()

        async def hook(request: Request) -> JSONResponse:
            self.tries += 1
            status = self.statuses.pop(0) if self.statuses else 200
            if status < 300:
                self.bodies.append(json.loads(await request.body()))
                self.got.set()
            return JSONResponse({}, status_code=status)

        self.app = Starlette(routes=[Route("/services/T000/B000/very-secret-path", hook, methods=["POST"])])

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=self.app))

    async def wait_for(self, count: int) -> None:
        with anyio.fail_after(5):
            while len(self.bodies) < count:
                self.got = anyio.Event()
                await self.got.wait()


class Sleeps:
    def __init__(self) -> None:
        self.waited: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waited.append(seconds)


@pytest.fixture
def store() -> SqliteCardStore:
    return SqliteCardStore(":memory:")


async def running(webhook: Webhook) -> AsyncIterator[None]:
    async with anyio.create_task_group() as group:
        group.start_soon(webhook.run)
        yield
        group.cancel_scope.cancel()


async def plan(admin: DoorClient, clock: ManualClock, *, policy: bool = True) -> Card:
    planner = Planner(admin, clock=clock.now, policy=POLICY if policy else None)
    return await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))


async def test_a_waiting_card_and_its_outcome_each_send_one_message_with_the_review_url_and_no_secret(
    admin: DoorClient, clock: ManualClock, store: SqliteCardStore
) -> None:
    receiver = Receiver()
    async with receiver.client() as http:
        webhook = Webhook(HOOK, public_url=PUBLIC, http=http, sleep=Sleeps())
        service = ApprovalService(notifying(store, webhook), clock=clock.now)
        service.owners = FixedDoor(admin)
        async with anyio.create_task_group() as group:
            group.start_soon(webhook.run)
            plain = await service._store.create(await plan(admin, clock, policy=False))
            card = await service._store.create(await plan(admin, clock))
            await receiver.wait_for(1)
            done = await service.approve_as(card.id, PAT)
            await receiver.wait_for(2)
            await service.decline(plain.id, by="the requester")  # a card no rule asks approvers for: no message
            await anyio.wait_all_tasks_blocked()
            group.cancel_scope.cancel()

    assert done.status is CardStatus.EXECUTED, done.result
    waiting, decided = receiver.bodies
    assert len(receiver.bodies) == 2
    assert waiting["event"] == "waiting" and decided["event"] == "decided"
    for body in receiver.bodies:
        assert body["card"] == card.id and body["url"] == f"{PUBLIC}/cards/{card.id}"
        assert (body["cluster"], body["pool"], body["action"], body["rules"]) == (
            "payments-prod",
            "workers",
            "scale",
            ["prod-four-eyes"],
        )
        assert body["url"] in body["text"] and card.id in body["text"]
    assert waiting["status"] == "pending"
    assert waiting["waiting_for"].startswith("needs 1 approval from platform (rule prod-four-eyes); ")
    assert decided["status"] == "executed" and decided["approved_by"] == ["Pat (sub pat, sub_pat)"]
    sent = json.dumps(receiver.bodies)
    assert not any(secret in sent for secret in SECRETS) and "very-secret-path" not in sent


async def test_only_a_move_into_a_final_status_is_a_decision(
    admin: DoorClient, clock: ManualClock, store: SqliteCardStore
) -> None:
    """A card leaving pending for executing (the claim), or an executing plan asked to stop, is not decided yet."""
    receiver = Receiver()
    async with receiver.client() as http:
        webhook = Webhook(HOOK, public_url=PUBLIC, http=http, sleep=Sleeps())
        notified = notifying(store, webhook)
        card = await notified.create(await plan(admin, clock))
        until = clock.now() + timedelta(minutes=5)
        stop = AuditEntry("stop_requested", clock.now(), by="pat")
        assert await notified.claim(
            card.id,
            executor="me",
            until=until,
            entry=AuditEntry("approved", clock.now()),
            update={},
            live_at=clock.now(),
        )
        assert await notified.transition(card.id, expected=CardStatus.EXECUTING, to=CardStatus.EXECUTING, entry=stop)
        done = AuditEntry("failed", clock.now(), detail="Door refused it")
        assert await notified.transition(card.id, expected=CardStatus.EXECUTING, to=CardStatus.FAILED, entry=done)
        async with anyio.create_task_group() as group:
            group.start_soon(webhook.run)
            await receiver.wait_for(2)
            await anyio.wait_all_tasks_blocked()
            group.cancel_scope.cancel()
    assert [(b["event"], b["status"]) for b in receiver.bodies] == [("waiting", "pending"), ("decided", "failed")]


async def test_a_waiting_card_that_expires_is_told_as_decided_expired(
    admin: DoorClient, clock: ManualClock, store: SqliteCardStore
) -> None:
    receiver = Receiver()
    async with receiver.client() as http:
        webhook = Webhook(HOOK, public_url=PUBLIC, http=http, sleep=Sleeps())
        service = ApprovalService(notifying(store, webhook), clock=clock.now)
        card = await service._store.create(await plan(admin, clock))
        clock.advance(11 * 60)  # past its 10 minutes
        (expired,) = await service.expire_due()
        async with anyio.create_task_group() as group:
            group.start_soon(webhook.run)
            await receiver.wait_for(2)
            group.cancel_scope.cancel()
    assert expired.id == card.id and [(b["event"], b["status"]) for b in receiver.bodies] == [
        ("waiting", "pending"),
        ("decided", "expired"),
    ]
    assert "expired" in receiver.bodies[1]["text"] and receiver.bodies[1]["waiting_for"] == ""


async def test_a_failing_receiver_is_retried_with_backoff_and_gets_the_message_once(
    admin: DoorClient, clock: ManualClock, store: SqliteCardStore
) -> None:
    receiver, sleeps = Receiver(503, 429), Sleeps()
    async with receiver.client() as http:
        webhook = Webhook(HOOK, public_url=PUBLIC, http=http, sleep=sleeps)
        webhook.send(await plan(admin, clock), "waiting")
        async with anyio.create_task_group() as group:
            group.start_soon(webhook.run)
            await receiver.wait_for(1)
            group.cancel_scope.cancel()
    assert (receiver.tries, len(receiver.bodies), sleeps.waited) == (3, 1, [0.5, 1.0])


async def test_a_receiver_that_keeps_failing_gets_three_tries_and_a_refusal_one(
    admin: DoorClient, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    card = await plan(admin, clock)
    for statuses, tries, waited in (((500, 502, 503), 3, [0.5, 1.0]), ((404,), 1, [])):
        receiver, sleeps = Receiver(*statuses), Sleeps()
        async with receiver.client() as http:
            webhook = Webhook(HOOK, public_url=PUBLIC, http=http, sleep=sleeps)
            webhook.send(card, "waiting")
            webhook.send(card, "decided")  # the next message goes after the first gave up
            async with anyio.create_task_group() as group:
                group.start_soon(webhook.run)
                await receiver.wait_for(1)
                group.cancel_scope.cancel()
        assert (receiver.tries, sleeps.waited) == (tries + 1, waited)
        assert [b["event"] for b in receiver.bodies] == ["decided"]
    assert "hooks.example.test" in caplog.text and "very-secret-path" not in caplog.text


async def test_a_full_queue_drops_its_oldest_message_with_a_log_line_and_send_never_waits(
    admin: DoorClient, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    card = await plan(admin, clock)
    receiver = Receiver()
    caplog.set_level(logging.WARNING, "maya_tools")
    async with receiver.client() as http:
        webhook = Webhook(HOOK, public_url=PUBLIC, http=http, sleep=Sleeps(), cap=2)
        for event in ("first", "second", "third"):
            webhook.send(card, event)  # no receiver runs yet: send only queues
        assert webhook.dropped == 1
        async with anyio.create_task_group() as group:
            group.start_soon(webhook.run)
            await receiver.wait_for(2)
            group.cancel_scope.cancel()
    assert [b["event"] for b in receiver.bodies] == ["second", "third"]
    assert f"dropped the first message of card {card.id}" in caplog.text
    assert QUEUE_CAP >= 100


def test_the_webhook_setting_takes_https_or_loopback_http_and_never_repeats_the_url() -> None:
    assert Settings.from_env({"MAYA_APPROVAL_WEBHOOK_URL": HOOK}).approval_webhook_url == HOOK
    assert Settings.from_env({"MAYA_APPROVAL_WEBHOOK_URL": "http://127.0.0.1:9/hook"}).approval_webhook_url
    assert Settings.from_env({}).approval_webhook_url is None
    for bad in ("http://hooks.example.test/services/very-secret-path", "ftp://127.0.0.1/very-secret-path"):
        with pytest.raises(ConfigError, match="MAYA_APPROVAL_WEBHOOK_URL must be an https:// URL") as refused:
            Settings.from_env({"MAYA_APPROVAL_WEBHOOK_URL": bad})
        assert "very-secret-path" not in str(refused.value)
    assert "very-secret-path" not in repr(Settings.from_env({"MAYA_APPROVAL_WEBHOOK_URL": HOOK}))
