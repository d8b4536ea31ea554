"""Maya with a model: the Anthropic Messages API picks tools, the MCP server runs them.

Tool definitions come from the server's ``tools/list``, filtered so that nothing the model can call
approves a card (``model_tools``); which of them change things the chat learns from the same list
(``change_tools``), never from the server's code. The history is changed only at consistent points: a turn works on
its own copy and commits it when it ends; an abandoned turn (Ctrl-C) or a failed model call commits
only what really happened, every ``tool_use`` answered by a ``tool_result`` (``abandon``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent, Tool

from maya_tools.chat.terminal import ProgressLines, Terminal, call_line, short

if TYPE_CHECKING:  # the SDK takes a second to import; the offline chat and the server never need it
    import anthropic
    from anthropic import AsyncAnthropic
    from anthropic.types import Message, MessageParam, ToolParam

Block = dict[str, Any]

# A tool is withheld from the model if its name or any argument could stand for an approval.
APPROVAL_NAME = re.compile(r"^(approve|approval|confirm|accept|consent|authori[sz]e)", re.IGNORECASE)
APPROVAL_ARGUMENTS = frozenset(
    {"approve", "approved", "approval", "confirm", "confirmed", "confirmation", "card", "accept", "answer", "consent"}
)

INTERRUPTED = (
    "[The person interrupted this turn with Ctrl-C. I stopped here and did nothing further; "
    "any tool result above marked as interrupted has an unknown outcome, so read before saying "
    "whether it happened.]"
)
UNREACHABLE = "[The model could not be reached ({error}); this turn ended here.]"
CUT_SHORT = (
    "Interrupted by the person (Ctrl-C) before this tool returned. Its outcome is unknown: "
    "a change happened only if get_card or the read tools show it."
)


def withheld(tool: Tool) -> str | None:
    """Why ``tool`` must not be offered to the model, or None if it may be."""
    if APPROVAL_NAME.match(tool.name):
        return f"its name {tool.name!r} reads as an approval"
    properties = (tool.input_schema or {}).get("properties") or {}
    approving = sorted(APPROVAL_ARGUMENTS.intersection(k.lower() for k in properties))
    if approving:
        return f"its argument(s) {', '.join(approving)} could approve a card"
    meta = tool.meta or {}
    ui = meta.get("ui") if isinstance(meta, dict) else None
    if isinstance(ui, dict) and ui.get("visibility") == ["app"]:
        return "it is for an app, not for the model"
    return None


def model_tools(tools: Sequence[Tool]) -> list[ToolParam]:
    """Anthropic tool definitions for the tools the model may call: name, description, input schema."""
    return [
        {
            "name": tool.name,
            "description": tool.description or tool.title or tool.name,
            "input_schema": cast(Any, tool.input_schema),
        }
        for tool in tools
        if withheld(tool) is None
    ]


def changes_things(tool: Tool) -> bool:
    """Whether calling ``tool`` may change something, as its MCP annotations say.

    Conservative, as the MCP defaults are: a tool that does not say ``readOnlyHint: true`` (no
    annotations at all included), or that says ``destructiveHint: true``, is a change tool.
    """
    hints = tool.annotations
    if hints is None:
        return True
    return hints.read_only_hint is not True or hints.destructive_hint is True


def change_tools(tools: Sequence[Tool]) -> frozenset[str]:
    """The names of the tools that may change something (``changes_things``)."""
    return frozenset(tool.name for tool in tools if changes_things(tool))


def for_the_model(tool: Tool) -> bool:
    """Whether a host shows ``tool`` to the model: not when MCP Apps marks it app-only
    (``_meta.ui.visibility`` without ``"model"``, such as the card view's ``decide_card``)."""
    ui = (tool.meta or {}).get("ui")
    visibility = ui.get("visibility") if isinstance(ui, dict) else None
    return not isinstance(visibility, list) or "model" in visibility


async def list_all_tools(client: Client) -> list[Tool]:
    """Every tool the server lists for the model (app-only tools are the views' own, never the model's)."""
    tools: list[Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.extend(tool for tool in page.tools if for_the_model(tool))
        cursor = page.next_cursor
        if not cursor:
            return tools


def tool_result_block(tool_use_id: str, result: CallToolResult) -> Block:
    text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content)
    block: Block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": [{"type": "text", "text": text}]}
    if result.is_error:
        block["is_error"] = True
    return block


def _assistant_blocks(message: Message) -> list[Block]:
    blocks: list[Block] = []
    for block in message.content:
        if block.type == "text":
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        elif block.type == "tool_use":
            blocks.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
        else:
            blocks.append(block.model_dump(mode="json", exclude_none=True))
    return blocks


def outcome_line(result: CallToolResult, *, change: bool) -> str | None:
    """What a change tool really did, said by the chat itself (not by the model)."""
    data = result.structured_content
    if result.is_error:
        return "  ✗ refused, nothing changed" if change else None
    if not isinstance(data, dict) or "changed" not in data or "status" not in data:
        return None
    card = data.get("card") or {}
    if data["changed"]:
        return f"  ✓ executed: card {short(card.get('id'))} — Door accepted the change"
    return f"  · {short(data['status'])}: card {short(card.get('id'))} — nothing changed"


class ModelChat:
    """One conversation with the model. ``messages`` is the committed, always consistent history."""

    def __init__(
        self,
        anthropic_client: AsyncAnthropic,
        mcp: Client,
        terminal: Terminal,
        *,
        model: str,
        system: str,
        tools: list[ToolParam],
        changes: frozenset[str],
        max_tokens: int = 4096,
        max_rounds: int = 12,
    ) -> None:
        self.anthropic = anthropic_client
        self.mcp = mcp
        self.terminal = terminal
        self.model = model
        self.system = system
        self.tools = tools
        self.declared = {t["name"]: _declared_arguments(t) for t in tools}
        self.changes = changes  # the tools whose annotations say they may change something
        self.max_tokens = max_tokens
        self.max_rounds = max_rounds
        self.messages: list[MessageParam] = []
        self._pending: list[Block] | None = None
        self._results: list[Block] = []
        self._changes_called = False  # a change tool was called in the running turn
        self._mid_line = False  # streamed text has not ended its line yet

    async def turn(self, text: str) -> None:
        import anthropic  # loaded already: this chat was given a client of it

        pending: list[Block] = [dict(m) for m in self.messages]
        pending.append({"role": "user", "content": [{"type": "text", "text": text}]})
        self._pending = pending
        self._results = []
        self._changes_called = False
        try:
            for _ in range(self.max_rounds):
                message = await self._stream(pending)
                pending.append({"role": "assistant", "content": _assistant_blocks(message) or [_text("(no answer)")]})
                uses = [b for b in message.content if b.type == "tool_use"]
                if message.stop_reason != "tool_use" or not uses:
                    if message.stop_reason == "max_tokens":
                        self.terminal.line("  (the answer was cut at the token limit)")
                    break
                self._results = []
                for use in uses:
                    self._results.append(await self._call(use.id, use.name, dict(use.input or {})))
                pending.append({"role": "user", "content": list(self._results)})
                self._results = []
            else:
                self.terminal.line(f"  (stopped after {self.max_rounds} tool rounds in one turn)")
                pending.append({"role": "assistant", "content": [_text("[I stopped: too many tool rounds.]")]})
        except anthropic.APIError as error:
            if self._mid_line:  # the answer was cut while it streamed
                self.terminal.line()
                self._mid_line = False
            done = (
                "Only the changes marked ✓ executed above were made"
                if self._changes_called
                else "No change was made in this turn"
            )
            self.terminal.line(
                f"  ✗ the model could not answer: {describe_api_error(error)}. {done}; the conversation goes on "
                "(try again, or leave and run maya-tools chat --offline)."
            )
            self.abandon(UNREACHABLE.format(error=type(error).__name__))
            return
        self.messages = cast("list[MessageParam]", pending)
        self._pending = None

    def abandon(self, note: str = INTERRUPTED) -> None:
        """Commit what the cut-short turn really did, and nothing it did not.

        Every ``tool_use`` gets its ``tool_result`` (the real one if it came back, else "interrupted,
        outcome unknown"), and the turn ends with an assistant note, so the next request is valid
        and the model knows the turn was cut short.
        """
        pending = self._pending
        if pending is None:
            return
        self._pending = None
        last = pending[-1]
        if last["role"] == "assistant":
            uses = [b for b in last["content"] if b.get("type") == "tool_use"]
            if uses:
                done = {r["tool_use_id"]: r for r in self._results}
                answers = [done.get(u["id"]) or _refused(u["id"], CUT_SHORT) for u in uses]
                pending.append({"role": "user", "content": answers})
            else:
                last["content"] = [*last["content"], _text(note)]
                self.messages = cast("list[MessageParam]", pending)
                return
        pending.append({"role": "assistant", "content": [_text(note)]})
        self.messages = cast("list[MessageParam]", pending)
        self._results = []

    async def _stream(self, pending: list[Block]) -> Message:
        started = False
        async with self.anthropic.messages.stream(
            model=self.model,
            max_tokens=self.max_tokens,
            system=self.system,
            messages=cast("list[MessageParam]", pending),
            tools=self.tools,
        ) as stream:
            async for event in stream:
                if event.type == "text":
                    if not started:
                        self.terminal.write("maya › ")
                        started = self._mid_line = True
                    self.terminal.write(event.text)
            message = await stream.get_final_message()
        if started:
            self.terminal.line()
            self._mid_line = False
        return message

    async def _call(self, tool_use_id: str, name: str, arguments: dict[str, Any]) -> Block:
        self.terminal.line(call_line(name, arguments))
        declared = self.declared.get(name)
        if declared is None:
            self.terminal.line("  ✗ not a tool offered to the model; not called")
            return _refused(tool_use_id, f"There is no tool {name!r}. Use only the tools you were given.")
        # The server would ignore an undeclared argument; refusing it keeps a made-up `confirm: true`
        # from looking as if it meant something (DESIGN.md "Approval: what must hold", 1).
        undeclared = sorted(set(arguments) - declared)
        if undeclared:
            self.terminal.line(f"  ✗ {short(name)} has no argument {short(', '.join(undeclared), 200)}; not called")
            return _refused(
                tool_use_id,
                f"{name} takes no argument {', '.join(undeclared)}; it was not called. Use only the arguments "
                "in its input schema. No argument approves a card: the person approves it in their client.",
            )
        change = name in self.changes
        self._changes_called = self._changes_called or change
        try:
            result = await self.mcp.call_tool(name, arguments, progress_callback=ProgressLines(self.terminal))
        except MCPError as error:
            self.terminal.line(f"  ✗ {short(error, 400)}")
            return _refused(tool_use_id, f"The tool call failed: {error}")
        said = outcome_line(result, change=change)
        if said:
            self.terminal.line(said)
        return tool_result_block(tool_use_id, result)


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


def _refused(tool_use_id: str, text: str) -> Block:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "is_error": True, "content": [_text(text)]}


def _declared_arguments(tool: ToolParam) -> frozenset[str]:
    schema = cast(dict[str, Any], tool["input_schema"] or {})
    return frozenset(schema.get("properties") or {})


def describe_api_error(error: anthropic.APIError) -> str:
    import anthropic

    if isinstance(error, anthropic.AuthenticationError):
        return "the API key was refused (check ANTHROPIC_API_KEY)"
    if isinstance(error, anthropic.APIConnectionError):
        return "no connection to the Anthropic API"
    status = getattr(error, "status_code", None)
    return f"{type(error).__name__}{f' ({status})' if status else ''}"
