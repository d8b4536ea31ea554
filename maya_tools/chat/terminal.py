"""The person's side of ``maya-tools chat``: a line reader, an output stream, Ctrl-C, and approval.

Approval lives here and nowhere else in the chat. ``ApprovalPrompt`` is the MCP elicitation handler:
it shows the card the server sent and reads y/N from the person at the terminal. The model never
sees that question or its answer (only the tool's result), and no tool or argument it can produce
approves a card (DESIGN.md "Approval: what must hold", 1).
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
import textwrap
import unicodedata
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import FrameType
from typing import Any, Protocol, TextIO

import anyio
from mcp.client.session import ClientRequestContext
from mcp_types import ElicitRequestFormParams, ElicitRequestParams, ElicitResult

YES = frozenset({"y", "yes"})
NO = frozenset({"", "n", "no"})
BAR = "─" * 78
SHOWN = 80  # a value from Door or the model, printed inside a line, is cut to this many characters
FORM_SENTENCE = "Approve this change?"
"""How the server's form message begins its last paragraph, the instruction for form renderers."""
CARD_SHOWN = 16_000  # a card (the server bounds it to 8 KB; this chat does not rely on that)
CARD_COMMAND = "/card"
CARD_ID = re.compile(r"\bCard (card_[A-Za-z0-9_-]{1,64}), expires ")
"""How the form message names its card: the whole card is read by that id (``get_card``)."""
EXACT_REQUEST = "\nExact request"
"""Where the text card's exact request begins: shown by ``/card``, not at the [y/N] question."""
# Cc (escapes, carriage returns, bells), Cf (bidi overrides, zero-width), line and paragraph
# separators, private use and surrogates.
_INVISIBLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs"})


def printable(text: str) -> str:
    """``text`` with every control and format character but the newline shown as a visible escape
    (``\\x1b``), so nothing Door or the model wrote can move the cursor, clear the screen, retitle
    the window or reorder what the person reads. A tab becomes a space."""
    if text.isprintable():
        return text
    out: list[str] = []
    for ch in text:
        if ch == "\n" or unicodedata.category(ch) not in _INVISIBLE:
            out.append(ch)
        elif ch == "\t":
            out.append(" ")
        else:
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
    return "".join(out)


def short(value: object, limit: int = SHOWN) -> str:
    """A value for inside a line: at most ``limit`` characters, the last one "…" when cut."""
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def discard_typeahead() -> None:
    """Drop what was typed at the terminal but not read yet (a tty only; elsewhere nothing)."""
    try:
        import termios

        if sys.stdin.isatty():
            termios.tcflush(sys.stdin, termios.TCIFLUSH)
    except (ImportError, OSError, ValueError):
        pass


class Terminal:
    """Reads lines with ``read`` (``input`` by default) and writes to ``out`` (stdout by default).

    ``read`` may raise ``KeyboardInterrupt`` (Ctrl-C) or ``EOFError`` (Ctrl-D); tests pass a
    scripted function. ``discard`` drops type-ahead before a question that must be answered fresh
    (``ask(..., fresh=True)``). ``interrupt()`` abandons the turn that is running, if any.
    """

    def __init__(
        self,
        read: Callable[[str], str] = input,
        out: TextIO | None = None,
        discard: Callable[[], None] = discard_typeahead,
    ) -> None:
        self._read = read
        self._discard = discard
        self.out = out if out is not None else sys.stdout
        self.reading = False
        self.turn: anyio.CancelScope | None = None
        self.queued: deque[str] = deque()  # requests typed at a card's [y/N] question, to be handled next

    def write(self, text: str) -> None:
        """Everything the chat prints passes here, so nothing reaches the terminal raw (``printable``)."""
        self.out.write(printable(text))
        self.out.flush()

    def line(self, text: str = "") -> None:
        self.write(text + "\n")

    def ask(self, prompt: str, *, fresh: bool = False) -> str:
        """One line from the person. Blocks on purpose: only a read in the main thread can be
        interrupted by Ctrl-C, and nothing else needs to run while the person is typing.

        ``fresh``: first drop anything typed before the question was shown, so a line typed ahead
        (while Maya was still streaming) cannot answer it."""
        if fresh:
            self._discard()
        self.reading = True
        try:
            return self._read(prompt)
        finally:
            self.reading = False

    def interrupt(self) -> None:
        """Abandon the running turn (what Ctrl-C does while Maya is working)."""
        if self.turn is not None:
            self.turn.cancel()


