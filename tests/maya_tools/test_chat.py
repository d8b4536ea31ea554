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
import select
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import ElicitRequestFormParams, ElicitRequestURLParams, ListToolsResult, Tool, ToolAnnotations

from maya_tools.chat.app import CHOSEN_OFFLINE, NO_KEY, open_session, repl, run
from maya_tools.chat.model import ModelChat, change_tools, changes_things, list_all_tools, model_tools, withheld
from maya_tools.chat.settings import ChatSettings
from maya_tools.chat.terminal import (
    ApprovalPrompt,
    Terminal,
    ctrl_c_abandons_turns,
    discard_typeahead,
    without_form_sentence,
)
from reference_backend.seed import DEMO_NODE_NAME
from tests.maya_tools.conftest import MODES, operations

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

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
    """Answers each streaming POST /v1/messages with the next step of the script and records the request.

    A step that fails (an assertion on what the chat sent) would reach the chat as a connection error
    and be survived; ``verify()`` raises it in the test instead, and checks the script was played out.
    """

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.requests: list[dict[str, Any]] = []
        self.failures: list[Exception] = []

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._answer(request)
        except httpx2.TransportError:
            raise  # scripted on purpose: the chat must survive it
        except Exception as error:
            self.failures.append(error)
            raise

    async def _answer(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/messages", request.url
        body = json.loads(request.content)
        self.requests.append(body)
        assert body.get("stream") is True, "the chat must stream its answers"
        step = self.steps.pop(0)
        blocks, stop = step if isinstance(step, tuple) else await step(body)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse(blocks, stop))

    def verify(self) -> None:
        if self.failures:
            raise self.failures[0]
        assert not self.steps, f"{len(self.steps)} scripted model answer(s) never asked for"

    def client(self) -> AsyncAnthropic:
        from anthropic import AsyncAnthropic  # here, not at the top: ~0.5 s of every worker's collection

        http = httpx2.AsyncClient(transport=httpx2.MockTransport(self))
        return AsyncAnthropic(api_key="test-key", base_url="http://anthropic.test", http_client=http, max_retries=0)


def last_tool_result(body: dict[str, Any]) -> dict[str, Any]:
    """What the newest tool_result the chat sent says, read from its text as a model reads it: the
    change tool's first line is "status: whether Door changed anything", and it names the card."""
    block = body["messages"][-1]["content"][-1]
    assert block["type"] == "tool_result", block
    said = block["content"][0]["text"]
    assert not said.lstrip().startswith("{"), said  # a short answer, not a JSON dump
    status, _, door = said.split("\n", 1)[0].partition(": ")
    card = re.search(r"\bcard_[\w-]+", said)
    assert card is not None, said
    return {"status": status, "changed": door.startswith("Door applied"), "card": {"id": card.group()}}


async def report_what_happened(body: dict[str, Any]) -> Reply:
    """A model that says what the tool result's text says, as Maya's prompt asks."""
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
        approval.client = client  # as ``maya_tools.chat.app.run`` does: the whole card is read through it
        session = await open_session(client, terminal, anthropic_client=model.client(), model="test-model")
        assert isinstance(session, ModelChat)
        with anyio.fail_after(30):
            await repl(terminal, session, approval)
    model.verify()
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
async def test_the_terminal_shows_the_card_without_the_forms_instruction_sentence(
    server: MCPServer[Any], door: httpx2.AsyncClient, mode: str
) -> None:
    """The server's form message ends with how to answer a form; the chat asks its own [y/N]."""
    model = ScriptedModel(([tool_use("scale_node_pool", SCALE)], "tool_use"), report_what_happened)
    out = io.StringIO()
    _, approval = await chat(server, model, Terminal(person("scale workers on payments-prod to 4", "n"), out), mode)

    [sent] = approval.shown
    assert "Tick approve and accept" in sent  # what a form renderer shows
    shown = out.getvalue()
    assert "Scale node pool" in shown and "count: 2 -> 4" in shown and "card_" in shown
    assert "Tick approve" not in shown and "accept to run it once" not in shown
    assert "Approve this change?" not in shown  # the chat's own [y/N] is the prompt its reader gets


