"""Resumable SSE streams on protocol 2025-11-25: the events an MCP session's streams carried, kept in
memory for a while so a client whose connection dropped can ask for the rest with ``Last-Event-ID``.

The SDK's transport asks an ``EventStore`` for an id for every event it sends on a request's stream
(and for a first, empty *priming* event that carries an id and ``retry`` before anything else), and
on a ``GET`` with ``Last-Event-ID`` replays what the store holds after that id. The SDK gives one
store to every session and names streams by JSON-RPC request id, which sessions share ("1", "2"…),
so ``StreamEvents`` keeps each session's events apart: ``KeepSessionEvents`` (the ASGI middleware
in front of the SDK's app) makes a ``SessionEvents`` for each request that opens a session and finds
it again for the session's later requests, through a context variable that the session's own tasks
inherit from the request that opened it.

The resumption itself, a ``GET`` with ``Last-Event-ID``, is served here from the session's events:
what came after that id on its stream, then each later event of the stream as it is stored, until
the stream's answer. Every message the session sends is stored before it is sent, so nothing falls
between the replay and the live part (the SDK's own replay registers the live stream only after
replaying, and an answer sent in between reached nobody). A ``Last-Event-ID`` is looked up in its
own session only: another session's id, an evicted one or a made-up one is answered ``400``.

Memory is bounded: per session by event count and bytes (oldest first out), and across sessions by
a byte budget. A session's events go with it: at once when its owner deletes it or it is found gone,
else when the session's tasks end (idle timeout) and nothing refers to them any more.

Protocol 2026-07-28 has no resumable streams (its streamable HTTP transport: "Resumable SSE streams
via ``Last-Event-ID`` are not supported"); the SDK sends its streams without ids, and none of this
is used there.
"""

from __future__ import annotations

import json
import secrets
import weakref
from collections import OrderedDict
from collections.abc import AsyncGenerator
from contextlib import aclosing
from contextvars import ContextVar
from dataclasses import dataclass, field

import anyio
from mcp.server.streamable_http import GET_STREAM_KEY, EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

RETRY_MS = 1_000
"""The ``retry`` of each priming event: how long a client waits before it resumes a dropped stream."""
SESSION_EVENTS = 256
SESSION_BYTES = 256 * 1024
TOTAL_BYTES = 64 * 1024 * 1024
EVENT_OVERHEAD = 64
"""Bytes counted for an event besides its JSON (its id, its stream, the bookkeeping)."""


@dataclass
class _Usage:
    """The bytes a session holds, shared with the budget's finalizer (which must not hold the session)."""

    bytes: int = 0


@dataclass
class Budget:
    """Bytes held by every session's events together."""

    limit: int = TOTAL_BYTES
    used: int = 0

    def release(self, usage: _Usage) -> None:
        self.used -= usage.bytes
        usage.bytes = 0


@dataclass
class _Event:
    stream: StreamId
    message: JSONRPCMessage | None
    size: int


@dataclass
class SessionEvents:
    """One session's events, oldest first, within ``max_events``, ``max_bytes`` and the shared budget."""

    budget: Budget
    max_events: int = SESSION_EVENTS
    max_bytes: int = SESSION_BYTES
    _events: OrderedDict[int, _Event] = field(default_factory=OrderedDict)
    _tag: str = field(default_factory=lambda: secrets.token_hex(4))
    _next: int = 0
    _usage: _Usage = field(default_factory=_Usage)
    _evicted: int = 0
    """The newest event dropped for room: a stream followed from before it may have lost an event."""
    _stored: anyio.Event | None = None
    _closed: bool = False

    def __post_init__(self) -> None:
        weakref.finalize(self, self.budget.release, self._usage)

    @property
    def bytes(self) -> int:
        return self._usage.bytes

    def __len__(self) -> int:
        return len(self._events)

    def store(self, stream: StreamId, message: JSONRPCMessage | None) -> EventId:
        """Keep one event and name it. An event that fits in no bound is sent but not kept."""
        self._next += 1
        event_id = f"{self._tag}-{self._next}"
        size = EVENT_OVERHEAD + (0 if message is None else len(message.model_dump_json(by_alias=True)))
        if size > self.max_bytes:
            return event_id
        while self._events and (
            len(self._events) >= self.max_events
            or self.bytes + size > self.max_bytes
            or self.budget.used + size > self.budget.limit
        ):
            self._drop_oldest()
        if self.budget.used + size > self.budget.limit:
            return event_id  # the other sessions fill the budget: this event cannot be resumed
        self._events[self._next] = _Event(stream, message, size)
        self._usage.bytes += size
        self.budget.used += size
        self._wake()
        return event_id

    def holds(self, event_id: EventId) -> bool:
        return self._seq(event_id) in self._events

    async def replay_after(self, event_id: EventId, send: EventCallback) -> StreamId | None:
        """Send the events of ``event_id``'s stream that came after it; None when it is not held."""
        seq = self._seq(event_id)
        start = self._events.get(seq) if seq is not None else None
        if start is None or seq is None:
            return None
        later = [(n, e) for n, e in self._events.items() if n > seq and e.stream == start.stream]
        for n, event in later:
            if event.message is not None:  # a priming event only marks a place
                await send(EventMessage(event.message, f"{self._tag}-{n}"))
        return start.stream

    async def follow(self, event_id: EventId) -> AsyncGenerator[tuple[EventId, JSONRPCMessage]]:
        """``event_id``'s stream from after it: what is held, then each event as it is stored, until the
        stream's answer (a request's stream), the session's end, or an eviction that could leave a gap."""
        seq = self._seq(event_id)
        start = self._events.get(seq) if seq is not None else None
        if start is None or seq is None:
            return
        while not self._closed and self._evicted <= seq:
            later = [(n, e) for n, e in self._events.items() if n > seq and e.stream == start.stream]
            if not later:
                if self._stored is None:
                    self._stored = anyio.Event()
                await self._stored.wait()
                continue
            for n, event in later:
                seq = n
                if event.message is None:
                    continue
                yield f"{self._tag}-{n}", event.message
                if start.stream != GET_STREAM_KEY and isinstance(event.message, JSONRPCResponse | JSONRPCError):
                    return

    def clear(self) -> None:
        """The session ended: drop its events and end the streams that follow it."""
        self._events.clear()
        self.budget.release(self._usage)
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        if self._stored is not None:
            self._stored.set()
            self._stored = None

    def _drop_oldest(self) -> None:
        seq, event = self._events.popitem(last=False)
        self._usage.bytes -= event.size
        self.budget.used -= event.size
        self._evicted = seq

    def _seq(self, event_id: EventId) -> int | None:
        tag, _, number = event_id.partition("-")
        return int(number) if tag == self._tag and number.isdigit() else None


