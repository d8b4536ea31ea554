"""``list_nodes(fresh=True)`` and ``wait_for_operation`` wait through the injected sleep, never for real."""

from __future__ import annotations

from datetime import timedelta
from email.utils import format_datetime

import httpx2
import pytest

from backend_client import _constants as C
from backend_client.errors import OperationFailed, OperationNotFound, OperationTimeout
from backend_client.models import ClusterState
from tests.backend_client.fakes import (
    CLUSTER_ID,
    NOW,
    FakeDoor,
    Sleeps,
    make_client,
    node_list,
    ok,
    operation,
    state,
)

pytestmark = pytest.mark.anyio

NODES = f"GET /clusters/{CLUSTER_ID}/nodes"
STATE = f"GET /clusters/{CLUSTER_ID}/state"
DATE = {"Date": format_datetime(NOW, usegmt=True)}


async def test_without_fresh_a_stale_snapshot_is_returned_at_once() -> None:
    door = FakeDoor({NODES: [ok(node_list(stale=True, next_refresh_at=NOW + timedelta(seconds=2)))]})
    sleeps = Sleeps()
    async with make_client(door, sleeps) as client:
        nodes = await client.list_nodes(CLUSTER_ID)
    assert nodes.stale and not nodes.fresh
    assert sleeps.delays == []


async def test_fresh_waits_until_next_refresh_at_on_the_servers_clock() -> None:
    door = FakeDoor(
        {
            NODES: [
                ok(node_list(cold=True, next_refresh_at=NOW + timedelta(seconds=2)), headers=DATE),
                ok(node_list(), headers=DATE),
            ]
        }
    )
    sleeps = Sleeps()
    async with make_client(door, sleeps) as client:
        nodes = await client.list_nodes(CLUSTER_ID, fresh=True)
    assert nodes.fresh
    assert sleeps.delays == [2 + C.FRESH_POLL_MIN]


async def test_fresh_without_a_date_header_polls_at_a_short_bounded_interval() -> None:
    far = NOW + timedelta(days=3)  # a simulated server clock far from ours must not make us wait days
    door = FakeDoor({NODES: [ok(node_list(stale=True, next_refresh_at=far)), ok(node_list())]})
    sleeps = Sleeps()
    async with make_client(door, sleeps) as client:
        await client.list_nodes(CLUSTER_ID, fresh=True)
    assert sleeps.delays == [C.FRESH_POLL_UNKNOWN]


async def test_fresh_returns_the_last_snapshot_with_its_flags_when_the_bound_is_hit() -> None:
    door = FakeDoor({NODES: [ok(node_list(stale=True, next_refresh_at=NOW + timedelta(seconds=1)))]})
    sleeps = Sleeps()
    async with make_client(door, sleeps) as client:
        nodes = await client.list_nodes(CLUSTER_ID, fresh=True, fresh_timeout=3.0)
    assert nodes.stale
    assert sum(sleeps.delays) == pytest.approx(3.0)
    assert len(door.requests) == len(sleeps.delays) + 1


async def test_wait_for_operation_follows_it_to_success_reporting_progress() -> None:
    door = FakeDoor(
        {
            STATE: [
                ok(state(operation("op-2", target="workers"), operation("op-1", "succeeded", target="batch"))),
                ok(state(operation("op-2", target="workers"))),
                ok(state(operation("op-2", "succeeded", target="workers"))),
            ]
        }
    )
    sleeps = Sleeps()
    seen: list[ClusterState] = []
    async with make_client(door, sleeps) as client:
        done = await client.wait_for_operation(CLUSTER_ID, target="workers", poll_interval=2.0, on_progress=seen.append)
    assert done.id == "op-2" and done.status == "succeeded"
    assert [s.operations[0].status for s in seen] == ["running", "running", "succeeded"]
    assert sleeps.delays == [2.0, 2.0]


async def test_wait_for_operation_accepts_an_async_progress_callback() -> None:
    door = FakeDoor({STATE: [ok(state(operation("op-1", "succeeded")))]})
    calls: list[str] = []

    async def progress(current: ClusterState) -> None:
        calls.append(current.operations[0].id)

    async with make_client(door) as client:
        await client.wait_for_operation(CLUSTER_ID, operation_id="op-1", on_progress=progress)
    assert calls == ["op-1"]


async def test_wait_for_operation_keeps_following_the_operation_it_found() -> None:
    door = FakeDoor(
        {
            STATE: [
                ok(state(operation("op-1"))),
                ok(state(operation("op-9"), operation("op-1", "succeeded"))),
            ]
        }
    )
    async with make_client(door) as client:
        done = await client.wait_for_operation(CLUSTER_ID, target="workers")
    assert done.id == "op-1"


async def test_a_failed_operation_raises_with_its_error() -> None:
    failed = operation("op-3", "failed", kind="node.replace", target="ghost-node", error="node ghost-node not found")
    door = FakeDoor({STATE: [ok(state(failed))]})
    async with make_client(door) as client:
        with pytest.raises(OperationFailed) as caught:
            await client.wait_for_operation(CLUSTER_ID, target="ghost-node")
    assert caught.value.operation.id == "op-3"
    assert "node ghost-node not found" in str(caught.value)


async def test_an_operation_still_running_at_the_deadline_raises_a_timeout() -> None:
    door = FakeDoor({STATE: [ok(state(operation("op-4")))]})
    sleeps = Sleeps()
    async with make_client(door, sleeps) as client:
        with pytest.raises(OperationTimeout) as caught:
            await client.wait_for_operation(CLUSTER_ID, operation_id="op-4", timeout=5.0, poll_interval=2.0)
    assert sleeps.delays == [2.0, 2.0, 1.0]
    assert isinstance(caught.value, TimeoutError)
    assert "op-4" in str(caught.value)


async def test_waiting_for_an_unknown_operation_raises_not_found() -> None:
    door = FakeDoor({STATE: [ok(state(operation("op-1")))]})
    async with make_client(door) as client:
        with pytest.raises(OperationNotFound):
            await client.wait_for_operation(CLUSTER_ID, operation_id="nope")


async def test_without_id_or_target_the_newest_running_operation_is_followed() -> None:
    door = FakeDoor(
        {
            STATE: [
                ok(state(operation("op-new", "succeeded"), operation("op-run"))),
                ok(state(operation("op-new", "succeeded"), operation("op-run", "succeeded"))),
            ]
        }
    )
    async with make_client(door) as client:
        assert (await client.wait_for_operation(CLUSTER_ID)).id == "op-run"


async def test_state_reads_are_retried_while_waiting() -> None:
    door = FakeDoor({STATE: [httpx2.ReadTimeout("slow"), ok(state(operation("op-1", "succeeded")))]})
    async with make_client(door) as client:
        assert (await client.wait_for_operation(CLUSTER_ID, operation_id="op-1")).status == "succeeded"
