"""One page of a node list, counted in full but validated only where it is shown.

Door has no paging for nodes (R-NODE-01): a cluster of 40,000 workers answers with all of them. To
answer with one page, the client decodes the body to plain dicts once, counts every worker by pool
and status from those dicts, validates only the page as ``Node`` models, and lets the rest go: no
40,000 pydantic models, and nothing of the body outlives the call.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from backend_client.models import Node, NodeList

_NODES = TypeAdapter(list[Node])


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


def node_page(content: bytes, *, offset: int = 0, limit: int | None = None) -> NodePage:
    """The page of a ``NodeList`` body; raises ``ValueError`` (a ``ValidationError`` for the page
    or the envelope) when the body is not a node list."""
    if offset < 0 or (limit is not None and limit < 0):
        raise ValueError("offset and limit must be ≥ 0")
    raw: Any = json.loads(content)
    if not isinstance(raw, dict) or not isinstance(raw.get("items"), list):
        raise ValueError("not a node list: no items array")
    items: list[Any] = raw["items"]
    counts: Counter[tuple[str | None, str]] = Counter()
    for item in items:
        if not isinstance(item, dict):
            raise ValueError("not a node list: an item is not an object")
        counts[(item.get("pool"), str(item.get("status")))] += 1
    end = len(items) if limit is None else offset + limit
    page = _NODES.validate_python(items[offset:end])
    # The envelope without its items goes through the contract model, so a changed envelope fails
    # the same way as before; the counted items are let go with ``raw`` when this returns.
    envelope = NodeList.model_validate({**raw, "items": []})
    return NodePage(
        cluster_id=envelope.cluster_id,
        total=len(items),
        cold=envelope.cold,
        stale=envelope.stale,
        next_refresh_at=envelope.next_refresh_at,
        counts=[
            PoolStatusCount(pool=pool, status=status, count=n)
            for (pool, status), n in sorted(counts.items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))
        ],
        items=page,
        offset=offset,
    )


def freshness_of(content: bytes) -> tuple[bool, datetime | None]:
    """Whether a node list body is fresh (neither cold nor stale), and its ``next_refresh_at``."""
    envelope = NodeList.model_validate({**json.loads(content), "items": []})
    return envelope.fresh, envelope.next_refresh_at


__all__ = ["NodePage", "PoolStatusCount", "freshness_of", "node_page"]
