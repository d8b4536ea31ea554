"""The memory behind resumable streams (``maya_tools.stream_events``): bounded per session by count and
bytes, bounded across sessions by a budget, freed with the session; ids of one session mean nothing
in another (the live resume is ``test_stream_resume.py``)."""

from __future__ import annotations

import gc

import anyio
import pytest
from mcp_types import JSONRPCNotification, JSONRPCResponse

from maya_tools.stream_events import EVENT_OVERHEAD, Budget, EventMessage, SessionEvents

pytestmark = pytest.mark.anyio


def note(n: int, pad: int = 0) -> JSONRPCNotification:
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={"n": n, "pad": "x" * pad})


async def replayed(events: SessionEvents, after: str) -> list[str]:
    sent: list[EventMessage] = []

    async def keep(message: EventMessage) -> None:
        sent.append(message)

    await events.replay_after(after, keep)
    return [m.event_id or "" for m in sent]


async def test_a_session_keeps_at_most_its_count_of_events_oldest_out() -> None:
    events = SessionEvents(Budget(), max_events=3)
    ids = [events.store("1", note(n)) for n in range(5)]
    assert len(events) == 3
    assert not events.holds(ids[1]) and events.holds(ids[2])
    assert await replayed(events, ids[2]) == ids[3:]


async def test_a_session_keeps_at_most_its_bytes_and_an_event_larger_than_that_is_not_kept() -> None:
    events = SessionEvents(Budget(), max_bytes=2_000)
    small = [events.store("1", note(n, pad=500)) for n in range(6)]
    assert events.bytes <= 2_000 and events.holds(small[-1]) and not events.holds(small[0])
    huge = events.store("1", note(9, pad=5_000))
    assert not events.holds(huge) and events.holds(small[-1]), "a huge event evicts nothing and is not kept"


async def test_all_sessions_together_stay_within_the_budget_and_the_budget_comes_back() -> None:
    budget = Budget(limit=10 * (EVENT_OVERHEAD + 200))
    first, second = SessionEvents(budget), SessionEvents(budget)
    for n in range(8):
        first.store("1", note(n, pad=100))
    kept = [second.store("1", note(n, pad=100)) for n in range(8)]
    assert budget.used <= budget.limit and budget.used == first.bytes + second.bytes
    assert second.holds(kept[-1]), "a full budget makes a session drop its own oldest first"
    first.clear()
    assert budget.used == second.bytes
    del second
    gc.collect()
    assert budget.used == 0, "a session's events are freed with it"


async def test_an_id_of_another_session_or_a_made_up_one_replays_nothing() -> None:
    budget = Budget()
    mine, theirs = SessionEvents(budget), SessionEvents(budget)
    their_id = theirs.store("1", note(1))
    mine.store("1", note(1))
    mine.store("1", note(2))
    for foreign in (their_id, "nope-1", "", "abc"):
        assert not mine.holds(foreign)
        assert await replayed(mine, foreign) == []


async def test_following_a_stream_yields_its_later_events_as_they_come_and_ends_at_its_answer() -> None:
    events = SessionEvents(Budget())
    primed = events.store("7", None)
    events.store("7", note(1))
    events.store("8", note(99))  # another request's stream
    got: list[object] = []
    async with anyio.create_task_group() as group:

        async def follow() -> None:
            async for _, message in events.follow(primed):
                got.append(message)

        group.start_soon(follow)
        await anyio.wait_all_tasks_blocked()
        assert got == [note(1)]
        events.store("7", note(2))
        events.store("7", JSONRPCResponse(jsonrpc="2.0", id=7, result={}))
        events.store("7", note(3))  # after the answer: not this stream's any more
    assert got == [note(1), note(2), JSONRPCResponse(jsonrpc="2.0", id=7, result={})]


async def test_following_ends_when_the_session_ends() -> None:
    events = SessionEvents(Budget())
    primed = events.store("7", None)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:

            async def follow() -> None:
                async for _ in events.follow(primed):
                    pass

            group.start_soon(follow)
            await anyio.wait_all_tasks_blocked()
            events.clear()
