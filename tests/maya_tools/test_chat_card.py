"""The terminal chat shows the whole card at its question, not the short form, and ``/card`` shows
its exact request (issue 27): every change, every warning, the capacity and the price."""

from __future__ import annotations

import io
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from maya_tools.chat.app import open_session, repl
from maya_tools.chat.terminal import ApprovalPrompt, Terminal
from reference_backend.seed import DEMO_NODE_NAME
from tests.maya_tools.conftest import MODES, operations
from tests.maya_tools.test_chat import person

pytestmark = pytest.mark.anyio


async def offline_chat(server: MCPServer[Any], mode: str, *lines: str) -> tuple[str, ApprovalPrompt]:
    out = io.StringIO()
    terminal = Terminal(person(*lines), out)
    approval = ApprovalPrompt(terminal)
    async with Client(server, mode=mode, elicitation_callback=approval) as client:
        approval.client = client  # as ``maya_tools.chat.app.run`` does
        session = await open_session(client, terminal, anthropic_client=None, model="unused")
        with anyio.fail_after(30):
            await repl(terminal, session, approval)
    return out.getvalue(), approval


@pytest.mark.parametrize("mode", MODES)
async def test_a_replace_card_is_shown_whole_in_words_and_slash_card_shows_its_exact_request(
    server: MCPServer[Any], door: httpx2.AsyncClient, mode: str
) -> None:
    before = await operations(door)
    shown, approval = await offline_chat(
        server, mode, "list nodes on payments-prod", f"replace node {DEMO_NODE_NAME} on payments-prod", "/card", "n"
    )

    [form] = approval.shown
    question, marker, after = shown.partition("The exact request and its digest: type /card.")
    card = question[question.rindex("CONFIRM: ") :] + marker
    for words in (
        f"CONFIRM: Replace node “{DEMO_NODE_NAME}”",
        "Needs role: super_admin",
        f"  node {DEMO_NODE_NAME}: Running -> drained and deleted; Door adds a replacement",
        "  vCPU: 8 -> 8",
        "  price per hour: 0.34 -> 0.34",
        f"! node {DEMO_NODE_NAME} is drained and deleted; Door adds a replacement [R-RNODE-02]",
        "! needs the super_admin role: Door refuses a member with 403 [R-AUTH-03]",
        "The exact request and its digest: type /card.",
    ):
        assert words in card, (words, card)
    assert '{"name"' not in card and "{“name”" not in card  # no JSON node diff
    assert "Request digest" not in card and form.split("\n")[0] not in card  # the whole card, not the form
    exact = after[: after.index("you declined")]
    # /card at the question: the exact request and its digest, then the same question again
    assert "Exact request: DELETE /v1/public/clusters/" in exact and "Request digest (sha256): " in exact
    assert approval.answers == ["decline"] and await operations(door) == before


@pytest.mark.parametrize("mode", MODES)
async def test_slash_card_after_the_question_shows_the_last_card_and_says_when_there_is_none(
    server: MCPServer[Any], mode: str
) -> None:
    shown, approval = await offline_chat(server, mode, "/card", "scale workers on payments-prod to 3", "n", "/card")

    assert "(no card yet: /card shows the last card you were asked about" in shown
    assert approval.last_card is not None
    last = shown[shown.rindex("you declined") :]
    assert "CONFIRM: Scale node pool “workers”" in last and "Request digest (sha256): " in last
    assert '"count": 3' in last  # the exact request body
