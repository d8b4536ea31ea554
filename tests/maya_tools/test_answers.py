"""What a person reads at a glance: each tool's text content, the form message, a cold node list.

The text content is a short summary (the structured content carries the data); the form message
fits a plain form renderer in 900 characters whatever Door's names hold, every warning whole; and ``list_nodes`` never
counts the empty items of a cold snapshot (R-NODE-03) as zero workers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from mcp import Client
from mcp_types import CallToolResult, TextContent
from starlette.types import ASGIApp, Receive, Scope, Send

from backend_client.models import PublicNodePoolCreateRequest
from maya_tools.server import build_server
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from reference_backend.seed import DEMO_NODE_NAME, DEMO_ORGANISATION
from tests.maya_tools.conftest import MODES, Person

pytestmark = pytest.mark.anyio

FORM_MAX = 900


def text_of(result: CallToolResult) -> str:
    assert not result.is_error, result.content
    [block] = result.content
    assert isinstance(block, TextContent)
    return block.text


def is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _wide(i: int, n: int) -> str:
    """``n`` characters that escape badly: Markdown and HTML specials, non-ASCII, an emoji."""
    return (f"{i:03d}&<>*_`[é😀" * n)[:n]


HOSTILE_CLUSTER = ("&<*_`[" * 50)[:200]
POOL = "a" * 63
OTHER = "b" * 63


def _hostile(backend: ReferenceBackend) -> tuple[str, str]:
    """A cluster whose name escapes to five times its length, a pool of 64 labels and 64 tags of the
    largest size, and a cluster with long plain names whose workers have valid node names."""
    backend.set_credit(DEMO_ORGANISATION, 1e9)
    labels = {_wide(i, 253): _wide(i, 253) for i in range(64)}
    hostile = backend.install_cluster(
        name=HOSTILE_CLUSTER,
        organisation=DEMO_ORGANISATION,
        pools=[
            PublicNodePoolCreateRequest(name=POOL, size="dks.c5.large", count=3, labels=labels, tags=labels),
            PublicNodePoolCreateRequest(name=OTHER, size="dks.c5.large", count=1),
        ],
    )
    long = backend.install_cluster(
        name="n" * 60,
        organisation=DEMO_ORGANISATION,
        pools=[
            PublicNodePoolCreateRequest(name=POOL, size="dks.c5.large", count=1, labels=labels),
            PublicNodePoolCreateRequest(name=OTHER, size="dks.c5.large", count=1),
        ],
    )
    return hostile.id, long.id


@pytest.mark.parametrize("mode", MODES)
async def test_the_form_message_of_every_action_fits_900_characters_of_plain_text_with_hostile_names(
    backend: ReferenceBackend, connect: Callable[..., Client], mode: str
) -> None:
    hostile, long = _hostile(backend)
    labels = {_wide(i, 253): _wide(i, 253) for i in range(64)}
    person = Person("decline")
    async with connect(mode, person) as client:
        nodes = await client.call_tool("list_nodes", {"cluster": long, "pool": POOL})
        node = (nodes.structured_content or {})["items"][0]["name"]
        calls: list[tuple[str, dict[str, Any]]] = [
            ("add_node_pool", {"cluster": hostile, "name": "c" * 63, "size": "dks.r5.xlarge", "count": 200, "labels": labels, "tags": labels}),
            ("scale_node_pool", {"cluster": hostile, "pool": POOL, "count": 1}),
            ("scale_node_pool", {"cluster": hostile, "pool": POOL, "auto_scale": True, "min_nodes": 1, "max_nodes": 3}),
            ("relabel_node_pool", {"cluster": hostile, "pool": POOL, "labels": labels, "tags": {}}),
            ("remove_node_pool", {"cluster": hostile, "pool": POOL}),
            ("replace_node", {"cluster": long, "node_name": node}),
        ]  # fmt: skip
        results = [await client.call_tool(tool, arguments) for tool, arguments in calls]
    assert len(person.messages) == len(calls), [text_of(r) for r in results]
    for (tool, _), result, message in zip(calls, results, person.messages, strict=True):
        data = result.structured_content
        assert data is not None and data["status"] == "declined", tool
        assert len(message) <= FORM_MAX, (tool, len(message), message)
        assert data["card"]["id"] in message, tool  # a person can look the card up
        assert "```" not in message and "{\n" not in message, tool  # plain text, no request body
        assert message.endswith("Tick approve and accept to run it once."), tool
        for warning in data["card"]["warnings"]:  # every warning whole, none counted
            assert f"! {warning['message']}" in message.replace("\\_", "_"), (tool, warning)
        assert "warnings (" not in message and "more warning" not in message, tool
        assert "<" not in message and "&<" not in message, tool  # Door's strings are escaped
    scale_down = person.messages[1]
    assert "count: 3 -> 1" in scale_down and "Capacity:" in scale_down and "Price per hour:" in scale_down
    assert "! going from 3 to 1 drains and removes 2 workers" in scale_down


@pytest.mark.parametrize("mode", MODES)
async def test_the_form_message_says_what_changes_where_the_capacity_price_and_warnings(
    connect: Callable[..., Client], mode: str
) -> None:
    person = Person("decline")
    async with connect(mode, person) as client:
        result = await client.call_tool("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 4})
    [message] = person.messages
    card = (result.structured_content or {})["card"]
    lines = message.split("\n")
    assert lines[0] == "Scale node pool “workers” on cluster “payments-prod”"
    assert "  count: 2 -> 4" in lines
    assert "Capacity: 8 -> 16 vCPU, 16 -> 32 GiB RAM, 160 -> 320 GiB disk" in lines
    assert "Price per hour: 0.34 -> 0.68" in lines
    credit = "! this adds 0.34 per hour; Door refuses it with 402 unless prepaid credit covers 24 h of it: 8.16 [R-CREDIT-01]"
    assert credit in lines
    assert "! needs the super_admin role: Door refuses a member with 403 [R-AUTH-03]" in lines
    assert f"Card {card['id']}, expires" in message and "; get_card shows it whole" in message  # there is room
    assert card["body_digest"] not in message and "/v1/public" not in message  # they stay in the card


@pytest.mark.parametrize("mode", MODES)
async def test_every_tool_answers_in_a_few_lines_and_the_data_is_in_structured_content(
    connect: Callable[..., Client], mode: str
) -> None:
    calls: list[tuple[str, dict[str, Any], list[str]]] = [
        ("list_clusters", {}, ["2 clusters", "- payments-prod: Provisioned, 1 pool, 8 vCPU / 16 GiB planned"]),
        ("get_cluster", {"cluster": "payments-prod"}, ["Cluster payments-prod", "- workers: dks.c5.xlarge × 2"]),
        ("list_node_pools", {"cluster": "payments-prod"}, ["- workers: dks.c5.xlarge × 2"]),
        ("list_nodes", {"cluster": "payments-prod"}, ["payments-prod: 2 workers (2 Running); snapshot fresh."]),
        ("list_machine_tiers", {}, ["- dks.c5.xlarge: 4 vCPU, 8 GiB, 80 GiB disk, 0.17/h"]),
        ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3}, ["executed: Door applied the change.", "Operation "]),
        ("get_cluster_operations", {"cluster": "payments-prod"}, ["payments-prod is Provisioned; 1 operation running.", "- pool.update workers: running"]),
    ]  # fmt: skip
    async with connect(mode, Person("accept")) as client:
        answers = [(tool, await client.call_tool(tool, arguments), said) for tool, arguments, said in calls]
        card_id = (answers[5][1].structured_content or {})["card"]["id"]
        card = await client.call_tool("get_card", {"card_id": card_id})
    answers.append(
        ("get_card", card, [f"Card {card_id}: Scale node pool “workers”", "executed", "body digest (sha256)"])
    )
    for tool, result, said in answers:
        text = text_of(result)
        assert result.structured_content, tool  # the data, as the output schema says
        assert not is_json(text) and not text.lstrip().startswith("{"), (tool, text)
        assert len(text.splitlines()) <= 16 and len(text) <= 1_500, (tool, text)
        for words in said:
            assert words in text, (tool, words, text)
    operation = (answers[5][1].structured_content or {})["operation_id"]
    assert f"Operation {operation}." in text_of(answers[5][1])


@pytest.mark.parametrize("mode", MODES)
async def test_paging_is_said_in_words(backend: ReferenceBackend, connect: Callable[..., Client], mode: str) -> None:
    backend.install_cluster(
        name="wide",
        organisation=DEMO_ORGANISATION,
        pools=[PublicNodePoolCreateRequest(name=f"p{i}", size="dks.c5.large", count=2) for i in range(30)],
    )
    async with connect(mode) as client:
        pools = text_of(await client.call_tool("list_node_pools", {"cluster": "wide", "limit": 10}))
        nodes = text_of(await client.call_tool("list_nodes", {"cluster": "wide", "offset": 50, "limit": 5}))
    assert "showing 10 of 30; ask with offset 10 for more" in pools
    assert "Showing 51–55 of 60; ask with offset 55 for more." in nodes


# --- list_nodes on a cold snapshot (R-NODE-03) ------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_cold_snapshot_is_waited_for_and_the_real_list_is_answered(
    backend: ReferenceBackend, connect: Callable[..., Client], mode: str
) -> None:
    """The first read is cold (no items); the refresh it queued lands 2 s later on Door's clock,
    within the wait, so the answer is the real list and never "0 workers"."""
    async with connect(mode) as client:
        result = await client.call_tool("list_nodes", {"cluster": "payments-prod"})
    text = text_of(result)
    data = result.structured_content
    assert data is not None and data["cold"] is False and data["total"] == 2, data
    assert [n["name"] for n in data["items"]][:1] == [DEMO_NODE_NAME]
    assert text.startswith("payments-prod: 2 workers (2 Running)") and "0 workers" not in text


def _refreshes_never_land(create_app: Callable[..., ASGIApp]) -> Callable[..., ASGIApp]:
    """A Door whose inventory refreshes keep failing: before each node read, the refresh due by
    then is dropped (the reference backend drops a refresh due while its inventory is down)."""

    def make(world: ReferenceBackend, **kwargs: Any) -> ASGIApp:
        app = create_app(world, **kwargs)

        async def failing_refreshes(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and re.search(r"/nodes$", scope["path"]):
                world.set_inventory(False)
                world.now()  # the refresh due by now is dropped
                world.set_inventory(True)
            await app(scope, receive, send)

        return failing_refreshes

    return make


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wait_for_fresh", [False, True])
async def test_a_snapshot_still_cold_after_the_wait_is_not_known_yet_never_zero_workers(
    backend: ReferenceBackend, settings: Settings, monkeypatch: pytest.MonkeyPatch, mode: str, wait_for_fresh: bool
) -> None:
    import reference_backend.app

    monkeypatch.setattr(reference_backend.app, "create_app", _refreshes_never_land(reference_backend.app.create_app))
    before = backend.now()
    server = build_server(settings, backend=backend)
    async with Client(server, mode=mode) as client:
        result = await client.call_tool("list_nodes", {"cluster": "payments-prod", "wait_for_fresh": wait_for_fresh})
    text = text_of(result)
    data = result.structured_content
    assert data is not None and data["cold"] is True
    assert data["total"] is None and data["items"] == [] and data["summary"] == []  # unknown, not zero
    assert "not known yet" in text and "Ask again in a few seconds" in text, text
    assert not re.search(r"\b0 workers?\b", text) and not re.search(r"\b0 workers?\b", json.dumps(data))
    waited = (backend.now() - before).total_seconds()
    assert waited >= (30 if wait_for_fresh else 5), "it waited for the refresh, on Door's clock"
    assert f"after {30 if wait_for_fresh else 5} s of waiting" in text
