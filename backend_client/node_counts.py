"""A page of a node list as the client returns it: the page's workers, and every worker counted.

The pydantic models only, so that what imports them at start (the tools' output schemas) does not load
msgspec and the decoders of ``backend_client.nodes``, which the first node list call imports.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from backend_client.models import Node


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


__all__ = ["NodePage", "PoolStatusCount"]
