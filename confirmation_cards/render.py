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

from confirmation_cards.actions import ACTIONS
from confirmation_cards.models import Card

NAME_LIMIT = 64
MESSAGE_LIMIT = 400
MAP_ENTRIES = 8
# However many labels a pool carries and however they escape, one map in a diff or in the shown
# body costs at most about this many bytes, so a card stays a few KB (the elicitation a person reads).
MAP_SHOWN_BYTES = 600
BODY_SHOWN = 1_500  # a body whose JSON is longer is shown abridged (the digest still binds the exact body)

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


def _more(shown: list[str], total: int) -> list[str]:
    return [*shown, f"… and {total - len(shown)} more"] if total > len(shown) else shown


def show(value: Any) -> str:
    """A diff value in words: none, true/false, numbers, quoted strings, and maps of quoted strings.

    A map shows its first entries (by key) up to ``MAP_ENTRIES`` and ``MAP_SHOWN_BYTES``, then how
    many more there are.
    """
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
        shown: list[str] = []
        used = 0
        for k, v in items[:MAP_ENTRIES]:
            entry = f"{quoted(safe_text(k))}: {show(v)}"
            used += len(entry.encode()) + 2
            if shown and used > MAP_SHOWN_BYTES:
                break
            shown.append(entry)
        return "{" + ", ".join(_more(shown, len(items))) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_more([show(v) for v in value[:MAP_ENTRIES]], len(value))) + "]"
    return quoted(safe_text(value))


def brief(value: Any, limit: int = MESSAGE_LIMIT) -> str:
    """A value as compact JSON on one clean line, capped: for the HTML card, which autoescapes it."""
    if value is None:
        return "none"
    return clean_text(json.dumps(value, sort_keys=True, ensure_ascii=False), limit)


def _dumps(value: Any, **indent: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=True, **indent)


def _abridged(body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The body with strings cut to ``NAME_LIMIT`` and each map cut to ``MAP_SHOWN_BYTES`` of JSON,
    and how many map entries were left out."""

    def cut(text: str) -> str:
        return text if len(text) <= NAME_LIMIT else text[: NAME_LIMIT - 1] + "…"

    left = 0
    short: dict[str, Any] = {}
    for key, value in body.items():
        if isinstance(value, str):
            short[key] = cut(value)
        elif isinstance(value, dict):
            kept: dict[str, Any] = {}
            used = 0
            for k, v in sorted(value.items())[:MAP_ENTRIES]:
                entry = {cut(k): cut(v) if isinstance(v, str) else v}
                used += len(_dumps(entry))
                if kept and used > MAP_SHOWN_BYTES:
                    break
                kept.update(entry)
            left += len(value) - len(kept)
            short[key] = kept
        else:
            short[key] = value
    return short, left


def json_block(body: dict[str, Any]) -> str:
    """The exact request body as a fenced JSON block.

    The JSON is the body that is sent (same values); ``<``, ``>`` and ``&`` are written as \\u escapes
    and non-ASCII as \\u escapes too, so nothing in it can read as HTML or hide a character, and the
    fence is longer than any backtick run inside so the body cannot close it. A body longer than
    ``BODY_SHOWN`` (hundreds of labels, long values) is shown abridged and says so; the digest shown
    with it is always of the exact body, which the card's ``body`` field holds in full.
    """
    text = _dumps(body, indent=2)
    note = ""
    if len(text) > BODY_SHOWN:
        short, left = _abridged(body)
        text = _dumps(short, indent=2)
        more = f"{left} more map entries left out, " if left else ""
        note = (
            f"\n(Abridged for display: {more}long strings cut to {NAME_LIMIT} characters. The digest is of "
            "the exact body, which the card's `body` field holds in full.)"
        )
    for ch in "<>&":
        text = text.replace(ch, f"\\u{ord(ch):04x}")
    runs = [len(run) for run in re.findall(r"`+", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}json\n{text}\n{fence}{note}"


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
    env.globals["action_title"] = lambda action: ACTIONS[action].title
    env.filters.update(
        safe_text=safe_text,
        clean=clean_text,
        brief=brief,
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
    """The card as Markdown (an elicitation message, a chat message)."""
    return ENVIRONMENT.get_template("card.md.j2").render(card=card)
