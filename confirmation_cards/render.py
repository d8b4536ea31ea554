"""Cards as text and Markdown, from the templates in ``templates/`` (DESIGN.md property 8).

Every string that came from Door or from the person asking (names, labels, tags, messages) passes
``safe_text`` before it reaches a card: control and format characters go, the length is capped, and
Markdown and HTML specials are escaped. Names this package writes itself (field names, rule ids)
pass ``ident`` instead, which shows a plain identifier as written and escapes anything else. The same escaping applies to the text rendering, because the
hosts that show it (chat clients, IDE panes) usually render it as Markdown anyway; a label must not
become a link, a button or an instruction in either.
"""

from __future__ import annotations

import json
import re
import unicodedata
from datetime import UTC, datetime
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from confirmation_cards.models import Card

NAME_LIMIT = 64
MESSAGE_LIMIT = 400
MAP_ENTRIES = 8

# Backslash escapes for the Markdown punctuation that can start markup inside a line (values are
# always inline, inside quotes, so list and heading markers at a line start cannot occur); `&`, `<`
# and `>` become entities instead, so no HTML tag or entity in a label can ever pass through raw.
# Parentheses are left alone: they only make a link or an image after `]`, which is always escaped,
# and escaping them put backslashes into every plain-text card a person reads (the elicitation).
_MARKDOWN = re.compile(r"([\\`*_\[\]#|!~])")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# Cc: control (newlines, escapes), Cf: format (bidi overrides, zero-width), Zl/Zp: line separators.
_STRIP = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs"})


def clean_text(value: object, limit: int = NAME_LIMIT) -> str:
    """One line, no invisible characters, at most ``limit`` characters (the last one "…" when cut)."""
    text = "".join(" " if unicodedata.category(ch) in _STRIP else ch for ch in str(value))
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def safe_text(value: object, limit: int = NAME_LIMIT) -> str:
    """``clean_text`` with Markdown and HTML specials escaped: safe inside quotes in either rendering."""
    text = "".join(_HTML.get(ch, ch) for ch in clean_text(value, limit))
    return _MARKDOWN.sub(r"\\\1", text)


# Names this package writes itself (card fields, rule ids): words joined by single `_` or `-`, which
# cannot open Markdown emphasis (an intraword `_` is literal) nor any other markup.
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[_-][A-Za-z0-9]+)*")


def ident(value: object) -> str:
    """A name we wrote (``auto_scale``, ``R-PATCH-04``) as it is; anything else goes through ``safe_text``."""
    text = str(value)
    return text if len(text) <= NAME_LIMIT and _IDENTIFIER.fullmatch(text) else safe_text(text)


def code(value: object, limit: int = MESSAGE_LIMIT) -> str:
    """For inside a code span, where backslash escapes do not work: ``clean_text`` without backticks."""
    return clean_text(value, limit).replace("`", "'")


def quoted(text: str) -> str:
    return f"“{text}”"


def show(value: Any) -> str:
    """A diff value in words: none, true/false, numbers, quoted strings, and maps of quoted strings."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = sorted(value.items())
        shown = [f"{quoted(safe_text(k))}: {show(v)}" for k, v in items[:MAP_ENTRIES]]
        if len(items) > MAP_ENTRIES:
            shown.append(f"… {len(items) - MAP_ENTRIES} more")
        return "{" + ", ".join(shown) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(show(v) for v in value[:MAP_ENTRIES]) + "]"
    return quoted(safe_text(value))


def json_block(body: dict[str, Any]) -> str:
    """The exact request body as a fenced JSON block.

    The JSON is the body that is sent (same values); ``<``, ``>`` and ``&`` are written as \\u escapes
    and non-ASCII as \\u escapes too, so nothing in it can read as HTML or hide a character, and the
    fence is longer than any backtick run inside so the body cannot close it.
    """
    text = json.dumps(body, indent=2, sort_keys=True, ensure_ascii=True)
    for ch in "<>&":
        text = text.replace(ch, f"\\u{ord(ch):04x}")
    runs = [len(run) for run in re.findall(r"`+", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}json\n{text}\n{fence}"


def when(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def amount(value: float | None, unit: str = "") -> str:
    if value is None:
        return "unknown"
    return f"{value:g}{unit}" if isinstance(value, float) else f"{value}{unit}"


def money(value: float) -> str:
    return f"{value:.2f}"


def signed(value: float) -> str:
    return f"{value:+.2f}"


def environment() -> Environment:
    """The one Environment every card template is loaded through."""
    env = Environment(
        loader=PackageLoader("confirmation_cards", "templates"),
        undefined=StrictUndefined,
        # Only an HTML template would be autoescaped; Markdown and text escape through safe_text.
        autoescape=select_autoescape(enabled_extensions=("html", "html.j2"), default=False),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        safe_text=safe_text,
        ident=ident,
        code=code,
        quoted=quoted,
        show=show,
        json_block=json_block,
        when=when,
        amount=amount,
        money=money,
        signed=signed,
    )
    env.globals.update(message_limit=MESSAGE_LIMIT)
    return env


ENVIRONMENT = environment()


def render_text(card: Card) -> str:
    """The card as plain text (the text content of an MCP tool result)."""
    return ENVIRONMENT.get_template("card.txt.j2").render(card=card)


def render_markdown(card: Card) -> str:
    """The card as Markdown (an elicitation message, a chat message, the approval page)."""
    return ENVIRONMENT.get_template("card.md.j2").render(card=card)
