"""After a client accepted a URL elicitation: wait, bounded, for what the page decides.

A host that follows the spec's URL-mode order answers ``accept`` as soon as it opens the link,
before the person has decided anything. Answering ``pending`` then leaves such a host without the
outcome, so the call waits for it instead, for at most ``MAYA_LINK_WAIT_SECONDS``:

- the approval page (``maya_tools.channels.page``): until the card leaves ``pending`` (the page
  decided) and, once approved, until its execution ends; after the bound the call answers what the
  card is then (``pending``, or a plan still running) and ``get_card`` tells the rest;
- ``/connect`` (``maya_tools.channels.connect``): until the person stored their Door token through
  the link; then the tool runs.

2025-11-25 (client/elicitation, "URL Mode Flow" and "URL Mode With Elicitation Required Error
Flow"): once the "Interaction complete" reaches the server, "Server-->>Client:
notifications/elicitation/complete", carrying the request's ``elicitationId``, and the client may
retry; it is sent when the page decides (the card id) or the token is stored (the ``for`` id). 2026-07-28 drops that notification: there "the server determines from the
echoed ``requestState`` (or its own stored state) whether the out-of-band interaction has
completed, and either returns the final result or responds with another ``InputRequiredResult``",
and its URL-mode flow has the server "block until the request is fulfilled" on the retry, which is
what waiting on the retry does.

What wakes a waiter: ``LinkSignals.settled`` from the page or ``/connect`` in this process, and a
read of the shared store every ``POLL_SECONDS`` for a decision taken on another replica. While it
waits the call sends progress notifications, when the caller asked for them (a ``progressToken``),
so a client that resets its timeout on progress keeps the call open.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import anyio

T = TypeVar("T")

POLL_SECONDS = 2.0
"""Between two reads of the shared store while nothing in this process said the link settled."""

Progress = Callable[[float, float, str], Awaitable[None]]


class LinkSignals:
    """In-process wake-ups keyed by elicitation id (a card id, or a ``/connect?for=`` id)."""

    def __init__(self) -> None:
        self._events: dict[str, tuple[anyio.Event, int]] = {}
        self._watchers: dict[str, deque[anyio.CancelScope]] = {}

    @contextmanager
    def watcher(self, person: str, limit: int) -> Iterator[anyio.CancelScope]:
        """A cancel scope for one more background watch of ``person``'s links, entered for its life;
        past ``limit`` of theirs at once, the oldest is cancelled: its link still works, only its
        client hears nothing when it completes (the person opens the newest link their client shows)."""
        scopes = self._watchers.setdefault(person, deque())
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            while len(scopes) > limit:
                scopes.popleft().cancel()
            try:
                yield scope
            finally:
                if scope in scopes:
                    scopes.remove(scope)
                if not scopes:
                    self._watchers.pop(person, None)

    def watched(self, person: str) -> int:
        """How many background watches of ``person``'s links run now."""
        return len(self._watchers.get(person, ()))

    def settled(self, key: str) -> None:
        """Wake whoever waits on ``key``: the page decided, or the person connected."""
        held = self._events.pop(key, None)
        if held is not None:
            held[0].set()

    def _take(self, key: str) -> anyio.Event:
        event, count = self._events.get(key) or (anyio.Event(), 0)
        self._events[key] = (event, count + 1)
        return event

    def _give_back(self, key: str, event: anyio.Event) -> None:
        held = self._events.get(key)
        if held is not None and held[0] is event:
            if held[1] <= 1:
                del self._events[key]
            else:
                self._events[key] = (event, held[1] - 1)

    @property
    def waiting(self) -> int:
        """How many ids someone waits on (none once every wait has ended)."""
        return len(self._events)


async def wait_for(
    signals: LinkSignals,
    key: str,
    check: Callable[[], Awaitable[T | None]],
    *,
    deadline: float,
    seconds: float,
    what: str,
    progress: Progress | None = None,
) -> T | None:
    """``check()``'s first answer that is not None, read again whenever ``key`` settles (or every
    ``POLL_SECONDS``), until ``deadline`` (``anyio.current_time()``); None once it passed.
    ``progress`` hears how long is left before each wait (``seconds`` is the whole bound)."""
    while True:
        event = signals._take(key)  # taken before the read: a settle between the two is not missed
        try:
            found = await check()
            if found is not None:
                return found
            left = deadline - anyio.current_time()
            if left <= 0:
                return None
            if progress is not None:
                await progress(max(seconds - left, 0.0), seconds, f"Waiting for {what} ({math.ceil(left)} s left).")
            with anyio.move_on_after(min(POLL_SECONDS, left)):
                await event.wait()
        finally:
            signals._give_back(key, event)
