"""Resumable streams on protocol 2025-11-25, against a real ``maya-tools serve --transport streamable-http``
with a raw HTTP client that reads the SSE wire itself: every stream opens with a priming event that
has an ``id`` and a ``retry``; a stream dropped before its answer is resumed with ``Last-Event-ID``
and the missed events come again, then the rest live; an id the session does not hold is refused.
A resume is made again while it brings nothing new (``resumed_until_the_answer``): an answer that
reached no stream in 30 s fails the test, not hangs it."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from backend_client.tls import verifying_tls
from maya_tools.stream_events import RETRY_MS
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.test_transports import http_server

pytestmark = [pytest.mark.anyio, pytest.mark.http]

LEGACY = "2025-11-25"
SSE = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
def mcp_url(tmp_path: Path) -> Iterator[str]:
    with http_server(tmp_path) as url:
        yield url


def request(id_: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, **({"params": params} if params is not None else {})}


async def events(response: httpx2.Response) -> AsyncIterator[dict[str, str]]:
    """The SSE events of a response, each as its fields (``id``, ``retry``, ``event``, ``data``)."""
    event: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if event:
                yield event
            event = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            event[name] = value.removeprefix(" ")


SILENCE = 1.0
"""Seconds a resumed stream may stay silent before it is resumed again (see ``resumed_until_the_answer``)."""


async def resumed_until_the_answer(session: Session, last_event_id: str, id_: int) -> list[dict[str, str]]:
    """The message events after ``last_event_id`` up to the answer to request ``id_``, resumed again while
    the answer is not held yet. The SDK gives a stream resumed while the dropped one is still registered
    on the server what it has stored and then nothing (no live tail), so a resume that came before the
    answer was stored stays silent; it is resumed again, as a client would, until the answer comes. What
    is waited for is the server's state, not a clock: ``SILENCE`` only says when to ask again, and the
    30 s bound fails a server that never answers."""
    deadline = time.monotonic() + 30
    while True:
        received: list[dict[str, str]] = []
        try:
            async with session.stream(
                "GET", headers={"Last-Event-ID": last_event_id}, timeout=httpx2.Timeout(10, read=SILENCE)
            ) as resumed:
                received = await messages_until_the_answer(resumed, id_)
        except httpx2.ReadTimeout:
            pass
        if received and "method" not in (answer := json.loads(received[-1]["data"])) and answer.get("id") == id_:
            return received
        if time.monotonic() > deadline:
            raise AssertionError(f"no answer to request {id_} after Last-Event-ID {last_event_id} in 30 s")


async def messages_until_the_answer(response: httpx2.Response, id_: int) -> list[dict[str, str]]:
    """The message events of a resumed stream up to the answer to request ``id_``. The SDK primes the
    stream again (an event with an id, a ``retry`` and no data) after what it replays, so before the
    answer only when the answer had not been sent yet."""
    received = []
    async for event in events(response):
        if not event.get("data"):
            assert event["id"] and event["retry"] == str(RETRY_MS)
            continue
        received.append(event)
        message = json.loads(event["data"])
        if message.get("id") == id_ and "method" not in message:
            break
    return received


class Session:
    """A 2025-11-25 session opened by hand, its streams read event by event."""

    def __init__(self, http: httpx2.AsyncClient, url: str) -> None:
        self.http, self.url = http, url
        self.headers: dict[str, str] = {**SSE}

    async def open(self, capabilities: dict[str, Any]) -> dict[str, str]:
        """Initialize; the priming event of the initialize stream."""
        params = {"protocolVersion": LEGACY, "capabilities": capabilities, "clientInfo": {"name": "t", "version": "0"}}
        async with self.stream("POST", json=request(1, "initialize", params)) as response:
            self.headers.update({"Mcp-Session-Id": response.headers["mcp-session-id"], "Mcp-Protocol-Version": LEGACY})
            received = [event async for event in events(response)]
        notified = await self.http.post(
            self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers
        )
        assert notified.status_code == 202, notified.text
        return received[0]

    @asynccontextmanager
    async def stream(self, method: str, **kwargs: Any) -> AsyncIterator[httpx2.Response]:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        async with self.http.stream(method, self.url, headers=headers, **kwargs) as response:
            assert response.status_code == 200, (await response.aread()).decode()
            yield response


async def test_every_stream_opens_with_a_priming_event_that_has_an_id_and_a_retry(mcp_url: str) -> None:
    async with httpx2.AsyncClient(
        verify=verifying_tls(), headers={"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}, timeout=10
    ) as http:
        session = Session(http, mcp_url)
        primed = await session.open({})
        async with session.stream(
            "POST", json=request(2, "tools/call", {"name": "list_clusters", "arguments": {}})
        ) as r:
            received = [event async for event in events(r)]
    assert primed["id"] and primed["retry"] == str(RETRY_MS) and primed.get("data", "") == ""
    first, answer = received
    assert first["id"] and first["retry"] == str(RETRY_MS) and first.get("data", "") == ""
    assert answer["id"] != first["id"] and json.loads(answer["data"])["id"] == 2


async def test_a_dropped_stream_is_resumed_with_last_event_id_and_replays_what_was_missed(mcp_url: str) -> None:
    scale = {"name": "scale_node_pool", "arguments": {"cluster": "payments-prod", "pool": "workers", "count": 4}}
    async with httpx2.AsyncClient(
        verify=verifying_tls(), headers={"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}, timeout=10
    ) as http:
        session = Session(http, mcp_url)
        await session.open({"elicitation": {"form": {}}})
        async with session.stream("POST", json=request(2, "tools/call", scale)) as response:
            stream = events(response)
            primed = await anext(stream)
            asked = await anext(stream)  # the card, as an elicitation; then the connection drops
            await stream.aclose()
        question = json.loads(asked["data"])
        assert question["method"] == "elicitation/create"
        answered = await http.post(
            mcp_url,
            json={"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"approve": True}}},
            headers=session.headers,
        )
        assert answered.status_code == 202, answered.text
        # the result was never read: resume from the priming event, then from the question
        again, result = await resumed_until_the_answer(session, primed["id"], 2)
        [replayed] = await resumed_until_the_answer(session, asked["id"], 2)
        other = Session(http, mcp_url)
        await other.open({})
        foreign = await http.get(mcp_url, headers={**other.headers, "Last-Event-ID": primed["id"]})
        made_up = await http.get(mcp_url, headers={**session.headers, "Last-Event-ID": "nope-1"})
    assert (again["id"], again["data"]) == (asked["id"], asked["data"]), "the missed question comes again"
    outcome = json.loads(result["data"])
    assert outcome["id"] == 2 and outcome["result"]["structuredContent"]["status"] == "executed"
    assert (replayed["id"], replayed["data"]) == (result["id"], result["data"]), "the missed answer comes again"
    for refused in (foreign, made_up):
        assert refused.status_code == 400 and "Last-Event-ID" in refused.json()["error"]["message"]
