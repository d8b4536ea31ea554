"""One page of a node list, counted in full but validated only where it is shown.

Door has no paging for nodes (R-NODE-01): a cluster of 40,000 workers answers with all of them, a
6 MB body. To answer with one page, the body is read by msgspec twice, into only what is needed:
once into a small struct per worker holding just its pool and status, which are counted, and once
into the raw bytes of each worker, of which only the page (``items[offset:offset+limit]``) is
validated as ``Node`` models; the envelope goes through the ``NodeList`` contract model. No 40,000
dicts and no 40,000 pydantic models, and nothing of the body outlives the call. msgspec was chosen
over orjson by measurement (docs/benchmarks.md): orjson builds every worker's dict, which is most of
the cost; msgspec skips the fields it is not asked for.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from backend_client.models import Node, NodeList, NodeStatus

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


class _Counting(msgspec.Struct, gc=False):
    items: list[_Counted]


class _CountingKnown(msgspec.Struct, gc=False):
    items: list[_Known]


class _Paging(msgspec.Struct, gc=False):
    """The envelope's fields as JSON (validated below by ``NodeList``) and each worker's raw bytes."""

    items: list[msgspec.Raw]
    schema_version: _Json = msgspec.UNSET
    cluster_id: _Json = msgspec.UNSET
    total: _Json = msgspec.UNSET
    cold: _Json = msgspec.UNSET
    stale: _Json = msgspec.UNSET
    next_refresh_at: _Json = msgspec.UNSET


class _Envelope(msgspec.Struct, gc=False):
    """The envelope without its items (which msgspec skips without building them)."""

    schema_version: _Json = msgspec.UNSET
    cluster_id: _Json = msgspec.UNSET
    total: _Json = msgspec.UNSET
    cold: _Json = msgspec.UNSET
    stale: _Json = msgspec.UNSET
    next_refresh_at: _Json = msgspec.UNSET


_COUNTING = msgspec.json.Decoder(_Counting)
_COUNTING_KNOWN = msgspec.json.Decoder(_CountingKnown)
_PAGING = msgspec.json.Decoder(_Paging)
_ENVELOPE = msgspec.json.Decoder(_Envelope)
_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ENVELOPE_FIELDS = tuple(f for f in _Envelope.__struct_fields__)


def _envelope(decoded: _Paging | _Envelope) -> NodeList:
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


class PoolStatusCount(BaseModel):
    """How many workers of one pool are in one status."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pool: str | None
    status: str
    count: int


class NodePage(BaseModel):
    """R-NODE-01..04 as one page: the snapshot's freshness and counts, and ``items[offset:offset+limit]``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cluster_id: str
    total: int = Field(description="Workers in the whole snapshot (every page).")
    cold: bool
    stale: bool
    next_refresh_at: datetime | None
    counts: list[PoolStatusCount] = Field(description="Every worker of the snapshot, counted by pool and status.")
    items: list[Node]
    offset: int

    @property
    def fresh(self) -> bool:
        return not self.cold and not self.stale

    @property
    def next_offset(self) -> int | None:
        after = self.offset + len(self.items)
        return after if after < self.total else None


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
    return msgspec.json.Decoder(msgspec.defstruct("_PooledCounting", [("items", list[worker])], gc=False))


def _count(content: bytes, pools: tuple[str, ...]) -> Sequence[_Known | _Counted]:
    """Each worker's pool and status, read as narrowly as the body allows: pools among ``pools`` and
    statuses the contract's, else any string (a worker of a pool the caller did not name, a status
    Door adds)."""
    if pools:
        try:
            items: Sequence[_Known] = _counting_in(pools).decode(content).items
            return items
        except msgspec.ValidationError:
            pass
    try:
        return _COUNTING_KNOWN.decode(content).items
    except msgspec.ValidationError:
        return _COUNTING.decode(content).items


def node_page(
    content: bytes, *, offset: int = 0, limit: int | None = None, pools: Collection[str] = ()
) -> NodePage:
    """The page of a ``NodeList`` body; raises ``ValueError`` (a ``ValidationError`` for the page
    or the envelope) when the body is not a node list. ``pools``, the names the caller expects the
    workers' pools among (the cluster's), only makes the count faster; any other pool is counted too."""
    if offset < 0 or (limit is not None and limit < 0):
        raise ValueError("offset and limit must be ≥ 0")
    try:
        counted = _count(content, tuple(sorted(set(pools))))
        paged = _PAGING.decode(content)
    except msgspec.DecodeError as error:
        raise _not_a_node_list(content, error) from error
    counts: Counter[_Known | _Counted] = Counter(counted)
    total = len(counted)
    del counted  # 40,000 structs: gone before the page is validated
    end = total if limit is None else offset + limit
    shown = paged.items[offset:end]
    page = _NODES.validate_json(b"[" + b",".join(shown) + b"]") if shown else []
    envelope = _envelope(paged)
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


def freshness_of(content: bytes) -> tuple[bool, datetime | None]:
    """Whether a node list body is fresh (neither cold nor stale), and its ``next_refresh_at``."""
    try:
        envelope = _envelope(_ENVELOPE.decode(content))
    except msgspec.DecodeError as error:
        raise ValueError(f"not a node list: {error}") from error
    return envelope.fresh, envelope.next_refresh_at


__all__ = ["NodePage", "PoolStatusCount", "freshness_of", "node_page"]
