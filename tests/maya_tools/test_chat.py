"""The terminal chat against a scripted Messages API and the in-memory MCP server.

The model is an ``httpx2.MockTransport`` that answers the SDK's streaming ``POST /v1/messages``
with server-sent events (text and ``tool_use`` blocks) and records every request, so the tests can
read the tools and the history the chat really sent. The person is a scripted ``input``.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import httpx2
import pytest
from anthropic import AsyncAnthropic
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import Tool

from maya_tools.chat import NO_KEY, open_session, repl, run
from maya_tools.chat_model import ModelChat, model_tools, withheld
from maya_tools.chat_terminal import ApprovalPrompt, Terminal, ctrl_c_abandons_turns
from maya_tools.settings import ChatSettings
from reference_backend.seed import DEMO_NODE_NAME
from tests.maya_tools.conftest import MODES, operations

pytestmark = pytest.mark.anyio

SCALE = {"cluster": "payments-prod", "pool": "workers", "count": 4}


# --- the person --------------------------------------------------------------------------------


def person(*lines: str | type[BaseException]) -> Callable[[str], str]:
    """An ``input`` that types ``lines`` in order (an exception class is raised instead), then Ctrl-D."""
    script: Iterator[str | type[BaseException]] = iter(lines)

    def read(prompt: str) -> str:
        step = next(script, EOFError)
        if isinstance(step, str):
            return step
        raise step()

    return read


# --- the scripted model ------------------------------------------------------------------------


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(name: str, arguments: dict[str, Any], id: str = "toolu_1") -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": arguments}


def sse(blocks: list[dict[str, Any]], stop_reason: str) -> bytes:
    """The event stream the Messages API sends for one assistant message."""
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_test",
                    "type": "message",
                    "role": "assistant",
                    "model": "test-model",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            },
        )
    ]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in re.findall(r"\S+\s*|\s+", block["text"])]
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


Reply = tuple[list[dict[str, Any]], str]
Step = Reply | Callable[[dict[str, Any]], Awaitable[Reply]]


class ScriptedModel:
    """Answers each POST /v1/messages with the next step of the script and records the request."""

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/messages", request.url
        body = json.loads(request.content)
        self.requests.append(body)
        step = self.steps.pop(0)
        blocks, stop = step if isinstance(step, tuple) else await step(body)
        if body.get("stream"):
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse(blocks, stop))
        message = {
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        return httpx2.Response(200, json=message)

    def client(self) -> AsyncAnthropic:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(self))
        return AsyncAnthropic(api_key="test-key", base_url="http://anthropic.test", http_client=http, max_retries=0)


def last_tool_result(body: dict[str, Any]) -> dict[str, Any]:
    """The structured ChangeResult in the newest tool_result the chat sent to the model."""
    block = body["messages"][-1]["content"][-1]
    assert block["type"] == "tool_result", block
    return json.loads(block["content"][0]["text"])


async def report_what_happened(body: dict[str, Any]) -> Reply:
    """A model that says what the tool result says, as Maya's prompt asks."""
    result = last_tool_result(body)
    if result["changed"]:
        return [text(f"Done: the change was executed (card {result['card']['id']}).")], "end_turn"
    return [text(f"Nothing changed: the card was {result['status']}.")], "end_turn"


def assert_consistent(messages: list[dict[str, Any]]) -> None:
    """Roles alternate, and every tool_use is answered by a tool_result in the very next message."""
    assert messages[0]["role"] == "user"
    for before, after in itertools.pairwise(messages):
        assert before["role"] != after["role"], (before, after)
    for i, message in enumerate(messages):
        uses = [b["id"] for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
        if uses:
            answered = [b.get("tool_use_id") for b in messages[i + 1]["content"] if b.get("type") == "tool_result"]
            assert sorted(uses) == sorted(answered), (uses, answered)


async def chat(
    server: MCPServer[Any], model: ScriptedModel, terminal: Terminal, mode: str = "auto"
) -> tuple[ModelChat, ApprovalPrompt]:
    approval = ApprovalPrompt(terminal)
    async with Client(server, mode=mode, elicitation_callback=approval) as client:
        session = await open_session(client, terminal, anthropic_client=model.client(), model="test-model")
        assert isinstance(session, ModelChat)
        with anyio.fail_after(30):
            await repl(terminal, session)
    return session, approval


# --- approval ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_an_approved_card_makes_exactly_one_change_and_the_answer_says_executed(
    server: MCPServer[Any], door: httpx2.AsyncClient, mode: str
) -> None:
    model = ScriptedModel(
        ([text("Scaling it. "), tool_use("scale_node_pool", SCALE)], "tool_use"), report_what_happened
    )
    out = io.StringIO()
    before = await operations(door)
    session, approval = await chat(
        server, model, Terminal(person("Scale the workers pool on payments-prod to 4.", "y"), out), mode
    )

    after = await operations(door)
    assert len(after) == len(before) + 1 and after[0]["kind"] == "pool.update"
    assert len(approval.shown) == 1 and "Scale node pool" in approval.shown[0] and "count: 2 -> 4" in approval.shown[0]
    assert approval.answers == ["accept"]
    result = last_tool_result(model.requests[1])
    assert result["status"] == "executed" and result["changed"] is True
    shown = out.getvalue()
    assert "✓ executed" in shown and "Done: the change was executed" in shown
    assert_consistent(session.messages)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", MODES)
