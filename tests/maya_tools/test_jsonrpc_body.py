"""``maya_tools.jsonrpc_body.parse``: the one reading of a ``POST /mcp`` body, each refusal by the check
that makes it (the live edge tests, ``tests/maya_tools/auth/test_edge_live.py``, send them to a real
``serve``). A body is taken only when both of the SDK's parsers read it, and alike."""

from __future__ import annotations

import json
from typing import Any

import pytest

import maya_tools.jsonrpc_body as jsonrpc_body
from maya_tools.jsonrpc_body import INVALID_REQUEST, PARSE_ERROR, parse

CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_clusters","arguments":{"x":%s}}}'


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"[" * 2000 + b"]" * 2000, "recursion"),
        (b"[" * 300 + b"]" * 300, "recursion limit"),  # within json's depth, past the 2025-11-25 parser's
        (CALL % b"1e400", "number 1e400 is out of range"),
        (CALL % b"-1e400", "number -1e400 is out of range"),
        (CALL % (b"9" * 10_000), "4300 digits"),
        (CALL % b"NaN", "NaN is not a JSON number"),
        (CALL % b"Infinity", "Infinity is not a JSON number"),
        (CALL % b'"\xff"', "not UTF-8"),
        (CALL % b'"\\ud800"', "hex escape"),  # a lone surrogate: json reads it, the SDK's 2025 parser does not
        (b"\xef\xbb\xbf{}", "not valid JSON"),  # a BOM
        (b"", "not valid JSON"),
    ],
)
def test_a_body_that_is_not_json_is_a_parse_error_saying_why(body: bytes, said: str) -> None:
    read = parse(body)

    assert read.code == PARSE_ERROR and read.error is not None
    assert read.error.startswith("Parse error") and said in read.error, read.error
    assert read.messages == []


@pytest.mark.parametrize(
    ("body", "kind"), [(b"42", "number"), (b'"x"', "string"), (b"null", "null"), (b"true", "boolean")]
)
def test_json_that_is_not_an_object_or_array_is_an_invalid_request(body: bytes, kind: str) -> None:
    read = parse(body)

    assert read.code == INVALID_REQUEST and read.error is not None and f"a JSON {kind}," in read.error


def test_a_message_and_a_batch_are_read() -> None:
    one = parse(CALL % b"1")
    batch = parse(b"[" + CALL % b"1" + b"," + CALL % b"2" + b", 3]")

    assert one.error is None and one.messages[0]["params"]["name"] == "list_clusters"
    assert batch.error is None and [m["params"]["arguments"]["x"] for m in batch.messages] == [1, 2]


def test_a_body_the_sdks_parsers_read_differently_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should the SDK's 2025-11-25 parser ever read a body otherwise than ``json`` does (here: the
    first of two duplicate keys, where ``json`` keeps the last), the scope check would judge another
    call than the one that runs: such a body is refused instead."""

    def first_key_wins(raw: bytes) -> Any:
        return json.loads(raw, object_pairs_hook=lambda pairs: dict(reversed(pairs)))

    monkeypatch.setattr(jsonrpc_body.pydantic_core, "from_json", first_key_wins)
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"scale_node_pool","name":"list_clusters"}}'

    read = parse(body)

    assert read.error is not None and "parsers disagree" in read.error
    assert parse(CALL % b"1").error is None  # a body without duplicates still reads alike
