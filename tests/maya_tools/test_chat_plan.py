"""A plan card in the terminal chat (an MCP client of the server, through the SDK's Client in both
protocol generations, on the reference backend's manual clock, which the server's waits advance):
the card shows the plan's steps and the peak, and after the person's y each step's progress is
printed as the server's progress notifications arrive, before the outcome."""

from __future__ import annotations

import io
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from maya_tools.chat.app import open_session, repl
from maya_tools.chat.terminal import ApprovalPrompt, ProgressLines, Terminal
from tests.maya_tools.conftest import MODES, operations
from tests.maya_tools.test_chat import ScriptedModel, chat, person, report_what_happened, tool_use

pytestmark = pytest.mark.anyio

MOVE = {"cluster": "payments-prod", "pool": "workers", "size": "dks.c5.2xlarge"}
STEPS = (
    "⋯ step 1 of 3: Add pool workers-c5-2xlarge",
    "⋯ step 2 of 3: 2 of 2 workers of pool workers-c5-2xlarge Running",
    "⋯ step 3 of 3: Remove pool workers",
    "⋯ every step is done",
)


def in_order(shown: str, *lines: str) -> None:
    at = 0
    for line in lines:
        found = shown.find(line, at)
        assert found >= 0, f"{line!r} not after position {at}:\n{shown}"
        at = found + len(line)


@pytest.mark.parametrize("mode", MODES)
async def test_the_chat_shows_a_plan_s_steps_and_peak_then_each_step_as_it_runs(
    server: MCPServer[Any], door: httpx2.AsyncClient, mode: str
) -> None:
    model = ScriptedModel(([tool_use("change_pool_tier", MOVE)], "tool_use"), report_what_happened)
    out = io.StringIO()
    _, approval = await chat(
        server, model, Terminal(person("move workers on payments-prod to c5.2xlarge", "y"), out), mode
    )

    shown = out.getvalue()
    [form] = approval.shown
    assert "Plan of 3 steps, one approval: add the new pool in dks.c5.2xlarge" in form  # the short form
    # The terminal shows the whole card instead (issue 27): capacity, price, the peak, every step, every warning.
    in_order(
        shown,
        "CONFIRM: Change the tier of node pool “workers”",
        "  size: “dks.c5.xlarge” -> “dks.c5.2xlarge”",
        "  name: “workers” -> “workers-c5-2xlarge”",
        "  price per hour: 0.34 -> 0.68",
        "prepaid credit needed",
        "at the peak (both pools)",
        "Step 1 (pending): Add pool workers-c5-2xlarge",
        "Step 2 (pending): Wait until pool workers-c5-2xlarge is done",
        "Step 3 (pending): Remove pool workers",
        "! step 3 drains and deletes the old pool's 2 workers once the new pool runs [R-DEL-02]",
        "! the pool is renamed workers-c5-2xlarge; keeping its name takes 3 more steps",
        "[R-CREDIT-01]",
        "! needs the super_admin role: Door refuses a member with 403 [R-AUTH-03]",
        "The exact request and its digest: type /card.",
        "✓ you approved this card",
        *STEPS,
        "Done:",
    )
    assert "Request digest" not in shown and "Card card_" not in shown  # not the form; the request on /card
    assert shown.count("⋯ step 2 of 3: 2 of 2 workers") == 1, "a progress message is printed once"
    kinds = [op["kind"] for op in await operations(door)]
    assert kinds.count("pool.create") == 1 and kinds.count("pool.delete") == 1


@pytest.mark.parametrize("mode", MODES)
async def test_the_offline_chat_prints_a_plan_s_progress_too(
    server: MCPServer[Any], door: httpx2.AsyncClient, mode: str
) -> None:
    out = io.StringIO()
    terminal = Terminal(person("move workers on payments-prod to dks.c5.2xlarge", "y"), out)
    async with Client(server, mode=mode, elicitation_callback=ApprovalPrompt(terminal)) as client:
        session = await open_session(client, terminal, anthropic_client=None, model="unused")
        with anyio.fail_after(30):
            await repl(terminal, session)
    in_order(out.getvalue(), "Plan of 3 steps", "✓ you approved this card", *STEPS, "maya › ")


async def test_progress_lines_are_printable_and_not_repeated() -> None:
    out = io.StringIO()
    lines = ProgressLines(Terminal(out=out))
    for message in ("step 1 of 3: Add pool \x1b[2Jx", "step 1 of 3: Add pool \x1b[2Jx", None, "", "done"):
        await lines(1.0, 3.0, message)
    assert out.getvalue() == "  ⋯ step 1 of 3: Add pool \\x1b[2Jx\n  ⋯ done\n"