async def test_a_declined_card_changes_nothing_and_the_answer_says_so(
    server: MCPServer[Any], door: httpx2.AsyncClient, mode: str
) -> None:
    model = ScriptedModel(([tool_use("scale_node_pool", SCALE)], "tool_use"), report_what_happened)
    out = io.StringIO()
    before = await operations(door)
    _, approval = await chat(server, model, Terminal(person("scale workers on payments-prod to 4", "n"), out), mode)

    assert await operations(door) == before
    assert len(approval.shown) == 1 and approval.answers == ["decline"]
    result = last_tool_result(model.requests[1])
    assert result["status"] == "declined" and result["changed"] is False
    assert "· declined" in out.getvalue() and "Nothing changed: the card was declined" in out.getvalue()


async def test_only_y_or_yes_approves(server: MCPServer[Any], door: httpx2.AsyncClient) -> None:
    """An empty line, "ok", "approve" or Ctrl-D at the card all decline."""
    for answer in ["", "ok", "approve", EOFError]:
        model = ScriptedModel(([tool_use("scale_node_pool", SCALE)], "tool_use"), report_what_happened)
        before = await operations(door)
        _, approval = await chat(server, model, Terminal(person("scale", answer), io.StringIO()))
        assert approval.answers == ["decline"] and await operations(door) == before


async def test_the_tool_list_sent_to_the_model_offers_no_way_to_approve(server: MCPServer[Any]) -> None:
    model = ScriptedModel(([text("Hello.")], "end_turn"))
    await chat(server, model, Terminal(person("hi"), io.StringIO()))

    tools = model.requests[0]["tools"]
    names = {t["name"] for t in tools}
    assert {"scale_node_pool", "add_node_pool", "remove_node_pool", "replace_node", "list_clusters"} <= names
    assert not [n for n in names if re.match(r"(approve|confirm)", n, re.IGNORECASE)]
    for tool in tools:
        assert set(tool) == {"name", "description", "input_schema"}
        arguments = {a.lower() for a in tool["input_schema"].get("properties", {})}
        assert not arguments & {"approve", "approved", "confirm", "confirmed", "card", "answer"}, tool["name"]


def test_a_tool_that_could_approve_is_withheld_from_the_model() -> None:
    schema = {"type": "object", "properties": {"card_id": {"type": "string"}}}
    tools = [
        Tool(name="approve_card", input_schema=schema),
        Tool(name="confirm", input_schema=schema),
        Tool(name="scale", input_schema={"type": "object", "properties": {"count": {}, "confirm": {}}}),
        Tool(name="app_approve", input_schema=schema, _meta={"ui": {"visibility": ["app"]}}),
        Tool(name="get_card", input_schema=schema),
    ]
    assert [withheld(t) is None for t in tools] == [False, False, False, False, True]
    assert [t["name"] for t in model_tools(tools)] == ["get_card"]


async def test_the_persons_answer_never_reaches_the_model(server: MCPServer[Any]) -> None:
    model = ScriptedModel(([tool_use("scale_node_pool", SCALE)], "tool_use"), report_what_happened)
    await chat(server, model, Terminal(person("scale workers on payments-prod to 4", "yes"), io.StringIO()))

    sent = json.dumps(model.requests[-1]["messages"])
    assert '"yes"' not in sent and "[y/N]" not in sent
    user_texts = [
        b["text"] for m in model.requests[-1]["messages"] if m["role"] == "user" for b in m["content"] if "text" in b
    ]
    assert user_texts == ["scale workers on payments-prod to 4"]


