"""Tokens never appear in a tool result, a card, a log line or an audit row (DESIGN.md property 7)."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from maya_tools.server import build_server
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN, DEMO_NODE_NAME, DEMO_OUTSIDER_TOKEN
from tests.maya_tools.conftest import Person

pytestmark = pytest.mark.anyio

TOKENS = (DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN, DEMO_OUTSIDER_TOKEN)


async def test_no_token_in_results_cards_logs_or_audit(
    connect: Callable[..., Client],
    door: httpx2.AsyncClient,
    clock: ManualClock,
    card_store: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []
    person = Person("accept")
    async with connect("auto", person) as client:
        calls = [
            ("list_clusters", {}),
            ("get_cluster", {"cluster": "payments-prod"}),
            ("list_nodes", {"cluster": "payments-prod"}),
            ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3}),
            ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 0}),
            ("replace_node", {"cluster": "payments-prod", "node_name": DEMO_NODE_NAME}),
            ("get_cluster_operations", {"cluster": "payments-prod"}),
        ]
        for tool, arguments in calls:
            result = await client.call_tool(tool, arguments)
            seen.append(result.model_dump_json())
            if result.structured_content and "card" in result.structured_content:
                card_id = result.structured_content["card"]["id"]
                shown = await client.call_tool("get_card", {"card_id": card_id})
                seen.append(shown.model_dump_json())
    seen += person.messages
    seen += [record.getMessage() for record in caplog.records]
    with sqlite3.connect(card_store) as db:
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'"):
            seen += [repr(row) for row in db.execute(f"SELECT * FROM {table}")]
    assert len(seen) > len(calls)
    everything = "\n".join(seen)
    for token in TOKENS:
        assert token not in everything
    assert "Bearer" not in everything


async def test_a_door_refusal_that_echoes_the_token_reaches_no_result_card_log_or_audit(
    backend: ReferenceBackend,
    card_store: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A proxy or a buggy Door repeating the request's headers in its error body must not leak the token."""
    import reference_backend.app

    create_app = reference_backend.app.create_app

    def echoing_app(world: ReferenceBackend, **kwargs: Any) -> ASGIApp:
        app = create_app(world, **kwargs)

        async def echo(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or scope["method"] != "PATCH":
                await app(scope, receive, send)
                return
            sent = await _body(receive)
            if sent != b"{}":  # the approved change, not the role probe (an empty patch)
                headers = dict(scope.get("headers", []))
                said = headers.get(b"authorization", b"").decode()
                body = json.dumps(
                    {"type": "about:blank", "title": f"Conflict for {said}", "status": 409, "detail": f"echo: {said}"}
                ).encode()
                await send({"type": "http.response.start", "status": 409, "headers": [(b"content-type", PROBLEM)]})
                await send({"type": "http.response.body", "body": body})
                return
            await app(scope, _replay(receive, sent), send)

        return echo

    monkeypatch.setattr(reference_backend.app, "create_app", echoing_app)
    caplog.set_level(logging.DEBUG)
    person = Person("accept")
    server = build_server(Settings(card_store=str(card_store), door_token=DEMO_ADMIN_TOKEN), backend=backend)
    async with Client(server, mode="legacy", elicitation_callback=person) as client:
        result = await client.call_tool("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3})
        data = result.structured_content
        assert data is not None and data["status"] == "failed", result.content
        assert "[redacted]" in data["message"]  # Door's echo arrived, without the token
        shown = await client.call_tool("get_card", {"card_id": data["card"]["id"]})
    seen = [result.model_dump_json(), shown.model_dump_json(), *person.messages]
    seen += [record.getMessage() for record in caplog.records]
    with sqlite3.connect(card_store) as db:
        seen += [repr(row) for table in ("cards", "audit") for row in db.execute(f"SELECT * FROM {table}")]
    everything = "\n".join(seen)
    assert DEMO_ADMIN_TOKEN not in everything


PROBLEM = b"application/problem+json"


async def _body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(receive: Receive, body: bytes) -> Receive:
    """A receive that hands the already-read body to the app once more."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
