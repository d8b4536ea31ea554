"""The MCP prompts through the SDK Client: listed with their arguments, rendered with the given ones."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, TextContent

import prompts
from maya_tools.server import INSTRUCTIONS, build_server
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from tests.maya_tools.conftest import MODES

pytestmark = pytest.mark.anyio

EXAMPLES: dict[str, dict[str, str]] = {
    "scale_pool": {"cluster": "payments-prod", "pool": "workers", "count": "4"},
    "add_pool": {"cluster": "payments-prod", "name": "batch", "size": "dks.m5.xlarge", "count": "1"},
    "replace_node": {"cluster": "payments-prod", "node_name": "payments-prod-workers-abc12"},
    "change_pool_tier": {"cluster": "payments-prod", "pool": "workers", "new_size": "dks.c5.2xlarge"},
    "explain_capacity": {"cluster": "payments-prod"},
}


def test_every_prompt_has_an_example() -> None:
    assert set(EXAMPLES) == {spec.name for spec in prompts.MCP_PROMPTS}


@pytest.mark.parametrize("mode", MODES)
async def test_prompts_list_shows_every_prompt_with_described_arguments(server: Any, mode: str) -> None:
    async with Client(server, mode=mode) as client:
        listing = await client.list_prompts()
    listed = {p.name: p for p in listing.prompts}
    assert set(listed) == set(EXAMPLES)
    for spec in prompts.MCP_PROMPTS:
        prompt = listed[spec.name]
        assert prompt.title == spec.title
        assert prompt.description == spec.description
        assert [(a.name, a.description, a.required) for a in prompt.arguments or []] == [
            (a.name, a.description, a.required) for a in spec.arguments
        ]
    scale = {a.name: a for a in listed["scale_pool"].arguments or []}
    assert list(scale) == ["cluster", "pool", "count"]
    assert all(a.required for a in scale.values())
    assert scale["count"].description is not None and "0–200" in scale["count"].description


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(EXAMPLES))
async def test_prompts_get_renders_one_user_message_with_the_arguments(server: Any, mode: str, name: str) -> None:
    async with Client(server, mode=mode) as client:
        result = await client.get_prompt(name, EXAMPLES[name])
    assert len(result.messages) == 1
    message = result.messages[0]
    assert message.role == "user"
    assert isinstance(message.content, TextContent)
    assert message.content.text == prompts.render_mcp_prompt(name, EXAMPLES[name])
    assert "`payments-prod`" in message.content.text


@pytest.mark.parametrize("mode", MODES)
async def test_scale_pool_prompt_carries_the_count_and_the_approval_rules(server: Any, mode: str) -> None:
    async with Client(server, mode=mode) as client:
        result = await client.get_prompt("scale_pool", EXAMPLES["scale_pool"])
    text = result.messages[0].content.text  # type: ignore[union-attr]
    assert "`scale_node_pool` with cluster `payments-prod`, pool `workers` and `count: 4`" in text
    assert "`changed: true`" in text
    assert 'never ask the person to\n  type "yes"' in text


@pytest.mark.parametrize("mode", MODES)
async def test_a_bad_argument_is_invalid_params_with_the_reason(server: Any, mode: str) -> None:
    async with Client(server, mode=mode) as client:
        with pytest.raises(MCPError) as raised:
            await client.get_prompt("scale_pool", {"cluster": "payments-prod", "pool": "workers", "count": "999"})
    assert raised.value.code == INVALID_PARAMS
    assert "between 0 and 200" in raised.value.message


@pytest.mark.parametrize("mode", MODES)
async def test_a_missing_argument_is_an_error(server: Any, mode: str) -> None:
    async with Client(server, mode=mode) as client:
        with pytest.raises(MCPError):
            await client.get_prompt("scale_pool", {"cluster": "payments-prod"})


async def test_read_only_mode_still_offers_the_prompts(backend: ReferenceBackend) -> None:
    server = build_server(Settings(card_store=":memory:", read_only=True), backend=backend)
    async with Client(server, mode="legacy") as client:
        listing = await client.list_prompts()
    assert {p.name for p in listing.prompts} == set(EXAMPLES)


async def test_server_instructions_come_from_the_template(server: Any) -> None:
    assert prompts.render("instructions.md.j2") == INSTRUCTIONS
    async with Client(server, mode="legacy") as client:
        assert client.instructions == INSTRUCTIONS
