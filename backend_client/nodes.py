"""One page of a node list, counted in full but validated only where it is shown.

Door has no paging for nodes (R-NODE-01): a cluster of 40,000 workers answers with all of them, a
6 MB body. To answer with one page, msgspec reads the whole body once into only what is needed: the
envelope's fields as JSON, and a small struct per worker holding just its pool and status, which are
counted. The page (``items[offset:offset+limit]``) is then found as text: near the front of the list
(the pages people read) by the standard library's scanner walking from the body's start, which stops
at the page's end and must agree with the count on every shown worker's pool and status; deeper, or
when the walk disagrees, by a second msgspec pass into each worker's raw bytes. Only the page is
validated as ``Node`` models, and the envelope goes through the ``NodeList`` contract model. No 40,000
dicts and no 40,000 pydantic models, and nothing of the body outlives the call. msgspec was chosen
over orjson by measurement (docs/benchmarks.md): orjson builds every worker's dict, which is most of
the cost; msgspec skips the fields it is not asked for.
"""

from __future__ import annotations

import codecs
import functools
import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime
from itertools import groupby
from typing import Any, Literal

import anyio
import httpx2
import msgspec
from pydantic import TypeAdapter

from backend_client._http_dates import parse_date_header
from backend_client._operations import Sleep
from backend_client._parse import parse_with
from backend_client._retry import fresh_poll_delay
from backend_client.models import Node, NodeList, NodeStatus
from backend_client.node_counts import NodePage, PoolStatusCount

_NODES = TypeAdapter(list[Node])


_Json = msgspec.Raw | msgspec.UnsetType
"""A field's JSON as it came (``null`` included), or UNSET when the body has no such field."""


class _Counted(msgspec.Struct, frozen=True, gc=False):
    """What counting needs of a worker: hashable by its fields, so the structs themselves are counted.
    A missing pool is None, as in the model; a status must be a string, any string (a status Door adds
    is counted, not refused; a missing one is counted as "None", as before). A worker that is not an
    object, or whose pool or status is not a string, makes the body not a node list."""

    pool: str | None = None
    status: str = "None"


class _Known(msgspec.Struct, frozen=True, gc=False):
    """As ``_Counted`` for a body whose statuses are all the contract's: msgspec then answers each
    status with the literal's own string, which is neither built nor hashed again (about a third of
    the counting's time for 40,000 workers)."""

    pool: str | None = None
    status: NodeStatus | Literal["None"] = "None"


class _Envelope(msgspec.Struct, gc=False):
    """The envelope without its items (which msgspec skips without building them)."""

    schema_version: _Json = msgspec.UNSET
    cluster_id: _Json = msgspec.UNSET
    total: _Json = msgspec.UNSET
    cold: _Json = msgspec.UNSET
    stale: _Json = msgspec.UNSET
    next_refresh_at: _Json = msgspec.UNSET


class _Counting(_Envelope, kw_only=True, gc=False):
    """The envelope and each worker's pool and status: the one pass over the whole body."""

    items: list[_Counted]


class _CountingKnown(_Envelope, kw_only=True, gc=False):
    items: list[_Known]


class _Paging(msgspec.Struct, gc=False):
    """Each worker's raw bytes, for a page the walk from the front does not reach."""

    items: list[msgspec.Raw]


_COUNTING = msgspec.json.Decoder(_Counting)
_COUNTING_KNOWN = msgspec.json.Decoder(_CountingKnown)
_PAGING = msgspec.json.Decoder(_Paging)
_ENVELOPE = msgspec.json.Decoder(_Envelope)
_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ENVELOPE_FIELDS = tuple(f for f in _Envelope.__struct_fields__)


def _envelope(decoded: _Envelope) -> NodeList:
    """The envelope through the contract model (items empty), so a changed envelope fails as before."""
    fields: dict[str, Any] = {"items": []}
    for name in _ENVELOPE_FIELDS:
        raw = getattr(decoded, name)
        if raw is not msgspec.UNSET:
            fields[name] = msgspec.json.decode(raw)
    return NodeList.model_validate(fields)


def _not_a_node_list(body: bytes, error: msgspec.DecodeError) -> ValueError:
    """msgspec's refusal said as before: no items array, an item that is not an object, or not JSON."""
    if not isinstance(error, msgspec.ValidationError):
        return ValueError(f"not JSON: {error}")
    try:
        top = _TOP.decode(body)
    except msgspec.DecodeError:
        return ValueError("not a node list: not a JSON object")
    if "items" not in top or not bytes(top["items"]).startswith(b"["):
        return ValueError("not a node list: no items array")
    return ValueError(f"not a node list: an item is not a worker ({error})")


