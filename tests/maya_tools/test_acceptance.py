"""What an IDE user met when driving the server with wrong, empty or unsupported requests: every
refusal says which argument is wrong and what to do, in words, and nothing is changed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from mcp import Client, MCPError

from maya_tools.server import build_server
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from tests.maya_tools.conftest import MODES, Person, operations

pytestmark = pytest.mark.anyio

SCALE = ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3})


def text_of(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("tool", "arguments", "named"),
    [
        ("list_nodes", {"cluster": "payments-prod", "limit": 0}, "`limit`"),
        ("get_cluster", {}, "`cluster` is required"),
        ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": "three"}, "`count`"),
        ("relabel_node_pool", {"cluster": "payments-prod", "pool": "workers", "labels": {"team": 5}}, "`labels.team`"),
    ],
)
async def test_wrong_arguments_are_named_in_words_without_pydantic_internals(
    connect: Callable[..., Client], mode: str, tool: str, arguments: dict[str, Any], named: str
) -> None:
    async with connect(mode, Person("accept")) as client:
        result = await client.call_tool(tool, arguments)
    said = text_of(result)
    assert result.is_error
    assert named in said and "nothing was done" in said and "call it again" in said
    for internal in ("errors.pydantic.dev", "Arguments\n", f"{tool}Arguments", "validation error for", "[type="):
        assert internal not in said, said


async def test_a_huge_wrong_map_is_summarised_not_echoed(connect: Callable[..., Client]) -> None:
    tags = {f"key{i}": i for i in range(1000)}
    async with connect("legacy", Person("accept")) as client:
        result = await client.call_tool(
            "add_node_pool", {"cluster": "payments-prod", "name": "batch", "size": "dks.m5.xlarge", "tags": tags}
        )
    said = text_of(result)
    assert result.is_error and "`tags.key0`" in said and "and 995 more" in said
    assert len(said) < 1000


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("get_cluster", {"cluster": ""}),
        ("list_nodes", {"cluster": "payments-prod", "pool": ""}),
        ("scale_node_pool", {"cluster": "payments-prod", "pool": "", "count": 3}),
    ],
)
async def test_an_empty_cluster_or_pool_is_refused_as_an_argument_not_as_a_door_redirect(
    connect: Callable[..., Client], door: httpx2.AsyncClient, mode: str, tool: str, arguments: dict[str, Any]
) -> None:
    before = await operations(door)
    async with connect(mode, Person("accept")) as client:
        result = await client.call_tool(tool, arguments)
    said = text_of(result)
    assert result.is_error and "at least 1 character" in said, said
    assert "Redirect" not in said and "no such route" not in said
    assert await operations(door) == before


@pytest.mark.parametrize("mode", MODES)
async def test_a_change_tool_on_a_read_only_server_says_the_server_is_read_only(
    backend: ReferenceBackend, mode: str
) -> None:
    server = build_server(Settings(card_store=":memory:", read_only=True), backend=backend)
    async with Client(server, mode=mode, elicitation_callback=Person("accept")) as client:
        result = await client.call_tool(*SCALE)
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("no_such_tool", {})
    said = text_of(result)
    assert result.is_error and "read-only" in said and "nothing was changed" in said
    assert "Unknown tool" not in said


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_card_says_cancelled(connect: Callable[..., Client], mode: str) -> None:
    async with connect(mode, Person("cancel")) as client:
        result = await client.call_tool(*SCALE)
    data = result.structured_content
    assert data is not None and data["status"] == "declined" and data["changed"] is False
    assert data["message"].startswith("Cancelled"), data["message"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_without_elicitation_reads_the_expiry_as_the_card_shows_it(
    connect: Callable[..., Client], mode: str
) -> None:
    async with connect(mode, None) as client:
        result = await client.call_tool(*SCALE)
    data = result.structured_content
    assert data is not None and data["status"] == "pending"
    expires = data["card"]["expires_at"]  # ISO in the structured card; words in the message
    shown = expires[:10] + " " + expires[11:19] + " UTC"
    assert f"expire unapproved at {shown}." in data["message"], data["message"]
