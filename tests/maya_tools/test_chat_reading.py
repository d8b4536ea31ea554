"""The offline chat reads requests against what the server lists (issue 22), through the real chat:
the world comes from list_clusters / list_node_pools / list_nodes / list_machine_tiers, a relative
change is said back as "from → to" before its card, and a question or an unlisted node never
makes a card. Both protocol generations."""

from __future__ import annotations

import io
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from maya_tools.chat.app import open_session, repl
from maya_tools.chat.offline import read_world
from maya_tools.chat.terminal import ApprovalPrompt, Terminal
from tests.maya_tools.conftest import MODES, operations
from tests.maya_tools.test_chat import person

pytestmark = pytest.mark.anyio


async def chat(server: MCPServer[Any], mode: str, *lines: str) -> tuple[str, ApprovalPrompt]:
    out = io.StringIO()
    terminal = Terminal(person(*lines), out)
    approval = ApprovalPrompt(terminal)
    async with Client(server, mode=mode, elicitation_callback=approval) as client:
        session = await open_session(client, terminal, anthropic_client=None, model="unused")
        with anyio.fail_after(30):
            await repl(terminal, session)
    return out.getvalue(), approval


@pytest.mark.parametrize("mode", MODES)
async def test_a_relative_change_is_said_back_from_to_before_its_card(
    server: MCPServer[Any], door: httpx2.AsyncClient, mode: str
) -> None:
    shown, approval = await chat(
        server, mode, "add 3 more nodes to workers on payments-prod", "y", "double workers", "n"
    )
    first = shown.index("maya › workers: 2 → 5")
    assert first < shown.index('→ scale_node_pool(cluster="payments-prod", pool="workers", count=5)')
    assert first < shown.index("│ ")  # the card
    assert "What changed: count 2 → 5" in shown
    # the next relative change is read against the count the server lists after the first one
    assert "maya › workers: 5 → 10" in shown
    assert approval.answers[0] == "accept"  # the second may be refused while the first runs (R-PHASE-01)


@pytest.mark.parametrize("mode", MODES)
async def test_an_absolute_count_is_not_said_back_and_a_question_makes_no_card(
    server: MCPServer[Any], door: httpx2.AsyncClient, mode: str
) -> None:
    before = await operations(door)
    shown, approval = await chat(
        server,
        mode,
        "is workers at 4?",
        "is node payments-prod-workers-abc12 ready?",
        "replace node payments-prod-workers-zzz99",
    )
    assert "→ workers:" not in shown and approval.answers == []
    assert '→ list_node_pools(cluster="payments-prod", pool="workers")' in shown
    assert '→ list_nodes(cluster="payments-prod")' in shown
    assert "There is no node payments-prod-workers-zzz99 on payments-prod (R-RNODE-04)" in shown
    assert "payments-prod-workers-abc12" in shown.split("There is no node")[1]  # the close ones are listed
    assert await operations(door) == before


@pytest.mark.parametrize("mode", MODES)
async def test_a_called_off_change_and_an_amount_per_node_make_no_card(
    server: MCPServer[Any], door: httpx2.AsyncClient, mode: str
) -> None:
    """Issue 26, point 10, through the real chat and server: nothing is planned, nothing reaches Door."""
    before = await operations(door)
    shown, approval = await chat(
        server,
        mode,
        "forget about replacing payments-prod-workers-abc12, it recovered on its own",
        "give the workers 16 GiB per node",
        "scale workers to 3. actually, cancel that",
    )
    assert approval.answers == [] and "Approve this change?" not in shown
    assert "→ replace_node" not in shown and "→ scale_node_pool" not in shown and "→ change_pool_tier" not in shown
    assert "you called off 'forget about replacing payments-prod-workers-abc12'" in shown
    assert "16 GiB per node means moving pool workers on payments-prod" in shown and "change_pool_tier" in shown
    assert "you called off what you asked before 'cancel that'" in shown
    assert await operations(door) == before


async def test_the_world_is_what_the_server_lists(server: MCPServer[Any]) -> None:
    async with Client(server) as client:
        world = await read_world(client)
    assert world.pools("payments-prod") == ("workers",)
    assert world.pool("payments-prod", "workers") is not None
    assert world.pool("payments-prod", "workers").size == "dks.c5.xlarge"  # type: ignore[union-attr]
    assert world.ids["3f9c1a2e-7b4d-4c58-9e21-5d6f8a0b1c2d"] == "payments-prod"
    assert "payments-prod-workers-abc12" in world.all_nodes("payments-prod")
    assert world.tiers["dks.r5.xlarge"].memory_gib == 32
