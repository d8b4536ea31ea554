"""Input that must be refused: a clear error naming the argument, and nothing stored or sent.

"Nothing stored or sent": the card store holds no card and Door recorded no operation and holds
the same pools as before the call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp_types import CallToolResult, TextContent

from backend_client.models import PublicNodePoolCreateRequest
from confirmation_cards import SqliteCardStore
from reference_backend.backend import ReferenceBackend
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_CLUSTER_ID, DEMO_ORGANISATION
from tests.conftest import auth
from tests.maya_tools.conftest import MODES, Person, operations

pytestmark = pytest.mark.anyio

MEGABYTE = "w" * 1_000_000


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def door_state(door: httpx2.AsyncClient) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    response = await door.get(f"/v1/public/clusters/{DEMO_CLUSTER_ID}/node-pools", headers=auth(DEMO_ADMIN_TOKEN))
    assert response.status_code == 200, response.text
    return response.json()["items"], await operations(door)


async def assert_nothing_stored_or_sent(
    card_store: Path, door: httpx2.AsyncClient, before: tuple[list[dict[str, Any]], list[dict[str, Any]]]
) -> None:
    assert await SqliteCardStore(card_store).list() == []
    assert await door_state(door) == before


# --- 1. arguments as strict as Door -----------------------------------------------------------

COERCIONS: list[tuple[str, dict[str, Any], str]] = [
    # tool, arguments, the argument the refusal must name
    ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": True}, "count"),
    ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": "4"}, "count"),
    ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 4.0}, "count"),
    ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "auto_scale": 1, "max_nodes": 5}, "auto_scale"),
    (
        "scale_node_pool",
        {"cluster": "payments-prod", "pool": "workers", "auto_scale": "true", "max_nodes": 5},
        "auto_scale",
    ),
    (
        "scale_node_pool",
        {"cluster": "payments-prod", "pool": "workers", "auto_scale": True, "min_nodes": 2.0, "max_nodes": 6},
        "min_nodes",
    ),
    (
        "scale_node_pool",
        {"cluster": "payments-prod", "pool": "workers", "auto_scale": True, "min_nodes": 2, "max_nodes": "6"},
        "max_nodes",
    ),
    ("add_node_pool", {"cluster": "payments-prod", "name": "batch", "size": "dks.m5.xlarge", "count": True}, "count"),
    (
        "add_node_pool",
        {"cluster": "payments-prod", "name": "batch", "size": "dks.m5.xlarge", "auto_scale": 0, "count": 1},
        "auto_scale",
    ),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("tool", "arguments", "named"), COERCIONS, ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(COERCIONS)]
)
async def test_a_coerced_argument_is_refused_naming_it_and_nothing_is_stored_or_sent(
    connect: Callable[..., Client],
    door: httpx2.AsyncClient,
    card_store: Path,
    mode: str,
    tool: str,
    arguments: dict[str, Any],
    named: str,
) -> None:
    """Door answers 422 to `"count": true` or `"4"`; the tool must not turn them into a card for 1 or 4."""
    before = await door_state(door)
    person = Person("accept")
    async with connect(mode, person) as client:
        result = await client.call_tool(tool, arguments)
    said = text_of(result)
    assert result.is_error, said
    assert f"`{named}`" in said and "invalid arguments, so nothing was done" in said
    assert person.messages == []
    await assert_nothing_stored_or_sent(card_store, door, before)


READ_COERCIONS: list[tuple[str, dict[str, Any], str]] = [
    ("list_nodes", {"cluster": "payments-prod", "limit": "5"}, "limit"),
    ("list_nodes", {"cluster": "payments-prod", "offset": True}, "offset"),
    ("list_nodes", {"cluster": "payments-prod", "wait_for_fresh": 1}, "wait_for_fresh"),
    ("get_cluster_operations", {"cluster": "payments-prod", "timeout_seconds": "10"}, "timeout_seconds"),
    ("get_cluster_operations", {"cluster": "payments-prod", "timeout_seconds": True}, "timeout_seconds"),
]


@pytest.mark.parametrize(("tool", "arguments", "named"), READ_COERCIONS, ids=[f"{c[0]}-{c[2]}" for c in READ_COERCIONS])
async def test_read_tools_refuse_coerced_numbers_and_flags_naming_them(
    connect: Callable[..., Client], tool: str, arguments: dict[str, Any], named: str
) -> None:
    async with connect("legacy") as client:
        result = await client.call_tool(tool, arguments)
    said = text_of(result)
    assert result.is_error and f"`{named}`" in said, said


# --- 2. sizes bounded -------------------------------------------------------------------------

HUGE: list[tuple[str, dict[str, Any], str]] = [
    ("get_card", {"card_id": "card_" + "x" * 10_000_000}, "card_id"),
    ("get_cluster", {"cluster": MEGABYTE}, "cluster"),
    ("list_clusters", {"name": MEGABYTE}, "name"),
    ("list_node_pools", {"cluster": MEGABYTE}, "cluster"),
    ("list_nodes", {"cluster": "payments-prod", "pool": MEGABYTE}, "pool"),
    ("get_cluster_operations", {"cluster": "payments-prod", "follow": MEGABYTE}, "follow"),
    ("scale_node_pool", {"cluster": "payments-prod", "pool": MEGABYTE, "count": 3}, "pool"),
    ("scale_node_pool", {"cluster": MEGABYTE, "pool": "workers", "count": 3}, "cluster"),
    ("add_node_pool", {"cluster": "payments-prod", "name": MEGABYTE, "size": "dks.m5.xlarge"}, "name"),
    ("add_node_pool", {"cluster": "payments-prod", "name": "batch", "size": MEGABYTE}, "size"),
    ("relabel_node_pool", {"cluster": "payments-prod", "pool": MEGABYTE, "labels": {}}, "pool"),
    ("relabel_node_pool", {"cluster": "payments-prod", "pool": "workers", "labels": {MEGABYTE: "x"}}, "labels"),
    ("relabel_node_pool", {"cluster": "payments-prod", "pool": "workers", "tags": {"team": MEGABYTE}}, "tags.team"),
    (
        "relabel_node_pool",
        {"cluster": "payments-prod", "pool": "workers", "labels": {f"k{i}": "v" for i in range(65)}},
        "labels",
    ),
    ("remove_node_pool", {"cluster": "payments-prod", "pool": MEGABYTE}, "pool"),
    ("replace_node", {"cluster": "payments-prod", "node_name": MEGABYTE}, "node_name"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("tool", "arguments", "named"), HUGE, ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(HUGE)])
async def test_a_huge_argument_gets_a_short_error_naming_it_and_no_huge_log_line(
    connect: Callable[..., Client],
    door: httpx2.AsyncClient,
    card_store: Path,
    caplog: pytest.LogCaptureFixture,
    mode: str,
    tool: str,
    arguments: dict[str, Any],
    named: str,
) -> None:
    """A megabyte name is refused in a few hundred bytes that name the argument and what to do: not echoed
    whole, not a bare "Error executing tool", and no log line carries it."""
    caplog.set_level(logging.DEBUG)
    before = await door_state(door)
    async with connect(mode, Person("accept")) as client:
        result = await client.call_tool(tool, arguments)
    said = text_of(result)
    assert result.is_error
    assert len(said.encode()) < 600, said[:1000]
    assert f"`{named}" in said and "call it again" in said, said
    assert max(len(run) for run in said.split()) <= 80, said
    for record in caplog.records:
        assert len(caplog.handler.format(record)) < 2_000, caplog.handler.format(record)[:500]
    await assert_nothing_stored_or_sent(card_store, door, before)


TOO_LONG_FOR_DOOR: list[tuple[str, dict[str, Any], str]] = [
    # Below the generous argument bound the rule Door would name still speaks, echoing only ~80 characters.
    ("add_node_pool", {"cluster": "payments-prod", "name": "a" * 900, "size": "dks.m5.xlarge"}, "R-ADD-01"),
    ("scale_node_pool", {"cluster": "payments-prod", "pool": "a" * 900, "count": 3}, "R-PATCH-07"),
    ("replace_node", {"cluster": "payments-prod", "node_name": "a" * 900}, "R-RNODE-03"),
    ("get_cluster_operations", {"cluster": "payments-prod", "follow": "a" * 900}, "No operation"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("tool", "arguments", "rule"), TOO_LONG_FOR_DOOR, ids=[c[2] for c in TOO_LONG_FOR_DOOR])
async def test_a_name_too_long_for_door_is_refused_by_its_rule_echoing_only_80_characters(
    connect: Callable[..., Client],
    door: httpx2.AsyncClient,
    card_store: Path,
    caplog: pytest.LogCaptureFixture,
    mode: str,
    tool: str,
    arguments: dict[str, Any],
    rule: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    before = await door_state(door)
    async with connect(mode, Person("accept")) as client:
        result = await client.call_tool(tool, arguments)
    said = text_of(result)
    assert result.is_error and rule in said, said
    assert "a" * 81 not in said and len(said) < 800, said
    assert all("a" * 81 not in caplog.handler.format(record) for record in caplog.records)
    await assert_nothing_stored_or_sent(card_store, door, before)


def _wide(i: int, n: int) -> str:
    """A string of exactly ``n`` characters that escapes badly: Markdown and HTML specials, non-ASCII."""
    return (f"{i:03d}&<>*_`[é😀" * n)[:n]


@pytest.mark.parametrize("mode", MODES)
async def test_the_card_a_person_reads_stays_under_8_kb_for_64_labels_of_the_largest_size(
    connect: Callable[..., Client], door: httpx2.AsyncClient, mode: str
) -> None:
    labels = {_wide(i, 253): _wide(i, 253) for i in range(64)}
    person = Person("decline")
    async with connect(mode, person) as client:
        result = await client.call_tool(
            "relabel_node_pool", {"cluster": "payments-prod", "pool": "workers", "labels": labels, "tags": labels}
        )
    data = result.structured_content
    assert data is not None and data["status"] == "declined", text_of(result)[:500]
    assert data["card"]["body"]["labels"] == labels  # the card binds the exact body, shown abridged
    [message] = person.messages
    assert len(message.encode()) <= 8_000
    assert "cut here" not in message  # the renderer abridged it; the last bound in question() was not needed
    assert "64 entries" in message
    assert "Approve this change?" in message


@pytest.mark.parametrize("mode", MODES)
async def test_the_card_stays_under_8_kb_when_the_pool_already_carries_500_labels(
    backend: ReferenceBackend, connect: Callable[..., Client], mode: str
) -> None:
    crowded = {f"{i:03d}" + "&" * 60: "&" * 200 for i in range(500)}  # every "&" is shown as "&amp;"
    backend.install_cluster(
        name="crowded",
        organisation=DEMO_ORGANISATION,
        pools=[
            PublicNodePoolCreateRequest(name="busy", size="dks.c5.large", count=1, labels=crowded, tags=crowded),
            PublicNodePoolCreateRequest(name="spare", size="dks.c5.large", count=1),
        ],
    )
    person = Person("decline")
    async with connect(mode, person) as client:
        relabel = await client.call_tool(
            "relabel_node_pool", {"cluster": "crowded", "pool": "busy", "labels": {}, "tags": {}}
        )
        scale = await client.call_tool("scale_node_pool", {"cluster": "crowded", "pool": "busy", "count": 2})
    for result in (relabel, scale):
        assert not result.is_error, text_of(result)[:500]
    assert len(person.messages) == 2
    for message in person.messages:
        assert len(message.encode()) <= 8_000, len(message.encode())
        assert "cut here" not in message  # the renderer abridged it; the last bound in question() was not needed
    assert "500 entries" in person.messages[0]