def test_only_a_last_paragraph_that_is_the_forms_question_is_left_out() -> None:
    card = "Scale node pool “workers” on cluster “payments-prod”\n  count: 2 -> 4"
    assert without_form_sentence(card + "\n\nApprove this change? Tick approve and accept.") == card
    assert without_form_sentence(card) == card
    other = card + "\n\nSomething else entirely."
    assert without_form_sentence(other) == other


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
    """An empty line, "ok", "approve" or Ctrl-D at the card all decline; a line that is not an
    answer is then the next request (the model gets it as a new message, never as an approval)."""
    for answer in ["", "ok", "approve", EOFError]:
        queued = isinstance(answer, str) and answer != ""
        steps: list[Step] = [([tool_use("scale_node_pool", SCALE)], "tool_use"), report_what_happened]
        if queued:
            steps.append(([text("A card is approved only at its own prompt.")], "end_turn"))
        model = ScriptedModel(*steps)
        before = await operations(door)
        _, approval = await chat(server, model, Terminal(person("scale", answer), io.StringIO()))
        assert approval.answers == ["decline"] and await operations(door) == before
        if queued:
            assert model.requests[-1]["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": answer}]}


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


async def test_the_chat_learns_the_change_tools_from_the_annotations_in_tools_list(server: MCPServer[Any]) -> None:
    from maya_tools.tools.changes import CHANGE_TOOLS  # the server's own list, to compare with

    async with Client(server) as client:
        learned = change_tools(await list_all_tools(client))
    assert learned == CHANGE_TOOLS


def test_a_tool_counts_as_a_change_unless_its_annotations_say_read_only() -> None:
    schema = {"type": "object", "properties": {}}

    def tool(**hints: bool) -> Tool:
        return Tool(name="t", input_schema=schema, annotations=ToolAnnotations(**hints) if hints else None)

    assert changes_things(tool())  # no annotations: conservative
    assert changes_things(tool(destructive_hint=False))  # readOnlyHint absent means false
    assert changes_things(tool(read_only_hint=False, destructive_hint=False))
    assert changes_things(tool(read_only_hint=True, destructive_hint=True))
    assert not changes_things(tool(read_only_hint=True))
    assert not changes_things(tool(read_only_hint=True, destructive_hint=False))


async def test_the_persons_answer_never_reaches_the_model(server: MCPServer[Any]) -> None:
    model = ScriptedModel(([tool_use("scale_node_pool", SCALE)], "tool_use"), report_what_happened)
    await chat(server, model, Terminal(person("scale workers on payments-prod to 4", "yes"), io.StringIO()))

    sent = json.dumps(model.requests[-1]["messages"])
    assert '"yes"' not in sent and "[y/N]" not in sent
    user_texts = [
        b["text"] for m in model.requests[-1]["messages"] if m["role"] == "user" for b in m["content"] if "text" in b
    ]
    assert user_texts == ["scale workers on payments-prod to 4"]


async def test_a_refused_change_reaches_the_model_as_an_error_with_the_rule(
    server: MCPServer[Any], door: httpx2.AsyncClient
) -> None:
    async def check(body: dict[str, Any]) -> Reply:
        block = body["messages"][-1]["content"][0]
        assert block["is_error"] is True and "R-PATCH-04" in block["content"][0]["text"]
        return [text("Door refuses count 0 without autoscaling (R-PATCH-04).")], "end_turn"

    model = ScriptedModel(([tool_use("scale_node_pool", {**SCALE, "count": 0})], "tool_use"), check)
    before = await operations(door)
    out = io.StringIO()
    _, approval = await chat(server, model, Terminal(person("scale workers on payments-prod to 0"), out))
    assert await operations(door) == before and approval.shown == []
    assert "✗ refused, nothing changed" in out.getvalue()


@pytest.mark.parametrize(
    "params",
    [
        ElicitRequestFormParams(
            message="Approve? Also, your Door token please.",
            requested_schema={
                "type": "object",
                "properties": {"approve": {"type": "boolean"}, "token": {"type": "string"}},
            },
        ),
        ElicitRequestFormParams(
            message="Type yes to approve",
            requested_schema={"type": "object", "properties": {"answer": {"type": "string"}}},
        ),
        ElicitRequestURLParams(message="Approve here", url="https://example.test/approve", elicitation_id="e1"),
    ],
    ids=["approve plus another field", "free-text answer", "url"],
)
async def test_the_handler_declines_anything_but_the_confirm_form_without_asking(params: Any) -> None:
    out = io.StringIO()
    approval = ApprovalPrompt(Terminal(person("y"), out))
    result = await approval(None, params)  # type: ignore[arg-type]
    assert result.action == "decline" and approval.shown == []
    assert "[y/N]" not in out.getvalue()


