"""A plan whose server is SIGKILLed mid-plan is finished by a live replica on the same PostgreSQL card
store: two real `maya-tools serve` replicas in front of one real `maya-tools reference-backend` (its
manual clock moved by the test through the admin plane). The live replica's sweep sees the dead
executor, takes the plan over and continues from the step the store recorded; Door's request log
shows each step's request once, each with its own Idempotency-Key."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from backend_client.tls import verifying_tls
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.conftest import Person
from tests.maya_tools.live import Live, wait_until
from tests.maya_tools.test_plans_live import DELETE_ROUTE, FAST, MOVE, DoorClock, in_thread

pytestmark = [pytest.mark.anyio, pytest.mark.http]


def plan_card(store: str) -> dict[str, Any]:
    with psycopg.connect(store, autocommit=True) as conn:
        rows = conn.execute("SELECT data FROM maya_cards").fetchall()
    [(data,)] = rows
    card: dict[str, Any] = json.loads(data)
    return card


def step_status(store: str, index: int) -> str:
    try:
        return str(plan_card(store)["steps"][index - 1]["status"])
    except ValueError:
        return "unknown"  # no card yet


@pytest.mark.parametrize("when", ["after step 1", "after the wait"])
async def test_a_live_replica_on_postgresql_finishes_a_killed_server_s_plan_with_no_step_twice(
    tmp_path: Path, postgres_url: str, when: str
) -> None:
    key = secrets.token_hex(32)  # shared by the replicas, as docs/deploy.md asks
    # The continuing replica reads a step found `sending` back for the settle window (3 s here, more than
    # the 1.5 s Door holds the DELETE) before it would send it again.
    env = {**FAST, "MAYA_SETTLE_SECONDS": "3", "MAYA_DOOR_TIMEOUT_SECONDS": "5", "MAYA_REQUEST_STATE_KEY": key}
    live = Live(tmp_path, MAYA_CARD_STORE=postgres_url, **env)
    try:
        live.serve()  # the live replica, on the same store, sweeping every second
        dying, replica = live.servers
        since = live.admin("GET", "/_reference/requests").json()["next"]
        with DoorClock(live) as clock:

            def kill_after_step_1() -> None:
                wait_until(lambda: step_status(postgres_url, 1) == "done", "step 1 to be recorded", timeout=60)
                dying.kill()

            def kill_while_the_delete_is_answered() -> None:
                wait_until(lambda: step_status(postgres_url, 1) == "done", "step 1", timeout=60)
                clock.start()  # the new workers come up
                wait_until(lambda: live.faults_left() == 0, "the DELETE to reach Door", timeout=60)
                dying.kill()

            async def arrange() -> None:
                if when == "after step 1":
                    in_thread(kill_after_step_1)
                else:
                    # Door applies the DELETE, then holds its answer: the server dies with step 3 `sending`.
                    live.fault(route=DELETE_ROUTE, status=503, when="after", latency_ms=1500, count=1)
                    in_thread(kill_while_the_delete_is_answered)

            headers = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
            with pytest.raises(Exception):  # noqa: B017 (the server died under the call: any transport error)
                async with (
                    httpx2.AsyncClient(verify=verifying_tls(), headers=headers, timeout=120) as http,
                    Client(
                        streamable_http_client(f"http://127.0.0.1:{dying.port}/mcp", http_client=http),
                        elicitation_callback=Person("accept", arrange),
                    ) as client,
                ):
                    await client.call_tool(*MOVE)
            clock.start()
            wait_until(lambda: plan_card(postgres_url)["status"] != "executing", "the replica to finish", timeout=90)

        card = plan_card(postgres_url)
        assert card["status"] == "executed", card["result"]
        assert [s["status"] for s in card["steps"]] == ["done", "done", "done"]
        async with (
            httpx2.AsyncClient(verify=verifying_tls(), headers=headers, timeout=30) as http,
            Client(streamable_http_client(f"http://127.0.0.1:{replica.port}/mcp", http_client=http)) as client,
        ):
            shown = await client.call_tool("get_card", {"card_id": card["id"]})
        assert shown.structured_content is not None
        assert "recovered" in [event["event"] for event in shown.structured_content["audit"]]
        seen = live.admin("GET", "/_reference/requests", params={"since": since}).json()["items"]
        sent = [(r["method"], r["path"], r["status"], r["idempotency_key"]) for r in seen if r["method"] != "GET"]
        assert [(method, key) for method, _, _, key in sent] == [("POST", True), ("DELETE", True)], sent
        assert (live.changes("pool.create"), live.changes("pool.delete")) == (1, 1)
    finally:
        live.close()
