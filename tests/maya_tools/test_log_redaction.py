"""The record factory ``serve`` installs: every shape a page link can take in a log record is redacted,
and what is not a page link is left as it was (the live test is ``test_http_logs.py``)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
from uvicorn.logging import AccessFormatter

from maya_tools.channels.page import PATH
from maya_tools.log_redaction import install

SECRET = "hut52gty9V4XyKerJbnfd6sTWKbG57zihTSwlYIDmHo"
LINK = f"/approve/card_nuVjJOoLPgalX25Y/{SECRET}"


@pytest.fixture
def log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    before = logging.getLogRecordFactory()
    install(PATH)
    install(PATH)  # idempotent: one wrapper, not two
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("tests.redaction")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield logger, out
    finally:
        logger.removeHandler(handler)
        logging.setLogRecordFactory(before)


@pytest.mark.parametrize(
    ("message", "args"),
    [
        ('%s - "%s %s HTTP/%s" %d', ("127.0.0.1:1", "GET", LINK + "?via=r1", "1.1", 200)),
        ("opened %s", (f"http://127.0.0.1:8765{LINK}",)),
        ("split %s%s", ("/approve", f"/card_x/{SECRET}")),
        ("encoded %s", (LINK.replace("/", "%2F"),)),
        ("bare prefix %s", (f"/approve?secret={SECRET}",)),
        ("a query credential %s", (f"/mcp?token={SECRET}&via=r1",)),
        (f"in the format itself: {LINK}", ()),
        (
            "chunk: %r",
            (f'data: {{"_meta":{{"maya-tools/approval":{{"cardId":"c1","secret":"{SECRET}"}}}}}}'.encode(),),
        ),
        ("nested %s", (f'{{"text": "{{\\"secret\\": \\"{SECRET}\\"}}"}}',)),
    ],
    ids=["access log", "url", "split", "percent-encoded", "bare prefix", "query", "format", "json", "nested json"],
)
def test_a_page_link_is_redacted_wherever_it_is_in_the_record(
    log: tuple[logging.Logger, io.StringIO], message: str, args: tuple[object, ...]
) -> None:
    logger, out = log
    logger.info(message, *args)
    assert SECRET not in out.getvalue() and "card_" not in out.getvalue()
    assert "…" in out.getvalue()


def test_a_traceback_naming_the_link_is_redacted(log: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = log
    try:
        raise ValueError(f"no page at {LINK}")
    except ValueError:
        logger.exception("page failed")
    assert "ValueError: no page at /approve/…" in out.getvalue() and SECRET not in out.getvalue()


def test_uvicorns_access_formatter_still_reads_the_redacted_arguments(log: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = log
    logger.handlers[0].setFormatter(AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s'))
    logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:1", "POST", LINK, "1.1", 200)
    logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:1", "POST", "/mcp", "1.1", 202)
    assert out.getvalue().splitlines() == [
        '127.0.0.1:1 - "POST /approve/… HTTP/1.1" 200 OK',
        '127.0.0.1:1 - "POST /mcp HTTP/1.1" 202 Accepted',
    ]


def test_what_is_not_a_page_link_is_left_alone(log: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = log
    logger.info("%s approved %s on the approval page at %s", "tok_91c16f0d6cc1bec3", "card_x", "/approvers")
    assert out.getvalue() == "tok_91c16f0d6cc1bec3 approved card_x on the approval page at /approvers\n"