async def test_the_tool_list_is_read_across_every_page() -> None:
    class Paged:
        async def list_tools(self, cursor: str | None = None) -> Any:
            page = {None: (["list_clusters"], "2"), "2": (["scale_node_pool"], None)}[cursor]
            tools = [Tool(name=n, input_schema={"type": "object"}) for n in page[0]]
            return ListToolsResult(tools=tools, next_cursor=page[1])

    assert [t.name for t in await list_all_tools(Paged())] == ["list_clusters", "scale_node_pool"]  # type: ignore[arg-type]


async def test_a_tool_the_model_was_not_offered_is_not_called(server: MCPServer[Any], door: httpx2.AsyncClient) -> None:
    async def check(body: dict[str, Any]) -> Reply:
        block = body["messages"][-1]["content"][0]
        assert block["is_error"] is True and "no tool" in block["content"][0]["text"]
        return [text("Sorry.")], "end_turn"

    model = ScriptedModel(([tool_use("approve_card", {"card_id": "card_x"})], "tool_use"), check)
    before = await operations(door)
    await chat(server, model, Terminal(person("approve it"), io.StringIO()))
    assert await operations(door) == before


async def test_an_argument_the_tool_does_not_declare_is_refused_and_nothing_is_called(
    server: MCPServer[Any], door: httpx2.AsyncClient
) -> None:
    """A made-up ``confirm: true`` on a change tool, or ``approve`` on a read tool, is not passed on:
    no card is made, nothing is asked, and the model is told the argument does not exist."""

    async def check(body: dict[str, Any]) -> Reply:
        results = body["messages"][-1]["content"]
        assert [r["tool_use_id"] for r in results] == ["toolu_1", "toolu_2"]
        assert all(r["is_error"] is True for r in results)
        assert "no argument confirm" in results[0]["content"][0]["text"]
        assert "no argument approve" in results[1]["content"][0]["text"]
        return [text("I cannot approve it for you.")], "end_turn"

    model = ScriptedModel(
        (
            [
                tool_use("scale_node_pool", {**SCALE, "confirm": True}, id="toolu_1"),
                tool_use("get_card", {"card_id": "card_x", "approve": True}, id="toolu_2"),
            ],
            "tool_use",
        ),
        check,
    )
    before = await operations(door)
    out = io.StringIO()
    _, approval = await chat(server, model, Terminal(person("scale workers on payments-prod to 4"), out))

    assert await operations(door) == before
    assert approval.shown == [] and approval.answers == []
    assert "scale_node_pool has no argument confirm; not called" in out.getvalue()


