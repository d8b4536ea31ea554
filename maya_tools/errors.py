"""The MCP edge of the error tree: every anticipated failure becomes a ``ToolError`` a person can act on."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager

from mcp.server.mcpserver.exceptions import ToolError

from backend_client.errors import DoorError
from confirmation_cards import PreflightError

SHOWN_RUN = 80  # a value echoed in an error is cut to about this many characters
SHOWN_URL = 300  # a URL is one run too, and worth more of its length
MESSAGE_MAX = 2_000
_LONG_RUN = re.compile(rf"\S{{{SHOWN_RUN + 1},}}")
# Cc (escapes, carriage returns), Cf (bidi overrides, zero-width), line and paragraph separators,
# private use and surrogates: nothing a person or a model should be handed raw.
_INVISIBLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs"})


def _shorten(match: re.Match[str]) -> str:
    run = match.group()
    keep = SHOWN_URL if run.startswith(("http://", "https://")) else SHOWN_RUN
    return run if len(run) <= keep else run[: keep - 10] + "…" + run[-9:]


def bounded(message: str) -> str:
    """An error sentence fit for a model, a person and a log line, whatever it echoes.

    Our own sentences are words; a run of more than ``SHOWN_RUN`` characters without a space can
    only be a value echoed back (a name, a card id, a label): it keeps its start and its last
    characters (a closing quote), so a megabyte pool name costs 80 characters. Control and format
    characters become spaces (newlines stay), and the whole stays under ``MESSAGE_MAX``, keeping
    its end, which says what to do.
    """
    text = _LONG_RUN.sub(_shorten, message)
    if len(text) > MESSAGE_MAX:
        text = text[: MESSAGE_MAX - 600] + " … " + text[-597:]
    return "".join(ch if ch == "\n" or unicodedata.category(ch) not in _INVISIBLE else " " for ch in text)


@contextmanager
def door_errors() -> Iterator[None]:
    """Turn Door refusals and preflight refusals into the sentence the model reads.

    The messages come from ``DoorError.__str__`` and ``PreflightError.__str__``: they name the
    rule, the field and what to do, and never hold a token. Anything else is a bug and propagates.
    """
    try:
        yield
    except PreflightError as exc:
        raise ToolError(f"Refused before any change (no card was made): {exc}") from exc
    except DoorError as exc:
        raise ToolError(str(exc)) from exc
