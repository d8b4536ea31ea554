"""No approval secret in any log line: the approval page's link (``/approve/<card id>/<secret>``)
approves a card, so whoever reads a log must not find it there (DESIGN.md: "the link and the app
secret never appear in a tool result, a card read or a log").

``install`` wraps the process's log record factory, so the redaction holds for every logger and
every handler alike: uvicorn's access log (``"GET /approve/… HTTP/1.1" 200``), its error log,
the SDK's loggers at DEBUG, ours, and any handler configured later. A record is redacted when it
is made, before any filter or formatter sees it: everything after the page's prefix, a query on
the bare prefix, and the value of any query parameter or JSON string field named like a credential
become ``…``. The last is for the MCP Apps card's one-time secret (``"secret": "…"`` in a result's
``_meta`` and in ``decide_card``'s arguments), which the SSE layer logs with whole frames at DEBUG.
"""

from __future__ import annotations

import logging
import re
from typing import Any

MARK = "…"
_CREDENTIAL_NAMES = r"access_token|token|secret|code|key|password|sig|signature|csrf|state"


def pattern(prefix: str) -> re.Pattern[str]:
    """What is redacted: the page's paths (plain or percent-encoded slashes), credential queries and JSON fields."""
    name = re.escape(prefix.strip("/"))
    slash = r"(?:/|%2[fF])"
    quote = r'\\*"'  # a JSON quote, escaped as often as the JSON was nested in a string
    return re.compile(
        rf"(?P<page>{slash}{name}(?:{slash}|\?))[^\s\"'<>]*"
        rf"|(?P<query>[?&](?:{_CREDENTIAL_NAMES})=)[^&\s\"'<>]*"
        rf"|(?P<json>{quote}(?:{_CREDENTIAL_NAMES}){quote}\s*:\s*{quote})[^\"\\]*",
        re.IGNORECASE,
    )


def redact(text: str, found: re.Pattern[str]) -> str:
    return found.sub(lambda m: (m.group("page") or m.group("query") or m.group("json")) + MARK, text)


def install(prefix: str) -> None:
    """Redact the page's secrets from every log record this process makes from now on (idempotent)."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "redacts", None) == prefix:
        return
    found = pattern(prefix)

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _scrub(record, found)
        return record

    factory.redacts = prefix  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


def _scrub(record: logging.LogRecord, found: re.Pattern[str]) -> None:
    # Each string argument is redacted in place, so a formatter that reads ``record.args`` by
    # position (uvicorn's AccessFormatter) still works; a target split between the format and
    # its arguments is caught on the whole message and the record collapsed to that text.
    if isinstance(record.args, tuple):
        record.args = tuple(redact(a, found) if isinstance(a, str) else a for a in record.args)
    if isinstance(record.msg, str):
        record.msg = redact(record.msg, found)
    try:
        message = record.getMessage()
    except Exception:  # a malformed record is logging's to report, not ours
        return
    cleaned = redact(message, found)
    if cleaned != message:
        record.msg, record.args = cleaned, None
    if record.exc_info and record.exc_info[0] is not None:
        text = logging.Formatter().formatException(record.exc_info)
        if redact(text, found) != text:  # else the handler's own formatter renders it, as usual
            record.exc_text = redact(text, found)
    if record.stack_info:
        record.stack_info = redact(record.stack_info, found)