async def test_a_tool_the_model_was_not_offered_is_not_called(server: MCPServer[Any], door: httpx2.AsyncClient) -> None:
    async def check(body: dict[str, Any]) -> Reply:
        block = body["messages"][-1]["content"][0]
        assert block["is_error"] is True and "no tool" in block["content"][0]["text"]
        return [text("Sorry.")], "end_turn"

    model = ScriptedModel(([tool_use("approve_card", {"card_id": "card_x"})], "tool_use"), check)
    before = await operations(door)
    await chat(server, model, Terminal(person("approve it"), io.StringIO()))
    assert await operations(door) == before


# --- offline -----------------------------------------------------------------------------------


async def test_without_a_key_the_chat_says_it_is_offline(server: MCPServer[Any]) -> None:
    out = io.StringIO()
    terminal = Terminal(person("show clusters"), out)
    async with Client(server, elicitation_callback=ApprovalPrompt(terminal)) as client:
        session = await open_session(client, terminal, anthropic_client=None, model="unused")
        await repl(terminal, session)
    assert NO_KEY in out.getvalue()
    assert "payments-prod" in out.getvalue() and "embedded reference backend" in out.getvalue()


@pytest.mark.parametrize("mode", MODES)
async def test_offline_chat_runs_the_pages_three_examples_with_approval(
    server: MCPServer[Any], door: httpx2.AsyncClient, mode: str
) -> None:
    out = io.StringIO()
    terminal = Terminal(
        person(
            "Scale the workers pool on payments-prod to 4.",
            "y",
            "Add a node pool named batch on payments-prod with one dks.m5.xlarge.",
            "y",
            f"Replace node {DEMO_NODE_NAME} on payments-prod.",
            "y",
            "what's the weather",
        ),
        out,
    )
    approval = ApprovalPrompt(terminal)
    before = await operations(door)
    async with Client(server, mode=mode, elicitation_callback=approval) as client:
        session = await open_session(client, terminal, anthropic_client=None, model="unused")
        with anyio.fail_after(30):
            await repl(terminal, session)

    kinds = [op["kind"] for op in (await operations(door))[: -len(before) or None]]
    assert sorted(kinds) == ["node.replace", "pool.create", "pool.update"]
    assert len(approval.shown) == 3 and approval.answers == ["accept"] * 3
    shown = out.getvalue()
    assert "What changed: count 2 → 4" in shown
    assert "Done: you approved the new pool batch on payments-prod" in shown
    assert f"Done: you approved replacing node {DEMO_NODE_NAME} on payments-prod" in shown
    assert "I understand only these requests" in shown


async def test_offline_refusals_name_the_rule_and_the_fix(server: MCPServer[Any], door: httpx2.AsyncClient) -> None:
    out = io.StringIO()
    terminal = Terminal(person("scale workers on payments-prod to 0", "remove pool workers from payments-prod"), out)
    before = await operations(door)
    async with Client(server, elicitation_callback=ApprovalPrompt(terminal)) as client:
        await repl(terminal, await open_session(client, terminal, anthropic_client=None, model="unused"))
    shown = out.getvalue()
    assert await operations(door) == before
    assert "Nothing was changed. Refused before any change" in shown
    assert "R-PATCH-04" in shown and "Turn autoscaling on with bounds" in shown
    assert "R-DEL-01" in shown and "Add a replacement pool first" in shown


async def test_offline_declined_card_says_nothing_changed(server: MCPServer[Any], door: httpx2.AsyncClient) -> None:
    out = io.StringIO()
    terminal = Terminal(person("scale workers on payments-prod to 3", "n"), out)
    before = await operations(door)
    async with Client(server, elicitation_callback=ApprovalPrompt(terminal)) as client:
        await repl(terminal, await open_session(client, terminal, anthropic_client=None, model="unused"))
    assert await operations(door) == before
    assert "Nothing was changed: you declined the change to pool workers on payments-prod." in out.getvalue()


# --- Ctrl-C ------------------------------------------------------------------------------------


async def test_ctrl_c_at_the_prompt_keeps_the_session(server: MCPServer[Any]) -> None:
    model = ScriptedModel(([text("Two clusters.")], "end_turn"))
    out = io.StringIO()
    await chat(server, model, Terminal(person(KeyboardInterrupt, "how many clusters?"), out))
    assert "nothing to stop" in out.getvalue() and "Two clusters." in out.getvalue()
    assert len(model.requests) == 1


