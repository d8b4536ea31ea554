"""The approval's promise under faults, through a real `maya-tools serve` and a real reference backend:
fault rules are installed after the card is planned (in the person's answer), and in every case Door
applied the change 0 or 1 times and the card's final status says which, or says unknown."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from backend_client.tls import verifying_tls
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.conftest import MODES, Person
from tests.maya_tools.live import PATCH_ROUTE, Live, running, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.http]

SCALE = ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3})


async def approve(live: Live, mode: str, before: Any) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
    async with (
        httpx2.AsyncClient(verify=verifying_tls(), headers=headers, timeout=60) as http,
        Client(
            streamable_http_client(live.url, http_client=http), mode=mode, elicitation_callback=Person("accept", before)
        ) as client,
    ):
        result = await client.call_tool(*SCALE)
    assert result.structured_content is not None, result.content
    return result.structured_content


def honest(status: str, changed: Any, applied: int) -> None:
    """The card says what Door did: executed ⇔ applied once; failed ⇒ not applied; else unknown."""
    assert applied in (0, 1)
    if status == "executed":
        assert changed is True and applied == 1
    elif status == "failed":
        assert changed is False and applied == 0
    else:
        assert status == "outcome_unknown" and changed == "unknown"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("status", [503, 500])
async def test_an_error_after_the_change_three_times_ends_executed_once(
    shared_live: Live, mode: str, status: int
) -> None:
    live = shared_live

    async def after_change_errors() -> None:
        live.fault(route=PATCH_ROUTE, status=status, count=3, when="after")

    data = await approve(live, mode, after_change_errors)

    assert (data["status"], data["changed"]) == ("executed", True)
    assert "Nothing was changed" not in data["message"]
    assert live.changes() == 1


async def test_latency_beyond_the_clients_timeout_waits_for_the_first_answer_and_executes_once(
    shared_live: Live,
) -> None:
    """The 1 s client times out on a 2.5 s Door; the keyed retry meets "in flight" (R-PATCH-09), waits, replays."""
    live = shared_live

    async def slow_door() -> None:
        live.fault(route=PATCH_ROUTE, status=None, latency_ms=2500, count=1)

    data = await approve(live, "auto", slow_door)

    assert (data["status"], data["changed"]) == ("executed", True)
    assert live.changes() == 1


@pytest.fixture
def door_down_throughout(tmp_path: Path) -> Iterator[Live]:
    """Settling for 1 s, not 3: Door stays down for the whole call, so a longer window only repeats failed reads."""
    with running(tmp_path, MAYA_SETTLE_SECONDS="1") as world:
        yield world


async def test_door_killed_while_holding_the_patch_is_never_nothing_changed(door_down_throughout: Live) -> None:
    live = door_down_throughout

    def kill_when_held() -> None:
        wait_until(lambda: live.faults_left() == 0, "the PATCH to reach Door")
        live.door.kill()

    async def hold_then_kill() -> None:
        live.fault(route=PATCH_ROUTE, status=None, latency_ms=60_000, count=1)
        threading.Thread(target=kill_when_held, daemon=True).start()

    data = await approve(live, "auto", hold_then_kill)
    live.door.start()  # same state file

    assert "Nothing was changed" not in data["message"]
    honest(data["status"], data["changed"], live.changes())
    assert data["status"] == "outcome_unknown"


@pytest.mark.parametrize("mode", MODES)
async def test_door_down_when_the_person_approves_sends_nothing_and_says_so(live: Live, mode: str) -> None:
    """Legacy: the approval's re-read fails, the card is failed. 2026-07-28: the answering round cannot
    even find the card (its cluster is read again), so the card stays pending. Either way: nothing sent."""

    async def door_down() -> None:
        live.door.kill()

    headers = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
    async with (
        httpx2.AsyncClient(verify=verifying_tls(), headers=headers, timeout=60) as http,
        Client(
            streamable_http_client(live.url, http_client=http),
            mode=mode,
            elicitation_callback=Person("accept", door_down),
        ) as client,
    ):
        result = await client.call_tool(*SCALE)
    live.door.start()

    if result.is_error:
        assert "nothing changed" in result.content[0].text  # type: ignore[union-attr]
    else:
        data = result.structured_content
        assert data is not None and (data["status"], data["changed"]) == ("failed", False)
        assert "Nothing was changed" in data["message"]
    assert [card["status"] for card in stored_cards(live.card_store)] in (["failed"], ["pending"])
    assert live.changes() == 0


def stored_cards(store: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        return [json.loads(row[0]) for row in db.execute("SELECT data FROM cards")]


@pytest.mark.parametrize(("mode", "settler"), [("legacy", "restarted"), ("auto", "restarted"), ("auto", "live peer")])
async def test_serve_killed_mid_execution_is_settled_by_the_next_server_or_a_live_one(
    live: Live, mode: str, settler: str
) -> None:
    """SIGKILL while the PATCH is held at Door: a server restarted at once on the store settles the card at
    start; a server already running on the same store settles it at its next sweep (within 60 s)."""
    if settler == "live peer":
        peer = live.servers[0]
        live.serve()  # the one the person uses, and that dies

    def kill_serve_when_sent() -> None:
        wait_until(lambda: live.faults_left() == 0, "the PATCH to reach Door")
        live.servers[-1].kill()

    async def hold_then_kill_serve() -> None:
        live.fault(route=PATCH_ROUTE, status=None, latency_ms=1500, count=1)
        threading.Thread(target=kill_serve_when_sent, daemon=True).start()

    with pytest.raises(Exception):  # noqa: B017 (the server died under the call: any transport error)
        with anyio.fail_after(30):
            await approve(live, mode, hold_then_kill_serve)
    (card,) = stored_cards(live.card_store)
    assert card["status"] == "executing"

    if settler == "restarted":
        live.serve()  # restarted at once on the same card store
    else:
        live.servers.append(peer)  # ask the peer that was running all along

    def settled() -> bool:
        return stored_cards(live.card_store)[0]["status"] != "executing"

    await anyio.to_thread.run_sync(lambda: wait_until(settled, "the restarted server to settle the card", 60))
    headers = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
    async with (
        httpx2.AsyncClient(verify=verifying_tls(), headers=headers) as http,
        Client(streamable_http_client(live.url, http_client=http), mode=mode) as client,
    ):
        shown = await client.call_tool("get_card", {"card_id": card["id"]})
    assert shown.structured_content is not None
    final = shown.structured_content["card"]
    assert final["status"] in ("executed", "outcome_unknown")  # its request had left: never "nothing changed"
    changed = {"executed": True, "outcome_unknown": "unknown"}[final["status"]]
    honest(final["status"], changed, live.changes())
    assert "recovered" in [event["event"] for event in shown.structured_content["audit"]]
