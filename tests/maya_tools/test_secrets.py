"""Tokens never appear in a tool result, a card, a log line or an audit row (DESIGN.md property 7)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest
from mcp import Client

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