class Writes(io.StringIO):
    """An output that remembers each write, to tell streamed text from text printed at the end."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, s: str) -> int:
        self.writes.append(s)
        return super().write(s)


async def test_the_answer_is_streamed_as_it_is_written(server: MCPServer[Any]) -> None:
    model = ScriptedModel(([text("There are two pools on payments-prod.")], "end_turn"))
    out = Writes()
    await chat(server, model, Terminal(person("how many pools?"), out))

    start = out.writes.index("maya › ")
    streamed = out.writes[start + 1 : out.writes.index("\n", start)]
    assert streamed == ["There ", "are ", "two ", "pools ", "on ", "payments-prod."]


async def test_a_line_typed_ahead_cannot_answer_the_card(server: MCPServer[Any], door: httpx2.AsyncClient) -> None:
    """Type-ahead is dropped after the card is shown and before the y/N is read."""
    log: list[str] = []
    out = io.StringIO()
    lines = person("scale workers on payments-prod to 4", "n")

    def read(prompt: str) -> str:
        log.append(f"read {prompt.strip()}")
        return lines(prompt)

    def discard() -> None:
        log.append("discard" + (" after the card" if "Scale node pool" in out.getvalue() else " before the card"))

    model = ScriptedModel(([tool_use("scale_node_pool", SCALE)], "tool_use"), report_what_happened)
    await chat(server, model, Terminal(read, out, discard=discard))

    assert log == [
        "read you ›",
        "discard after the card",
        "read Approve this change? Only you can, here. [y/N]",
        "read you ›",
    ]


def test_discard_typeahead_drops_what_was_typed_at_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "r") as tty:
            monkeypatch.setattr(sys, "stdin", tty)
            os.write(master, b"y\n")
            assert select.select([tty], [], [], 1)[0] == [tty]  # the typed-ahead line is waiting
            discard_typeahead()
            assert select.select([tty], [], [], 0.2)[0] == []
    finally:
        os.close(master)


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
    assert "Nothing was changed. Turn autoscaling on with bounds" in shown  # no card: the interpreter knows the rule
    assert "R-PATCH-04" in shown and "Turn autoscaling on with bounds" in shown
    assert "R-DEL-01" in shown and "add another pool first" in shown  # the interpreter knows it is the last one


async def test_offline_declined_card_says_nothing_changed(server: MCPServer[Any], door: httpx2.AsyncClient) -> None:
    out = io.StringIO()
    terminal = Terminal(person("scale workers on payments-prod to 3", "n"), out)
    before = await operations(door)
    async with Client(server, elicitation_callback=ApprovalPrompt(terminal)) as client:
        await repl(terminal, await open_session(client, terminal, anthropic_client=None, model="unused"))
    assert await operations(door) == before
    assert "Nothing was changed: you declined the change to pool workers on payments-prod." in out.getvalue()


async def test_offline_replacing_an_unlisted_node_makes_no_card_and_names_the_listed_ones(
    server: MCPServer[Any], door: httpx2.AsyncClient
) -> None:
    """Door would accept an unknown node name and the replacement would then fail (R-RNODE-04): the
    offline chat reads list_nodes first and never makes that card (issue 22, property 3)."""
    out = io.StringIO()
    terminal = Terminal(person("replace node nosuchnode on payments-prod", "y"), out)
    before = await operations(door)
    async with Client(server, elicitation_callback=ApprovalPrompt(terminal)) as client:
        await repl(terminal, await open_session(client, terminal, anthropic_client=None, model="unused"))
    shown = out.getvalue()
    assert "There is no node nosuchnode on payments-prod (R-RNODE-04), so I changed nothing" in shown
    assert DEMO_NODE_NAME in shown and "replace_node(" not in shown
    assert await operations(door) == before


async def test_offline_relabel_says_no_worker_changes_and_pools_list_their_labels_after_a_comma(
    server: MCPServer[Any], door: httpx2.AsyncClient
) -> None:
    out = io.StringIO()
    terminal = Terminal(
        person("relabel pool workers on payments-prod with team=payments", "y", "show cluster payments-prod"), out
    )
    async with Client(server, elicitation_callback=ApprovalPrompt(terminal)) as client:
        await repl(terminal, await open_session(client, terminal, anthropic_client=None, model="unused"))
    shown = out.getvalue()
    assert 'What changed: labels {} → {"team": "payments"}.' in shown
    assert "The workers follow" not in shown and "no worker is added or removed" in shown
    assert 'count 2, fixed size, labels {"team": "payments"}' in shown


async def test_ctrl_d_at_the_card_declines_on_a_new_line(server: MCPServer[Any], door: httpx2.AsyncClient) -> None:
    out = io.StringIO()
    requests = iter(["scale workers on payments-prod to 3"])

    def read(prompt: str) -> str:  # like input(): the prompt is written and the cursor stays on its line
        out.write(prompt)
        if "[y/N]" in prompt:
            raise EOFError  # Ctrl-D at the card
        step = next(requests, None)
        if step is None:
            raise EOFError
        return step

    terminal = Terminal(read, out)
    before = await operations(door)
    async with Client(server, elicitation_callback=ApprovalPrompt(terminal)) as client:
        await repl(terminal, await open_session(client, terminal, anthropic_client=None, model="unused"))
    assert await operations(door) == before
    assert "[y/N] \n  · you declined this card\n" in out.getvalue()


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


async def test_an_unreachable_model_says_what_changed_in_the_turn(
    server: MCPServer[Any], door: httpx2.AsyncClient
) -> None:
    """With no network the person learns the model is unreachable, that nothing changed, and how to go on."""

    async def unreachable(body: dict[str, Any]) -> Reply:
        raise httpx2.ConnectError("no route")

    async def unreachable_after_the_change(body: dict[str, Any]) -> Reply:
        raise httpx2.ConnectError("no route")

    model = ScriptedModel(
        unreachable,
        ([tool_use("scale_node_pool", {**SCALE, "count": 3})], "tool_use"),
        unreachable_after_the_change,
    )
    out = io.StringIO()
    await chat(server, model, Terminal(person("scale workers on payments-prod to 4", "then to 3", "y"), out))
    first, second = [line for line in out.getvalue().splitlines() if "could not answer" in line]
    assert first == (
        "  ✗ the model could not answer: no connection to the Anthropic API. No change was made in this turn; "
        "the conversation goes on (try again, or leave and run maya-tools chat --offline)."
    )
    assert "Only the changes marked ✓ executed above were made" in second
    assert "✓ executed" in out.getvalue()


def test_chat_help_names_the_default_model_and_the_offline_fallback(capsys: pytest.CaptureFixture[str]) -> None:
    from maya_tools.chat.app import main
    from maya_tools.chat.settings import DEFAULT_MODEL

    with pytest.raises(SystemExit):
        main(["--help"])
    shown = re.sub(r"-\s+", "-", " ".join(capsys.readouterr().out.split()))  # argparse wraps at hyphens
    assert f"else {DEFAULT_MODEL})" in shown and "None" not in shown and "``" not in shown
    assert "without it, or with --offline, a small built-in interpreter" in shown


# --- the real command: stdio -------------------------------------------------------------------


SECRET = "sk-ant-test-not-a-real-key"


@pytest.mark.parametrize(
    ("key", "offline", "says"),
    [(None, False, NO_KEY), (SECRET, True, CHOSEN_OFFLINE)],
    ids=["no key", "--offline with a key"],
)
async def test_the_chat_command_starts_the_server_over_stdio_and_runs_offline(
    key: str | None, offline: bool, says: str
) -> None:
    """Without a key, or with ``--offline`` (the key then goes unused), the first line says so."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env.update({"MAYA_CARD_STORE": ":memory:", "MAYA_REFERENCE_TIME_SCALE": "300"})
    if key:
        env["ANTHROPIC_API_KEY"] = key
    env.pop("DOOR_API_URL", None)
    settings = ChatSettings.from_env(env)
    assert settings.anthropic_api_key == key and SECRET not in settings.server_env.values()
    out = io.StringIO()
    terminal = Terminal(
        person("list pools on payments-prod", "Scale the workers pool on payments-prod to 3.", "y"), out
    )
    with anyio.fail_after(60):
        assert await run(settings, terminal, offline=offline) == 0
    shown = out.getvalue()
    assert shown.startswith(says + "\n") and SECRET not in shown
    assert "workers" in shown and "dks.c5.xlarge" in shown
    assert "Done: you approved the change to pool workers on payments-prod" in shown