_current: ContextVar[SessionEvents | None] = ContextVar("maya_tools_session_events", default=None)


class StreamEvents(EventStore):
    """The SDK's event store, each call answered from the calling session's ``SessionEvents``."""

    def __init__(self, budget: Budget | None = None) -> None:
        self.budget = budget or Budget()
        self.sessions: weakref.WeakValueDictionary[str, SessionEvents] = weakref.WeakValueDictionary()

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        events = _current.get()
        if events is None:  # not reached through KeepSessionEvents: name the event, keep nothing
            events = SessionEvents(self.budget, max_events=0, max_bytes=0)
        return events.store(stream_id, message)

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        events = _current.get()
        return None if events is None else await events.replay_after(last_event_id, send_callback)


SESSION_HEADER = b"mcp-session-id"
LAST_EVENT_HEADER = b"last-event-id"


class KeepSessionEvents:
    """In front of the SDK's streamable HTTP app: give each request its session's ``SessionEvents``."""

    def __init__(self, app: ASGIApp, store: StreamEvents) -> None:
        self.app = app
        self.store = store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        session = _text(headers.get(SESSION_HEADER))
        events = self.store.sessions.get(session) if session is not None else None
        if session is None:
            events = SessionEvents(self.store.budget)  # the session this request may open
        last = _text(headers.get(LAST_EVENT_HEADER))
        if scope["method"] == "GET" and last is not None and events is not None and session is not None:
            if not events.holds(last):
                await _cannot_resume(send)
            else:
                await _resume(events, last, session, receive, send)
            return

        async def learn(message: Message) -> None:
            if message["type"] == "http.response.start":
                named = _text(dict(message.get("headers", [])).get(SESSION_HEADER))
                if session is None and named is not None and events is not None:
                    self.store.sessions[named] = events
                gone = message["status"] == 404 or (scope["method"] == "DELETE" and message["status"] == 200)
                if session is not None and gone:
                    dropped = self.store.sessions.pop(session, None)
                    if dropped is not None:
                        dropped.clear()
            await send(message)

        token = _current.set(events)
        try:
            await self.app(scope, receive, learn)
        finally:
            _current.reset(token)


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")


_CANNOT_RESUME = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "Last-Event-ID names no event this session still holds (it expired, was evicted or "
            "belongs to another session); send the request again",
        },
    }
).encode()


async def _cannot_resume(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(_CANNOT_RESUME)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": _CANNOT_RESUME})


async def _resume(events: SessionEvents, last: EventId, session: str, receive: Receive, send: Send) -> None:
    """Answer a ``GET`` with ``Last-Event-ID`` as an SSE stream of what followed it (``follow``)."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache, no-transform"),
                (b"x-accel-buffering", b"no"),
                (SESSION_HEADER, session.encode("latin-1")),
            ],
        }
    )
    async with anyio.create_task_group() as group:

        async def until_disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            group.cancel_scope.cancel()

        group.start_soon(until_disconnect)
        retry = f"retry: {RETRY_MS}\r\n"  # the first event says how long to wait before resuming again
        async with aclosing(events.follow(last)) as following:
            async for event_id, message in following:
                data = message.model_dump_json(by_alias=True, exclude_unset=True)
                frame = f"event: message\r\nid: {event_id}\r\n{retry}data: {data}\r\n\r\n"
                await send({"type": "http.response.body", "body": frame.encode(), "more_body": True})
                retry = ""
        group.cancel_scope.cancel()
    await send({"type": "http.response.body", "body": b"", "more_body": False})