async def test_ctrl_c_during_a_turn_abandons_it_and_the_history_stays_consistent(server: MCPServer[Any]) -> None:
    terminal = Terminal(person("list the pools on payments-prod", "and now?"), io.StringIO())

    async def hang_until_interrupted(body: dict[str, Any]) -> Reply:
        terminal.interrupt()  # what Ctrl-C does while the answer streams
        await anyio.sleep(60)
        raise AssertionError("the turn was not abandoned")

    model = ScriptedModel(
        ([tool_use("list_node_pools", {"cluster": "payments-prod"})], "tool_use"),
        hang_until_interrupted,
        ([text("Still here.")], "end_turn"),
    )
    session, _ = await chat(server, model, terminal)

    assert "turn abandoned" in terminal.out.getvalue()  # type: ignore[attr-defined]
    assert "Still here." in terminal.out.getvalue()  # type: ignore[attr-defined]
    third = model.requests[2]["messages"]
    assert_consistent(third)
    # What really happened in the abandoned turn is kept: the read and its result, then the note.
    assert third[2]["content"][0]["type"] == "tool_result" and "workers" in third[2]["content"][0]["content"][0]["text"]
    assert "interrupted this turn" in third[3]["content"][0]["text"]
    assert third[4] == {"role": "user", "content": [{"type": "text", "text": "and now?"}]}
    assert_consistent(session.messages)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", MODES)
async def test_ctrl_c_at_the_card_approves_nothing_and_answers_the_dangling_tool_use(
    server: MCPServer[Any], door: httpx2.AsyncClient, mode: str
) -> None:
    terminal = Terminal(
        person("scale workers on payments-prod to 4", KeyboardInterrupt, "anything else?"), io.StringIO()
    )
    model = ScriptedModel(
        ([tool_use("scale_node_pool", SCALE, id="toolu_cut")], "tool_use"),
        ([text("Nothing else.")], "end_turn"),
    )
    before = await operations(door)
    session, approval = await chat(server, model, terminal, mode)

    assert await operations(door) == before
    assert approval.answers == ["cancel"]
    second = model.requests[1]["messages"]
    assert_consistent(second)
    cut = second[2]["content"][0]
    assert cut["tool_use_id"] == "toolu_cut" and cut["is_error"] is True and "unknown" in cut["content"][0]["text"]
    assert "Nothing else." in terminal.out.getvalue()  # type: ignore[attr-defined]
    assert_consistent(session.messages)  # type: ignore[arg-type]


async def test_a_model_error_ends_the_turn_but_not_the_session(server: MCPServer[Any]) -> None:
    async def overloaded(body: dict[str, Any]) -> Reply:
        raise httpx2.ConnectError("no route")

    model = ScriptedModel(overloaded, ([text("Back.")], "end_turn"))
    out = io.StringIO()
    session, _ = await chat(server, model, Terminal(person("hello", "again"), out))
    assert "no connection to the Anthropic API" in out.getvalue() and "Back." in out.getvalue()
    assert_consistent(session.messages)  # type: ignore[arg-type]


# --- the real command: stdio -------------------------------------------------------------------


async def test_the_chat_command_starts_the_server_over_stdio_and_runs_offline_without_a_key() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update({"MAYA_CARD_STORE": ":memory:", "MAYA_REFERENCE_TIME_SCALE": "300"})
    env.pop("DOOR_API_URL", None)
    settings = ChatSettings.from_env(env)
    assert settings.anthropic_api_key is None and "ANTHROPIC_API_KEY" not in settings.server_env
    out = io.StringIO()
    terminal = Terminal(
        person("list pools on payments-prod", "Scale the workers pool on payments-prod to 3.", "y"), out
    )
    with anyio.fail_after(60):
        assert await run(settings, terminal) == 0
    shown = out.getvalue()
    assert NO_KEY in shown
    assert "workers" in shown and "dks.c5.xlarge" in shown
    assert "Done: you approved the change to pool workers on payments-prod" in shown


async def test_the_ctrl_c_signal_cancels_the_running_turn_not_the_program() -> None:
    terminal = Terminal(person(), io.StringIO())
    with ctrl_c_abandons_turns(terminal):
        with anyio.CancelScope() as scope:
            terminal.turn = scope
            os.kill(os.getpid(), signal.SIGINT)
            await anyio.sleep(10)
        terminal.turn = None

        def read(prompt: str) -> str:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(10)
            return "never"

        terminal._read = read
        with pytest.raises(KeyboardInterrupt):  # at a prompt, Ctrl-C interrupts the read itself
            terminal.ask("you › ")
    assert scope.cancelled_caught
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