@functools.lru_cache(maxsize=16)
def _counting_in(pools: tuple[str, ...]) -> msgspec.json.Decoder[Any]:
    """A decoder that reads each worker's pool as one of ``pools``: msgspec answers each with the name's
    own string, as for the statuses, so 40,000 pool names are neither built nor hashed again."""
    name: Any = Literal.__getitem__(pools)
    worker: Any = msgspec.defstruct(
        "_Pooled",
        [("pool", name | None, None), ("status", NodeStatus | Literal["None"], "None")],
        frozen=True,
        gc=False,
    )
    counting = msgspec.defstruct(
        "_PooledCounting", [("items", list[worker])], bases=(_Envelope,), kw_only=True, gc=False
    )
    return msgspec.json.Decoder(counting)


def _count(content: bytes, pools: tuple[str, ...]) -> Any:
    """The envelope and each worker's pool and status, read as narrowly as the body allows: pools among
    ``pools`` and statuses the contract's, else any string (a worker of a pool the caller did not name,
    a status Door adds). Its ``items`` are ``_Known`` or ``_Counted`` structs."""
    if pools:
        try:
            return _counting_in(pools).decode(content)
        except msgspec.ValidationError:
            pass
    try:
        return _COUNTING_KNOWN.decode(content)
    except msgspec.ValidationError:
        return _COUNTING.decode(content)


# How deep a page may end and still be found by walking the body from its start: every worker before
# the page is read into a dict by the standard library, and the text read is doubled until the page is
# in it, so a page ending at 500 costs about 1.9 ms, still less than msgspec's second pass over the
# whole body (about 3.5 ms for 40,000 workers; benchmarks/decoders.py). The first page costs 0.1 ms.
WALK_LIMIT = 500
_FIRST_READ = 64 * 1024  # bytes of the body first read as text: 50 workers take about 8 KB
_SPACE = re.compile(r"[ \t\n\r]*")
_SCANNER = json.JSONDecoder()


def _space(text: str, at: int) -> int:
    """The index after any JSON whitespace at ``at``."""
    spaces = _SPACE.match(text, at)
    return spaces.end() if spaces else at


def _walk_to_items(text: str) -> int:
    """The index of the ``[`` that opens the top-level ``items``, past the envelope's keys before it."""
    at = _space(text, 0)
    if text[at : at + 1] != "{":
        raise ValueError("not an object")
    at += 1
    while True:
        key, at = _SCANNER.raw_decode(text, _space(text, at))
        at = _space(text, at)
        if not isinstance(key, str) or text[at : at + 1] != ":":
            raise ValueError("not a key")
        at = _space(text, at + 1)
        if key == "items":
            return at
        _, at = _SCANNER.raw_decode(text, at)
        at = _space(text, at)
        if text[at : at + 1] != ",":
            raise ValueError("no items")
        at += 1


def _walked_page(content: bytes, offset: int, end: int, counted: Sequence[_Known | _Counted]) -> list[str] | None:
    """``items[offset:end]`` of a body msgspec has read whole, as each worker's JSON text, found by the
    standard library's scanner from the body's start: past the envelope's keys up to ``items``, then
    worker by worker to ``end``. None when the walk cannot be trusted: it fails, or a shown worker's
    pool and status differ from msgspec's count at the same place (a body with ``items`` twice, which
    RFC 8259 leaves undefined and msgspec reads as the last)."""
    size = _FIRST_READ
    while True:
        # The front of the body as text, a partial character at the cut held back; doubled until the
        # page's end is inside it (a read that ends before the page does raises _Cut, which reads more).
        whole = size >= len(content)
        try:
            text = codecs.getincrementaldecoder("utf-8")().decode(content[:size], final=whole)
            return _walk(text, offset, end, counted, whole=whole)
        except _Cut:
            size *= 2
        except (ValueError, RecursionError, AttributeError):  # not UTF-8, not a list of objects: the raw pass
            return None


class _Cut(Exception):
    """The text read so far ends before the page does."""


def _walk(text: str, offset: int, end: int, counted: Sequence[_Known | _Counted], *, whole: bool) -> list[str] | None:
    try:
        at = _walk_to_items(text)
    except (ValueError, RecursionError):
        if whole:
            raise
        raise _Cut from None  # an envelope value, or the items key, past the text read so far
    if at >= len(text) and not whole:
        raise _Cut
    if text[at : at + 1] != "[":
        return None
    at += 1
    shown: list[str] = []
    for index in range(end):
        start = at = _space(text, at)
        try:
            worker, at = _SCANNER.raw_decode(text, at)
        except ValueError:
            if whole:
                raise
            raise _Cut from None  # a worker cut by the end of the text read so far
        if index >= offset:
            expected = counted[index]
            if worker.get("pool") != expected.pool or worker.get("status", "None") != expected.status:
                return None
            shown.append(text[start:at])
        if index == end - 1:
            break
        at = _space(text, at)
        if at >= len(text) and not whole:
            raise _Cut  # the read ends right after a worker: what follows it is not known yet
        if text[at : at + 1] != ",":
            break
        at += 1
    return shown if len(shown) == end - offset else None


