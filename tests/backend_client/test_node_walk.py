"""The first pages of a node list are found by walking the body's text from its start
(``backend_client.nodes._walked_page``); the page must be exactly the one msgspec's pass over every
worker's raw bytes gives, for any body Door or a proxy may send (R-NODE-01)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend_client import nodes
from backend_client.nodes import node_page

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT | st.sampled_from(['"items"', "],[", "{}", "\\"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
STATUS = st.sampled_from(["Running", "Pending", "Deleting", "Failed", "Hibernating"])


@st.composite
def workers(draw: st.DrawFn) -> dict[str, Any]:
    worker: dict[str, Any] = {
        "name": draw(TEXT.filter(bool)),
        "pool": draw(st.none() | st.sampled_from(["p", "q", "pé", 'p\\"]'])),
        "status": draw(STATUS),
        "kubernetes_version": "v1.32.4",
        "ready": draw(st.booleans()),
        "created_at": "2026-10-01T12:00:00Z",
        "deleted_at": None,
    }
    for key in draw(st.lists(TEXT.filter(lambda k: k not in worker), max_size=2, unique=True)):
        worker[key] = draw(JSON_VALUE)
    return worker


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """A node list with the envelope's keys in any order around ``items``, fields Door may add, and
    any JSON spacing and escaping."""
    items = draw(st.lists(workers(), max_size=30))
    envelope: list[tuple[str, Any]] = [
        ("schema_version", "node.public.v1"),
        ("cluster_id", "c"),
        ("total", len(items)),
        ("cold", False),
        ("stale", False),
        ("next_refresh_at", None),
        ("region", draw(JSON_VALUE)),
    ]
    fields = draw(st.permutations(envelope))
    at = draw(st.integers(0, len(fields)))
    ordered = dict([*fields[:at], ("items", items), *fields[at:]])
    spacing = draw(st.sampled_from([{}, {"indent": 2}, {"separators": (",", ":")}, {"indent": "\t"}]))
    text = json.dumps(ordered, ensure_ascii=draw(st.booleans()), **spacing)
    return (draw(st.sampled_from(["", " ", "\n\t "])) + text + draw(st.sampled_from(["", "\r\n"]))).encode()


def outcome(content: bytes, offset: int, limit: int, *, walk: bool) -> nodes.NodePage | str:
    """The page, or the refusal's words (a shown worker with a status outside the contract)."""
    with pytest.MonkeyPatch.context() as patch:
        if not walk:
            patch.setattr(nodes, "WALK_LIMIT", -1)
        try:
            return node_page(content, offset=offset, limit=limit)
        except ValueError as error:
            return str(error)


@settings(max_examples=300, deadline=None)
@given(bodies(), st.integers(0, 35), st.integers(0, 35))
def test_the_walked_page_is_the_raw_pass_page_for_any_body(content: bytes, offset: int, limit: int) -> None:
    assert outcome(content, offset, limit, walk=True) == outcome(content, offset, limit, walk=False)
    counted = nodes._count(content, ()).items
    if offset < min(offset + limit, len(counted)):
        # The walk itself found the page (it did not fall back to the raw pass).
        shown = nodes._walked_page(content, offset, min(offset + limit, len(counted)), counted)
        assert (
            shown is not None
            and [json.loads(s) for s in shown] == json.loads(content)["items"][offset : offset + limit]
        )


def worker(name: str, pool: str = "p", **extra: object) -> str:
    return json.dumps({"name": name, "pool": pool, "status": "Running", "kubernetes_version": None, "ready": True,
                       "created_at": "2026-10-01T12:00:00Z", "deleted_at": None, **extra}, ensure_ascii=False)  # fmt: skip


ENVELOPE = '"cluster_id": "c", "total": 2, "cold": false, "stale": false, "next_refresh_at": null'


def test_a_body_with_items_twice_shows_the_page_msgspec_counted() -> None:
    """RFC 8259 leaves a repeated key undefined; msgspec reads the last ``items``. The walk meets the
    first, disagrees with the count on a shown worker's pool, and the raw pass answers instead."""
    content = f'{{"items": [{worker("old", pool="q")}], {ENVELOPE}, "items": [{worker("new")}]}}'.encode()
    page = node_page(content, limit=5)
    assert [n.name for n in page.items] == ["new"] and [(c.pool, c.count) for c in page.counts] == [("p", 1)]
    counted = nodes._count(content, ()).items
    assert nodes._walked_page(content, 0, 1, counted) is None