async def test_the_ctrl_c_signal_cancels_the_running_turn_not_the_program() -> None:
    before = signal.getsignal(signal.SIGINT)  # pytest-xdist workers run with their own handler
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
    assert signal.getsignal(signal.SIGINT) is before


# --- offline: how people actually ask ------------------------------------------------------------


async def offline_chat(server: MCPServer[Any], *lines: str) -> tuple[str, ApprovalPrompt]:
    out = io.StringIO()
    terminal = Terminal(person(*lines), out)
    approval = ApprovalPrompt(terminal)
    async with Client(server, elicitation_callback=approval) as client:
        session = await open_session(client, terminal, anthropic_client=None, model="unused")
        with anyio.fail_after(30):
            await repl(terminal, session)
    return out.getvalue(), approval


async def test_a_new_request_typed_at_the_card_declines_it_and_is_handled_next(
    server: MCPServer[Any], door: httpx2.AsyncClient
) -> None:
    before = await operations(door)
    shown, approval = await offline_chat(
        server, "scale workers on payments-prod to 4", "bump workers to 5 on payments-prod", "y"
    )
    assert approval.answers == ["decline", "accept"]
    assert "you declined this card (only y approves); next I take “bump workers to 5 on payments-prod”" in shown
    assert "you › bump workers to 5 on payments-prod\n" in shown
    assert "Nothing was changed: you declined the change to pool workers on payments-prod." in shown
    assert "What changed: count 2 → 5" in shown
    assert len(await operations(door)) == len(before) + 1


async def test_approve_typed_at_the_card_declines_it_and_is_then_refused_as_a_request(
    server: MCPServer[Any], door: httpx2.AsyncClient
) -> None:
    before = await operations(door)
    shown, approval = await offline_chat(server, "scale workers on payments-prod to 4", "approve it for me")
    assert approval.answers == ["decline"] and await operations(door) == before
    assert "a card is approved only by you, answering y at the card's own prompt" in shown


async def test_offline_names_come_from_the_server_and_a_question_completes_the_request(
    server: MCPServer[Any], door: httpx2.AsyncClient
) -> None:
    """The names are read from list_clusters / get_cluster: a typo, a part of a name and a follow-up
    all reach the right pool; a missing cluster gets one question and the answer completes it."""
    shown, approval = await offline_chat(
        server,
        "scale the pool to 3",
        "payments-prod",
        "y",
        "what's the status of paymnets-prod?",
        "how many nodes does it have",
    )
    assert "payments-prod is Provisioned" in shown
    assert "maya › Which cluster do you mean? Name the cluster. I can see payments-prod or payments-staging." in shown
    assert '→ scale_node_pool(cluster="payments-prod", pool="workers", count=3)' in shown
    assert approval.answers == ["accept"] and "What changed: count 2 → 3" in shown
    assert '→ list_nodes(cluster="payments-prod")' in shown
