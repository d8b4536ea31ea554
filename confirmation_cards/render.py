"""Cards as text and Markdown, from the templates in ``templates/`` (DESIGN.md property 8).

Every string that came from Door or from the person asking (names, labels, tags, messages) passes
``safe_text`` before it reaches a card: control and format characters go, the length is capped,
anything that could become a link is defanged, and Markdown and HTML specials are escaped. The HTML
card and plain-text messages use ``clean_text``: the same, without the Markdown escapes (jinja2
autoescapes the HTML). Names this package writes itself (field names, rule ids) pass ``ident``
instead, which shows a plain identifier as written and escapes anything else. The same escaping
applies to the text rendering, because the hosts that show it (chat clients, IDE panes) usually
render it as Markdown anyway; a label must not become a link, a button or an instruction in either.

Links. Escaping Markdown syntax does not stop a bare URL from becoming a link: GitHub autolinks
``https://…``, ``www.…``, ``user@host`` and ``mailto:``/``xmpp:``; markdown-it's linkify and chat
hosts link bare domains of known TLDs (``evil.com``, ``app.kubernetes.io/name``), protocol-relative
``//host`` (``//localhost`` and ``//10.0.0.1`` too) and IPs; a chat client or terminal does so in
plain text. So ``defang`` rewrites, in every Door string outside code, each piece a linkifier needs
in the well-known bracketed form, which stays visible and readable in every renderer:
``https[://]evil[.]example``, ``mailto[:]a[@]b[.]com``, ``[//]localhost``, ``www[.]123``,
``10.0.0[.]1``. (``https[:]//`` would not do: ``//localhost`` after it still links.) Invisible
characters would not do either: they are stripped here, and linkify-it counts many as letters.

- A dot is defanged when the label after it could be a top-level domain: two or more letters (any
  script) not followed by a letter or digit, or punycode ``xn--``. Every such label counts, not a
  list of today's TLDs, because linkifiers differ and new TLDs are delegated (``.zip``, ``.new``);
  only ``NOT_TLDS``, size words of machine tiers, is left alone, so ``dks.m5.large`` stays as Door
  names it (a test checks those words against IANA's list). A TLD never holds a digit, so prices
  (``0.25``), versions (``1.2.3``, ``v1.32``) and tiers like ``dks.c5.2xlarge`` are untouched. A
  label key with a real domain (``app.kubernetes.io/name``) IS a bare domain to linkify-it and
  chat hosts, so it shows as ``app[.]kubernetes[.]io/name``.
- A colon after a scheme-shaped word and before a non-space (``mailto:x``, ``javascript:x``,
  ``key:value``, ``host:8080``); a colon followed by a space (``Door said: no``) or after a number
  (``12:10``) is left alone.
- Code is never linked (CommonMark, GFM), so where the exact request is shown as code (the
  Markdown card's code spans and fenced body, the HTML card's ``<code>`` and ``<pre>``) it is shown
  exactly, as the digest binds it. The text card, which a host may show as plain text, writes the
  body's JSON with ``\\u`` escapes for the defanged characters instead: the same JSON values.

Data the model passes back (the read tools' ``structuredContent``) goes through ``one_line``, the
cleaning without defanging: a node name ``ip-10-0-1-5.eu-west.internal`` must stay callable.
``clean_text`` keeps Markdown syntax, so text a host may render as Markdown takes ``safe_text``:
there ``[Approve](x)`` would still be a link, if only to a relative address.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from confirmation_cards.actions import ACTIONS
from confirmation_cards.approvals import policy_lines
from confirmation_cards.models import Card, CardWarning, FieldChange

if TYPE_CHECKING:
    from jinja2 import Environment

NAME_LIMIT = 64
NAME_SHOWN = 2 * NAME_LIMIT  # a name's length once defanged and escaped, at most
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


# Size words of machine tiers (``dks.m5.large``): not top-level domains, so their dot is kept.
NOT_TLDS = frozenset({"nano", "micro", "small", "medium", "large", "xlarge", "metal"})

# What a linkifier needs, each as the group ``fang`` that ``defang`` neutralises: a scheme's ``://``;
# an opaque scheme's colon; protocol-relative ``//host``; an e-mail's ``@``; ``www.`` (GFM links
# ``www.`` before any domain, digits too); a dot before a possible TLD; the last dot of an IPv4
# address. None matches its own bracketed form, so defanging twice changes nothing. NUL stands
# for a JSON escape (``_defang_json``), shown as ``\\u00e9`` or ``\\n``: a letter before a colon, no
# letter after a TLD.
_FANGS = (
    re.compile(r"(?<!\[)(?P<fang>://)"),
    re.compile(r"(?<![A-Za-z0-9+.\-\0])[A-Za-z\0][A-Za-z0-9+.\-\0]*(?P<fang>:)(?=\S)"),
    re.compile(r"(?<!/)(?P<fang>//+)(?=[^\s/\]])"),
    re.compile(r"(?<=\S)(?P<fang>@)(?=[\w\-\0])"),
    re.compile(r"(?<![^\W_])[Ww]{3}(?P<fang>\.)"),
    # The dots IDNA separates labels with: ASCII, ideographic, fullwidth and halfwidth.
    re.compile(r"(?P<fang>[.\u3002\uff0e\uff61])(?=(?P<label>[Xx][Nn]--[\w-]+|[^\W\d_]{2,})(?![^\W_]))"),
    re.compile(r"(?<![\d.])\d{1,3}\.\d{1,3}\.\d{1,3}(?P<fang>\.)\d{1,3}(?!\d)"),
)


def _bracket(fang: str) -> str:
    return f"[{fang}]"


def _json_escape(fang: str) -> str:
    return "".join("\\/" if ch == "/" else f"\\u{ord(ch):04x}" for ch in fang)


def defang(text: str, mark: Callable[[str], str] = _bracket) -> str:
    """``text`` with every piece that could make a link (see the module docstring) passed through
    ``mark``: bracketed (``evil[.]com``) by default. All patterns read the text as given; pieces
    that overlap are marked as one (``https[://]``), pieces side by side each on their own."""
    spans: list[tuple[int, int]] = []
    for pattern in _FANGS:
        for match in pattern.finditer(text):
            label = match.groupdict().get("label")
            if label is None or label.lower() not in NOT_TLDS:
                spans.append(match.span("fang"))
    out: list[str] = []
    done = marked_from = 0
    for start, end in sorted(spans):
        if start < done:  # overlaps the piece just marked: widen it
            if end > done:
                out[-1] = mark(text[marked_from:end])
                done = end
            continue
        marked_from = start
        out += [text[done:start], mark(text[start:end])]
        done = end
    return "".join(out) + text[done:]


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_ESCAPE = re.compile(r"\\u[0-9a-fA-F]{4}|\\.")


def _defang_json(text: str) -> str:
    """JSON text with each string defanged into JSON escapes: the same values, and what is shown
    (escapes as written) holds no link. An escape already there reads as NUL meanwhile."""

    def literal(match: re.Match[str]) -> str:
        inner = match.group()[1:-1]
        escapes = _JSON_ESCAPE.findall(inner)
        parts = defang(_JSON_ESCAPE.sub("\0", inner), _json_escape).split("\0")
        return '"' + "".join(part + escape for part, escape in zip(parts, [*escapes, ""], strict=True)) + '"'

    return _JSON_STRING.sub(literal, text)


def _line(value: object) -> str:
    text = str(value)
    if text.isascii() and text.isprintable() and "  " not in text and text.strip(" ") == text:
        return text  # printable ASCII (no category in _STRIP) already one line: most of Door's names
    text = "".join(" " if unicodedata.category(ch) in _STRIP else ch for ch in text)
    return " ".join(text.split())


def _cap(text: str, limit: int) -> str:
    return text[: limit - 1] + "…" if len(text) > limit else text


def one_line(value: object, limit: int = NAME_LIMIT) -> str:
    """One line, no invisible characters, at most ``limit`` characters (the last one "…" when cut),
    and otherwise as Door wrote it: for data passed back, and for text shown inside code."""
    return _cap(_line(value), limit)


def clean_text(value: object, limit: int = NAME_LIMIT) -> str:
    """``one_line``, defanged so that nothing in it can become a link (capped after defanging)."""
    return _cap(defang(_line(value)), limit)


def safe_text(value: object, limit: int = NAME_LIMIT) -> str:
    """``clean_text`` with Markdown and HTML specials escaped: safe inside quotes in either rendering."""
    text = "".join(_HTML.get(ch, ch) for ch in clean_text(value, limit))
    return _MARKDOWN.sub(r"\\\1", text)


# Names this package writes itself (card fields, rule ids): words joined by single `_` or `-`, which
# cannot open Markdown emphasis (an intraword `_` is literal) nor any other markup.
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[_-][A-Za-z0-9]+)*")


_INTRAWORD = re.compile(r"(?<=[A-Za-z0-9])\\_(?=[A-Za-z0-9])")


def _escaped(text: str) -> str:
    return _MARKDOWN.sub(r"\\\1", "".join(_HTML.get(ch, ch) for ch in text))


def _shown_name(value: object, escape: Callable[[str], str]) -> str:
    text = one_line(value, NAME_LIMIT)
    shown = escape(defang(text))
    while len(shown) > NAME_SHOWN:  # only a name of Markdown or HTML specials, or of dotted 2-letter labels
        text = text[: max(len(text) - max((len(shown) - NAME_SHOWN) // 5, 1) - 1, 1)] + "…"
        shown = escape(defang(text))
    return shown


def name_text(value: object) -> str:
    """A Door name in a card, defanged and escaped: as Door wrote it unless it is longer than
    ``NAME_LIMIT`` characters (a pool name, a DNS label, is at most 63) or escaping would make it longer
    than ``NAME_SHOWN`` (a name made of specials); then cut, ending in "…"."""
    return _shown_name(value, _escaped)


def name_clean(value: object) -> str:
    """``name_text`` without the Markdown escapes: for the HTML card, which autoescapes."""
    return _shown_name(value, lambda text: text)


def warning_text(warning: CardWarning, *, markdown: bool = True) -> str:
    """A warning whole, its rule in brackets: never cut (the planner bounds each one,
    ``confirmation_cards.warnings.WARNING_MAX``), defanged, and escaped unless for HTML."""
    text = defang(_line(warning.message))
    if markdown:
        # An underscore between letters or digits never starts emphasis (CommonMark, GFM): ``super_admin``.
        text = _INTRAWORD.sub("_", _escaped(text))
    return text + (f" [{ident(warning.rule)}]" if warning.rule else "")


def ident(value: object) -> str:
    """A name we wrote (``auto_scale``, ``R-PATCH-04``) as it is; anything else goes through ``safe_text``."""
    text = str(value)
    return text if len(text) <= NAME_LIMIT and _IDENTIFIER.fullmatch(text) else safe_text(text)


def code(value: object, limit: int = MESSAGE_LIMIT) -> str:
    """For inside a code span, where backslash escapes do not work and nothing is linked: ``one_line``
    without backticks."""
    return one_line(value, limit).replace("`", "'")


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


NODE_REPLACED = "drained and deleted; Door adds a replacement"
# What a new pool takes when the request leaves a field out (R-ADD-06, R-ADD-07): not worth a line.
DEFAULTS: tuple[Any, ...] = (None, False, {})


def words(value: Any, esc: Callable[[object], str] = name_text, *, map_bytes: int = MAP_SHOWN_BYTES) -> str:
    """A diff value in words, no JSON: ``none``, ``true``, numbers, quoted strings, and a map as its
    entries ``“key”=“value”`` (by key, at most ``MAP_ENTRIES`` and about ``map_bytes``, then how many more)."""
    if isinstance(value, dict):
        if not value:
            return "none"
        if map_bytes <= 0:
            return f"{len(value)} entr{'y' if len(value) == 1 else 'ies'}"
        items = sorted(value.items())
        shown: list[str] = []
        used = 0
        for k, v in items[:MAP_ENTRIES]:
            entry = f"{quoted(esc(k))}={words(v, esc)}"
            used += len(entry.encode()) + 2
            if shown and used > map_bytes:
                break
            shown.append(entry)
        return ", ".join(_more(shown, len(items)))
    if isinstance(value, list):
        return ", ".join(_more([words(v, esc) for v in value[:MAP_ENTRIES]], len(value))) or "none"
    if isinstance(value, str):
        return quoted(esc(value))
    return show(value)


def change_words(
    change: FieldChange, esc: Callable[[object], str] = name_text, *, map_bytes: int = MAP_SHOWN_BYTES
) -> tuple[str, str | None, str] | None:
    """A change as (what, before, after) in words; ``before`` is None for a value a new pool takes.
    None for a default a new pool takes or a removed pool had (nothing to read)."""
    before, after = change.before, change.after
    if change.field == "node" and isinstance(before, dict) and isinstance(after, dict):
        status = before.get("status")
        return f"node {esc(before.get('name'))}", esc(status) if status else "unlisted", NODE_REPLACED
    field = ident(change.field) if esc is name_text else esc(change.field)
    if before is None and any(after == d and type(after) is type(d) for d in DEFAULTS):
        return None
    if after is None and any(before == d and type(before) is type(d) for d in DEFAULTS):
        return None
    if before is None:
        return field, None, words(after, esc, map_bytes=map_bytes)
    return field, words(before, esc, map_bytes=map_bytes), words(after, esc, map_bytes=map_bytes)


def change_line(
    change: FieldChange, esc: Callable[[object], str] = name_text, *, map_bytes: int = MAP_SHOWN_BYTES
) -> str:
    """``count: 2 -> 4``, ``size: “dks.c5.large”`` (a new pool's), ``node x: Running -> drained and
    deleted; Door adds a replacement``; empty for a default (``change_words``)."""
    said = change_words(change, esc, map_bytes=map_bytes)
    if said is None:
        return ""
    what, before, after = said
    return f"{what}: {after}" if before is None else f"{what}: {before} -> {after}"


def change_lines(
    card: Card, esc: Callable[[object], str] = name_text, *, map_bytes: int = MAP_SHOWN_BYTES
) -> list[str]:
    return [line for change in card.diff if (line := change_line(change, esc, map_bytes=map_bytes))]


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


def json_block(body: dict[str, Any], *, plain_text: bool = False) -> str:
    """The exact request body as a fenced JSON block.

    The JSON is the body that is sent (same values); ``<``, ``>`` and ``&`` are written as \\u escapes
    and non-ASCII as \\u escapes too, so nothing in it can read as HTML or hide a character, and the
    fence is longer than any backtick run inside so the body cannot close it. A body longer than
    ``BODY_SHOWN`` (hundreds of labels, long values) is shown abridged and says so; the digest shown
    with it is always of the exact body, which the card's ``body`` field holds in full.

    Markdown never links inside the fence; with ``plain_text`` (a rendering a host may show
    unrendered) what ``defang`` would neutralise is written as JSON escapes (``\\u002e``, ``\\/``),
    so the block still parses to the exact body and no plain-text linkifier finds a URL in it.
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
    if plain_text:
        text = _defang_json(text)
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


@functools.cache
def environment() -> Environment:
    """The one Environment every card template is loaded through, made (and jinja2 imported) when the
    first card is rendered: a server that only starts and lists its tools never loads it."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

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
    env.globals["policy_lines"] = policy_lines
    env.filters.update(
        safe_text=safe_text,
        clean=clean_text,
        line=one_line,
        ident=ident,
        code=code,
        quoted=quoted,
        show=show,
        json_block=json_block,
        name=name_text,
        name_clean=name_clean,
        warning=warning_text,
        change_words=change_words,
        when=when,
        amount=amount,
        money=money,
        signed=signed,
    )
    env.globals.update(message_limit=MESSAGE_LIMIT, change_lines=change_lines, name_clean=name_clean)
    return env


def __getattr__(name: str) -> Any:
    # ``ENVIRONMENT``, as callers named it before it was made on first use.
    if name == "ENVIRONMENT":
        return environment()
    raise AttributeError(f"module 'confirmation_cards.render' has no attribute {name!r}")


def render_text(card: Card) -> str:
    """The card as plain text (the text content of an MCP tool result)."""
    return environment().get_template("card.txt.j2").render(card=card)


def render_markdown(card: Card) -> str:
    """The card as Markdown (an elicitation message, a chat message)."""
    return environment().get_template("card.md.j2").render(card=card)