def test_a_page_beyond_the_first_read_or_cut_inside_a_character_is_read_whole() -> None:
    """The walk reads the body's front as text and doubles it until the page is inside: a first
    worker larger than the first read, and a cut that falls inside a two-byte character."""

    def made(pad: str) -> bytes:
        big = worker("big", note=pad + "é" * nodes._FIRST_READ)
        return f'{{{ENVELOPE}, "items": [{big}, {worker("second")}]}}'.encode()

    content = made("")
    if content[nodes._FIRST_READ - 1] != 0xC3:  # move the é's by one byte so the cut falls inside one
        content = made("x")
    assert content[: nodes._FIRST_READ].decode("utf-8", "replace").endswith("\ufffd")  # the cut splits an é
    counted = nodes._count(content, ()).items
    shown = nodes._walked_page(content, 0, 2, counted)
    assert shown is not None and [json.loads(s)["name"] for s in shown] == ["big", "second"]
    assert node_page(content, offset=1, limit=1).items[0].name == "second"


def test_a_page_deeper_than_the_walk_goes_is_found_by_the_raw_pass() -> None:
    items = ", ".join(worker(f"w{i}") for i in range(nodes.WALK_LIMIT + 10))
    content = f'{{{ENVELOPE}, "items": [{items}]}}'.encode()
    page = node_page(content, offset=nodes.WALK_LIMIT + 5, limit=3)
    assert [n.name for n in page.items] == [f"w{nodes.WALK_LIMIT + i}" for i in (5, 6, 7)]
    assert page.total == nodes.WALK_LIMIT + 10


def test_the_first_page_is_found_without_the_raw_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pages people read come from the walk: the second pass over every worker is not made (it is
    most of what a 40,000-worker page cost before; docs/benchmarks.md)."""

    class NoRawPass:
        def decode(self, content: bytes) -> object:
            raise AssertionError("the raw pass ran for a first page")

    items = ", ".join(worker(f"w{i}") for i in range(200))
    content = f'{{{ENVELOPE}, "items": [{items}]}}'.encode()
    monkeypatch.setattr(nodes, "_PAGING", NoRawPass())
    page = node_page(content, offset=0, limit=50)
    assert [n.name for n in page.items] == [f"w{i}" for i in range(50)] and page.total == 200


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([None, "p", "q", "r"]), st.sampled_from(["Running", "Pending"]), st.integers(1, 60)),
        max_size=120,
    ),
    st.randoms(use_true_random=False),
)
def test_counting_by_runs_counts_what_counting_each_worker_does(runs: list[Any], shuffle: Any) -> None:
    """``_tally`` reads runs of equal workers and falls back to counting each one when runs are short:
    the counts are the same for grouped, shuffled and mixed lists."""
    grouped = [nodes._Counted(pool=pool, status=status) for pool, status, length in runs for _ in range(length)]
    mixed = grouped[: len(grouped) // 2] + shuffle.sample(
        grouped[len(grouped) // 2 :], len(grouped) - len(grouped) // 2
    )
    for counted in (grouped, mixed):
        assert nodes._tally(counted) == Counter(counted)


def test_a_first_read_that_ends_exactly_after_a_worker_or_before_the_list_reads_on() -> None:
    """The first read may end right after a worker's ``}`` or right after ``"items":``: both read more
    and find the page by walking (not by the raw pass)."""

    def after_a_worker(pad: int) -> tuple[bytes, int]:
        head, first = f'{{{ENVELOPE}, "items": [', worker("first", note="x" * pad)
        return f"{head}{first}, {worker('second')}]}}".encode(), len(head) + len(first)

    def before_the_list(pad: int) -> tuple[bytes, int]:
        head = f'{{{ENVELOPE}, "pad": "{"x" * pad}", "items": '
        return f"{head}[{worker('first')}, {worker('second')}]}}".encode(), len(head)

    for made in (after_a_worker, before_the_list):
        pad = nodes._FIRST_READ - made(0)[1]  # each padding character moves the cut by one byte
        content, cut = made(pad)
        assert cut == nodes._FIRST_READ and content[cut - 1 : cut] in (b"}", b" "), made.__name__
        counted = nodes._count(content, ()).items
        shown = nodes._walked_page(content, 0, 2, counted)
        assert shown is not None and [json.loads(s)["name"] for s in shown] == ["first", "second"], made.__name__


def test_a_shown_worker_that_is_not_utf_8_is_refused_as_before() -> None:
    """msgspec's count skips the name without reading it; the walk cannot read the text and leaves the
    page to the raw pass, whose validation refuses it, as before the walk."""
    content = f'{{{ENVELOPE}, "items": [{worker("a")}]}}'.encode().replace(b'"a"', b'"\xff"')
    with pytest.raises(ValueError, match="Invalid JSON"):
        node_page(content, limit=5)