def _tally(counted: Sequence[_Known | _Counted]) -> Counter[_Known | _Counted]:
    """How many workers have each (pool, status). Door lists a pool's workers together, so the list is
    read as runs of equal workers (about 1.3 ms for 40,000 in 200 runs, against 2.2 ms for counting
    each worker); once the runs turn out short (on average under ``_LONG_RUN`` workers, after the first
    64), the rest is counted worker by worker, so a shuffled list costs what it did."""
    counts: Counter[_Known | _Counted] = Counter()
    read = 0
    for runs, (worker, run) in enumerate(groupby(counted), start=1):
        length = sum(1 for _ in run)
        counts[worker] += length
        read += length
        if runs > 64 and read < runs * _LONG_RUN:
            counts.update(counted[read:])
            break
    return counts


_LONG_RUN = 20


def node_page(content: bytes, *, offset: int = 0, limit: int | None = None, pools: Collection[str] = ()) -> NodePage:
    """The page of a ``NodeList`` body; raises ``ValueError`` (a ``ValidationError`` for the page
    or the envelope) when the body is not a node list. ``pools``, the names the caller expects the
    workers' pools among (the cluster's), only makes the count faster; any other pool is counted too."""
    if offset < 0 or (limit is not None and limit < 0):
        raise ValueError("offset and limit must be ≥ 0")
    try:
        read = _count(content, tuple(sorted(set(pools))))
    except msgspec.DecodeError as error:
        raise _not_a_node_list(content, error) from error
    counted: Sequence[_Known | _Counted] = read.items
    total = len(counted)
    end = total if limit is None else min(offset + limit, total)
    page: list[Node] = []
    if offset < end:
        walked = _walked_page(content, offset, end, counted) if end <= WALK_LIMIT else None
        if walked is not None:
            page = _NODES.validate_json("[" + ",".join(walked) + "]")
        else:
            page = _NODES.validate_json(b"[" + b",".join(_PAGING.decode(content).items[offset:end]) + b"]")
    counts = _tally(counted)
    envelope = _envelope(read)
    del counted, read  # 40,000 structs: gone before the result is built
    return NodePage(
        cluster_id=envelope.cluster_id,
        total=total,
        cold=envelope.cold,
        stale=envelope.stale,
        next_refresh_at=envelope.next_refresh_at,
        counts=[
            PoolStatusCount(pool=c.pool, status=c.status, count=n)
            for c, n in sorted(counts.items(), key=lambda kv: (kv[0].pool or "", kv[0].status))
        ],
        items=page,
        offset=offset,
    )


async def read_nodes(
    get: Callable[[], Awaitable[httpx2.Response]], sleep: Sleep, *, fresh: bool, fresh_timeout: float
) -> httpx2.Response:
    """A node list response (``get``); with ``fresh``, read again after its ``next_refresh_at`` (measured on
    the server's clock, bounded by ``FRESH_POLL_MIN``/``FRESH_POLL_MAX``) until the snapshot is fresh or
    ``fresh_timeout`` seconds have passed, when the last one is returned as it is (R-NODE-03/04)."""
    started = anyio.current_time()
    waited = 0.0
    while True:
        response = await get()
        if not fresh:
            return response
        is_fresh, next_refresh_at = parse_with(response, "NodeList", freshness_of)
        if is_fresh:
            return response
        remaining = fresh_timeout - max(waited, anyio.current_time() - started)
        if remaining <= 0:
            return response
        delay = min(fresh_poll_delay(next_refresh_at, parse_date_header(response.headers)), remaining)
        await sleep(delay)
        waited += delay


def freshness_of(content: bytes) -> tuple[bool, datetime | None]:
    """Whether a node list body is fresh (neither cold nor stale), and its ``next_refresh_at``."""
    try:
        envelope = _envelope(_ENVELOPE.decode(content))
    except msgspec.DecodeError as error:
        raise ValueError(f"not a node list: {error}") from error
    return envelope.fresh, envelope.next_refresh_at


__all__ = ["NodePage", "PoolStatusCount", "freshness_of", "node_page", "read_nodes"]
