"""change_pool_tier and stop_plan through the SDK Client, in both protocol generations, on the
reference backend's manual clock (the server's waits advance it; no sleeps)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from mcp import Client

from confirmation_cards import CardStatus
from reference_backend.backend import ReferenceBackend
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_CLUSTER_ID
from tests.conftest import auth
from tests.maya_tools.conftest import MODES, Person, operations, pool

pytestmark = pytest.mark.anyio

MOVE = {"cluster": "payments-prod", "pool": "workers", "size": "dks.c5.2xlarge"}
POOLS = f"/v1/public/clusters/{DEMO_CLUSTER_ID}/node-pools"


def mutations(backend: ReferenceBackend, since: int) -> list[tuple[str, str, int, bool]]:
    return [
        (r["method"], r["path"], r["status"], r["idempotency_key"])
        for r in backend.requests_since(since)
        if r["method"] != "GET"
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_one_approval_runs_add_then_delete_once_each_with_progress_per_step_and_worker(
    mode: str, connect: Callable[..., Client], backend: ReferenceBackend, door: httpx2.AsyncClient
) -> None:
    person = Person()
    told: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        told.append(message or "")

    since = backend.last_request_seq
    async with connect(mode, person) as client:
        result = await client.call_tool("change_pool_tier", MOVE, progress_callback=progress)
    assert not result.is_error, result.content
    data: dict[str, Any] = result.structured_content or {}
    assert (data["status"], data["changed"]) == ("executed", True)
    assert len(person.messages) == 1 and "3 steps" in person.messages[0]
    assert mutations(backend, since) == [("POST", POOLS, 202, True), ("DELETE", POOLS + "/workers", 202, True)]
    assert any("step 1 of 3" in m for m in told) and any(
        "of 2 workers of pool workers-c5-2xlarge Running" in m for m in told
    )
    assert "pool workers-c5-2xlarge in dks.c5.2xlarge with 2 workers" in data["message"]

    # Step 1's key is the card id and the step: replaying it adds no second pool (R-ADD-09).
    card_id = data["card"]["id"]
    creates = [op for op in await operations(door) if op["kind"] == "pool.create"]
    body = data["card"]["steps"][0]["body"]
    replay = await door.post(POOLS, json=body, headers={**auth(DEMO_ADMIN_TOKEN), "Idempotency-Key": f"{card_id}.1"})
    assert replay.status_code == 202
    assert [op for op in await operations(door) if op["kind"] == "pool.create"] == creates


@pytest.mark.parametrize("mode", MODES)
async def test_get_card_shows_each_step_and_its_operation(
    mode: str, connect: Callable[..., Client], door: httpx2.AsyncClient
) -> None:
    async with connect(mode, Person()) as client:
        done = await client.call_tool("change_pool_tier", {**MOVE, "keep_name": True})
        card_id = (done.structured_content or {})["card"]["id"]
        shown = await client.call_tool("get_card", {"card_id": card_id})
        followed = await client.call_tool("get_cluster_operations", {"cluster": "payments-prod", "follow": card_id})
    plan = (followed.structured_content or {})["plan"]
    assert len(plan) == 7 and plan[-1] == "plan executed" and plan[0].startswith("Step 1 (done)")
    text = shown.content[0].text  # type: ignore[union-attr]
    assert "Step 1 (done): Add pool workers-c5-2xlarge" in text
    assert "Step 4 (done): Add pool workers" in text and "Step 6 (done): Remove pool workers-c5-2xlarge" in text
    assert "Step 1 (done): Add pool workers-c5-2xlarge, operation “" in text
    back = await pool(door, "workers")
    assert back is not None and back["size"] == "dks.c5.2xlarge"


@pytest.mark.parametrize("mode", MODES)
async def test_a_declined_plan_changes_nothing(
    mode: str, connect: Callable[..., Client], backend: ReferenceBackend
) -> None:
    since = backend.last_request_seq
    async with connect(mode, Person("decline")) as client:
        result = await client.call_tool("change_pool_tier", MOVE)
    assert (result.structured_content or {})["status"] == CardStatus.DECLINED.value
    assert mutations(backend, since) == []


async def test_stop_plan_before_approval_declines_the_card_and_another_principal_gets_nothing(
    connect: Callable[..., Client],
) -> None:
    async with connect("auto", None) as client:  # no approval channel: the card stays pending
        pending = await client.call_tool("change_pool_tier", MOVE)
        card_id = (pending.structured_content or {})["card"]["id"]
        stopped = await client.call_tool("stop_plan", {"card_id": card_id})
        missing = await client.call_tool("stop_plan", {"card_id": "card_nobody"})
    assert (stopped.structured_content or {})["status"] == "declined"
    assert missing.is_error