@contextmanager
def ctrl_c_abandons_turns(terminal: Terminal) -> Iterator[None]:
    """While the chat runs, Ctrl-C during a turn cancels that turn instead of ending the program.

    At a prompt it still raises ``KeyboardInterrupt`` inside ``input()``, which the chat handles.
    Only in the main thread on asyncio; elsewhere Ctrl-C keeps its default meaning.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is None or not hasattr(signal, "SIGINT"):
        yield
        return

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if terminal.reading or terminal.turn is None:
            raise KeyboardInterrupt
        loop.call_soon_threadsafe(terminal.interrupt)  # signal-safe: runs on the loop, not mid-callback

    try:
        previous: Any = signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class ProgressLines:
    """A tool call's MCP progress notifications, one line each as they come (a plan's steps and its
    new workers, after the person approved it); a message the same as the one before is not repeated."""

    def __init__(self, terminal: Terminal) -> None:
        self.terminal = terminal
        self.said: str | None = None

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        if not message or message == self.said:
            return
        self.said = message
        self.terminal.line(f"  ⋯ {short(message, 200)}")


def call_line(tool: str, arguments: Mapping[str, Any]) -> str:
    """The line the chat shows for each tool call, before it is made."""
    shown = ", ".join(f"{short(k)}={short(json.dumps(v))}" for k, v in arguments.items())
    return f"  → {tool}({shown})"


class CardReader(Protocol):
    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any: ...


async def whole_card(client: CardReader | None, card_id: str) -> str | None:
    """The card as the server writes it in plain text (``get_card``'s ``text``), or None when it cannot be read."""
    if client is None:
        return None
    try:
        result = await client.call_tool("get_card", {"card_id": card_id})
    except Exception:  # any failure falls back to the form message, which the server sent
        return None
    data = getattr(result, "structured_content", None)
    text = data.get("text") if isinstance(data, dict) and not getattr(result, "is_error", False) else None
    return text if isinstance(text, str) else None


class ApprovalPrompt:
    """The chat's MCP elicitation handler: show the card, ask the person y/N, answer the server.

    Only ``y`` or ``yes`` typed after the card is shown approves (type-ahead is dropped); ``n``,
    ``no``, an empty line or Ctrl-D declines. Any other line declines too, and is queued on the
    terminal (``Terminal.queued``) as the person's next request, so a new request typed at the
    question is not lost. Ctrl-C at the question cancels the card and abandons the turn. A form
    other than the maya-tools ``Confirm`` form, or a URL elicitation, is declined: this chat
    approves cards and nothing else.
    """

    def __init__(self, terminal: Terminal, client: CardReader | None = None) -> None:
        self.terminal = terminal
        self.client = client  # set once connected: the whole card is read through it
        self.shown: list[str] = []
        self.answers: list[str] = []
        self.last_card: str | None = None

    async def __call__(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        t = self.terminal
        if not isinstance(params, ElicitRequestFormParams) or not _is_confirm_form(params.requested_schema):
            t.line("  (the server asked for something other than a card approval; declined)")
            self.answers.append("decline")
            return ElicitResult(action="decline")
        self.shown.append(params.message)
        named = CARD_ID.search(params.message)
        self.last_card = named.group(1) if named else None
        whole = await whole_card(self.client, self.last_card) if self.last_card else None
        card = without_form_sentence(params.message)
        if whole is not None:  # the whole card, not the short form a small dialog needs
            card = whole.split(EXACT_REQUEST, 1)[0].rstrip() + "\n\nThe exact request and its digest: type /card."
        t.line(BAR)
        t.line(textwrap.indent(short(card.rstrip(), CARD_SHOWN), "  │ ", lambda _: True))
        t.line(BAR)
        try:
            said = t.ask("Approve this change? Only you can, here. [y/N] ", fresh=True)
            while said.strip().lower() == CARD_COMMAND:  # the exact request, then the same question again
                await self.show_card()
                said = t.ask("Approve this change? Only you can, here. [y/N] ", fresh=True)
        except EOFError:  # Ctrl-D: the cursor is still on the question's line
            t.line()
            said = ""
        except KeyboardInterrupt:
            t.line("\n  · cancelled: nothing was approved.")
            self.answers.append("cancel")
            t.interrupt()
            return ElicitResult(action="cancel")
        if said.strip().lower() in YES:
            t.line("  ✓ you approved this card")
            self.answers.append("accept")
            return ElicitResult(action="accept", content={"approve": True})
        if said.strip().lower() in NO:
            t.line("  · you declined this card")
        else:
            t.line(f"  · you declined this card (only y approves); next I take “{short(said.strip())}” as your request")
            t.queued.append(said.strip())
        self.answers.append("decline")
        return ElicitResult(action="decline")

    async def show_card(self, card_id: str | None = None) -> None:
        """``/card``: the whole card as text, its exact request and digest included (the last card asked
        about, or ``card_id``)."""
        wanted = card_id or self.last_card
        if wanted is None:
            self.terminal.line("  (no card yet: /card shows the last card you were asked about, or /card <card id>)")
            return
        whole = await whole_card(self.client, wanted)
        if whole is None:
            self.terminal.line(f"  (card {short(wanted)} could not be read; ask Maya to show it)")
            return
        self.terminal.line(BAR)
        self.terminal.line(textwrap.indent(short(whole.rstrip(), CARD_SHOWN), "  │ ", lambda _: True))
        self.terminal.line(BAR)


def without_form_sentence(message: str) -> str:
    """The card without the form's closing paragraph ("Approve this change? Tick approve and accept…"),
    which tells a form renderer's user how to answer its form: this chat asks its own [y/N] instead.
    Only a last paragraph that is that question goes; the server writes every name on one line, so
    nothing Door wrote can make a paragraph of its own."""
    card, _, last = message.rstrip().rpartition("\n\n")
    return card if card and last.startswith(FORM_SENTENCE) else message


def _is_confirm_form(schema: Any) -> bool:
    """The maya-tools ``Confirm`` form: a single boolean ``approve`` field."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return (
        isinstance(properties, dict)
        and set(properties) == {"approve"}
        and isinstance(properties["approve"], dict)
        and properties["approve"].get("type") == "boolean"
    )
