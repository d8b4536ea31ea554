"""change_pool_tier under faults, through a real `maya-tools serve` and a real `maya-tools reference-backend`.

The backend runs a manual clock: its workers are provisioned only when the test advances it through
the admin plane (``POST /_reference/clock/advance``), so holding the clock holds provisioning. The
server's own waits are the wall clock's (short settings below). What the test reads of Door is
Door's operations: one ``pool.create`` and one ``pool.delete`` per step that was applied.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from backend_client.tls import verifying_tls
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_CLUSTER_ID
from tests.maya_tools.conftest import Person
from tests.maya_tools.live import Live, running, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.http]

MOVE = ("change_pool_tier", {"cluster": "payments-prod", "pool": "workers", "size": "dks.c5.2xlarge"})
ADD_ROUTE = "POST /v1/public/clusters/{cluster_id}/node-pools"
DELETE_ROUTE = "DELETE /v1/public/clusters/{cluster_id}/node-pools/{pool}"
FAST = {"MAYA_PLAN_POLL_SECONDS": "0.1", "MAYA_SETTLE_SECONDS": "1"}


def plan_card(store: Path) -> dict[str, Any]:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        [row] = db.execute("SELECT data FROM cards").fetchall()
    card: dict[str, Any] = json.loads(row[0])
    return card


def step_status(live: Live, index: int) -> str:
    try:
        return str(plan_card(live.card_store)["steps"][index - 1]["status"])
    except (sqlite3.Error, ValueError):
        return "unknown"  # no card yet, or the store is mid-write


class DoorClock:
    """Door's manual clock moved 5 s every few milliseconds from a thread, once started: workers come
    up (and the node inventory refreshes) while the server waits on the wall clock."""

    def __init__(self, live: Live) -> None:
        self.live = live
        self.stopped = threading.Event()
        self.started = False

    def start(self) -> None:
        if not self.started:
            self.started = True
            in_thread(self._run)

    def _run(self) -> None:
        while not self.stopped.wait(0.02):
            self.live.admin("POST", "/_reference/clock/advance", json={"seconds": 5})

    def __enter__(self) -> DoorClock:
        return self

    def __exit__(self, *_: object) -> None:
        self.stopped.set()


async def call(live: Live, before: Any = None, mode: str = "auto") -> dict[str, Any] | None:
    """Plan and approve through the live server; None when the server died during the call."""
    headers = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
    try:
        async with (
            httpx2.AsyncClient(verify=verifying_tls(), headers=headers, timeout=120) as http,
            Client(
                streamable_http_client(live.url, http_client=http),
                mode=mode,
                elicitation_callback=Person("accept", before),
            ) as client,
        ):
            result = await client.call_tool(*MOVE)
    except Exception:  # the server was killed mid-call, on purpose
        return None
    assert result.structured_content is not None, result.content
    return result.structured_content


def old_pool_lifecycle(live: Live) -> str | None:
    with httpx2.Client(verify=verifying_tls(), base_url=live.door_url, timeout=10) as http:
        pools = http.get(
            f"/v1/public/clusters/{DEMO_CLUSTER_ID}/node-pools", headers={"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
        ).json()["items"]
    return next((p["lifecycle"] for p in pools if p["name"] == "workers"), None)


def in_thread(work: Any) -> None:
    threading.Thread(target=work, daemon=True).start()


@pytest.mark.parametrize("when", ["after step 1", "after the wait"])
async def test_serve_killed_mid_plan_is_finished_by_a_restarted_server_with_no_step_twice(
    tmp_path: Path, when: str
) -> None:
    # Door's answer to the held DELETE is waited for (5 s), so the dying server sends it once, unretried.
    with running(tmp_path, **FAST, MAYA_DOOR_TIMEOUT_SECONDS="5") as live, DoorClock(live) as clock:

        def kill_after_step_1() -> None:
            wait_until(lambda: step_status(live, 1) == "done", "step 1 to be recorded", timeout=60)
            live.servers[0].kill()

        def kill_while_the_delete_is_held() -> None:
            wait_until(lambda: step_status(live, 1) == "done", "step 1", timeout=60)
            clock.start()  # the new workers come up
            wait_until(lambda: live.faults_left() == 0, "the DELETE to reach Door", timeout=60)
            live.servers[0].kill()

        async def arrange() -> None:
            if when == "after step 1":
                in_thread(kill_after_step_1)
            else:
                live.fault(route=DELETE_ROUTE, status=None, latency_ms=1500, count=1)
                in_thread(kill_while_the_delete_is_held)

        assert await call(live, arrange) is None  # the approving server died
        if when == "after the wait":  # Door finishes the held DELETE after the server is gone
            wait_until(lambda: old_pool_lifecycle(live) != "active", "Door to apply the held DELETE", timeout=30)
        live.serve()  # a new server on the same store continues the plan at its first sweep
        clock.start()
        wait_until(lambda: plan_card(live.card_store)["status"] != "executing", "the plan to finish", timeout=60)

        card = plan_card(live.card_store)
        assert card["status"] == "executed", card["result"]
        assert [s["status"] for s in card["steps"]] == ["done", "done", "done"]
        assert (live.changes("pool.create"), live.changes("pool.delete")) == (1, 1)
        # Door saw each mutation once: the continuing server read Door before sending step 3 again.
        seen = [
            (r["method"], r["path"], r["status"]) for r in live.admin("GET", "/_reference/requests").json()["items"]
        ]
        assert [m for m, _, _ in seen if m != "GET"] == ["POST", "DELETE"]


@pytest.mark.parametrize("status", [402, 503])
async def test_door_refusing_or_failing_step_1_leaves_the_old_pool_untouched_and_says_so(
    tmp_path: Path, status: int
) -> None:
    with running(tmp_path, **FAST) as live:

        async def refuse_the_add() -> None:
            live.fault(route=ADD_ROUTE, status=status, count=10)

        data = await call(live, refuse_the_add)

        assert data is not None
        assert data["status"] == ("failed" if status == 402 else "outcome_unknown")
        assert data["changed"] == (False if status == 402 else "unknown")
        assert "Pool workers is untouched" in data["message"]
        assert (live.changes("pool.create"), live.changes("pool.delete")) == (0, 0)


async def test_the_new_pool_never_running_stops_at_the_deadline_and_keeps_the_old_pool(tmp_path: Path) -> None:
    """Door's clock is never advanced, so the new workers stay Pending; the deadline is 2 s of the server's time."""
    with running(tmp_path, MAYA_PLAN_STEP_TIMEOUT_SECONDS="2", **FAST) as live:
        data = await call(live)

        assert data is not None and data["status"] == "stopped" and data["changed"] is True
        assert "did not reach Running within 2 s" in data["message"]
        assert "pool workers in dks.c5.xlarge with 2 workers" in data["message"]
        assert "remove the new pool workers-c5-2xlarge" in data["message"]
        assert (live.changes("pool.create"), live.changes("pool.delete")) == (1, 0)


async def test_the_old_pool_scaled_by_someone_else_stops_the_plan_before_removal(tmp_path: Path) -> None:
    with running(tmp_path, **FAST) as live, DoorClock(live) as clock:

        def scale_then_provision() -> None:
            wait_until(lambda: step_status(live, 2) == "waiting", "the wait", timeout=60)
            with httpx2.Client(verify=verifying_tls(), base_url=live.door_url, timeout=10) as http:
                scaled = http.patch(
                    f"/v1/public/clusters/{DEMO_CLUSTER_ID}/node-pools/workers",
                    json={"count": 3},
                    headers={"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"},
                )
            assert scaled.status_code == 202, scaled.text
            clock.start()

        async def arrange() -> None:
            in_thread(scale_then_provision)

        data = await call(live, arrange)

        assert data is not None and data["status"] == "stopped"
        assert "count was 2 and is now 3" in data["message"]
        assert live.changes("pool.delete") == 0


async def test_stop_plan_between_steps_sends_nothing_further(tmp_path: Path) -> None:
    with running(tmp_path, **FAST) as live:
        headers = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}

        def stop_during_the_wait() -> None:
            wait_until(lambda: step_status(live, 2) == "waiting", "the wait", timeout=60)
            card_id = plan_card(live.card_store)["id"]

            async def stop() -> None:
                async with (
                    httpx2.AsyncClient(verify=verifying_tls(), headers=headers, timeout=30) as http,
                    Client(streamable_http_client(live.url, http_client=http)) as client,
                ):
                    result = await client.call_tool("stop_plan", {"card_id": card_id})
                assert not result.is_error, result.content

            anyio.run(stop)

        async def arrange() -> None:
            in_thread(stop_during_the_wait)

        data = await call(live, arrange)

        assert data is not None and data["status"] == "stopped"
        assert "asked to stop the plan" in data["message"]
        assert (live.changes("pool.create"), live.changes("pool.delete")) == (1, 0)
