"""What the read tools answer: a typed result in ``structuredContent`` and a compact text for the model.

The model reads ``content``; a JSON dump of a 200-pool cluster or a 40,000-worker list there costs
tens of thousands of tokens and says less than a few lines of counts. So each result is a pydantic
model (the tool's output schema, the data in ``structuredContent``) and its text is written here:
counts first, the page asked for, and how to get more. Nulls and empty maps are left out of the text.
Door's free text in it (labels, tags, a pool's lifecycle, an operation's message) is defanged by
``clean_text`` as in a card, so no URL in it becomes a link; names and ids stay exact, as in
``structuredContent``, because the model passes them back to the tools.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, Field

from backend_client import models
from backend_client.node_counts import PoolStatusCount
from confirmation_cards.render import MESSAGE_LIMIT, clean_text, when

# At most this many pool lines in a text; the rest are counted, and are in structuredContent.
TEXT_POOL_LINES = 30


def _strip_titles(schema: dict[str, Any]) -> None:
    """pydantic's generated ``title`` of every property repeats its name: not sent in ``tools/list``."""
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)


class Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=_strip_titles)


class ClusterSummary(Result):
    id: str
    name: str
    phase: str
    pools: int
    total_vcpu: int | None
    total_memory_gib: float | None


class ClusterListResult(Result):
    backend: str = Field(description="Where these clusters live: Door, or the embedded reference backend.")
    clusters: list[ClusterSummary]


class _Paged(Result):
    offset: int
    next_offset: int | None = Field(description="Pass as `offset` for the next page; null on the last page.")


class PoolsResult(_Paged):
    """``list_node_pools``: one page of Door's pool items (R-POOL-01/02)."""

    cluster_id: str
    cluster_name: str
    items: list[models.NodePool] = Field(description="This page of pools.")
    total: int = Field(description="Pools matching the filter, every page (deleting ones included).")


class ClusterResult(_Paged):
    """``get_cluster``: the cluster, its capacity totals (R-CAP-*) and one page of its pools (R-POOL-03)."""

    id: str
    name: str
    organisation: str
    phase: str
    kubernetes_version: str
    tags: list[str]
    node_pools: list[models.NodePool] = Field(description="This page of pools.")
    pools_total: int = Field(description="Pools matching the filter, every page (deleting ones included).")
    total_vcpu: int | None
    total_memory_gib: float | None
    total_volume_gib: int | None
    created_at: datetime


class NodesResult(Result):
    cluster_id: str
    cluster_name: str
    pool: str | None = Field(description="The pool listed, or null for the whole cluster.")
    freshness: str = Field(description="How fresh the snapshot is, in words.")
    cold: bool
    stale: bool
    next_refresh_at: datetime | None
    total: int | None = Field(
        description="Workers in the snapshot, every page; null while Door has no snapshot (cold): not known, not zero."
    )
    summary: list[PoolStatusCount] = Field(description="Workers counted by pool and status.")
    items: list[models.Node] = Field(description="This page of workers.")
    offset: int
    next_offset: int | None = Field(description="Pass as `offset` for the next page; null on the last page.")


class OperationsResult(Result):
    cluster_id: str
    cluster_name: str
    phase: str
    running: int
    operations: list[models.Operation]
    followed: models.Operation | None = Field(
        default=None, description="The operation that was followed to its end, when `follow` was given."
    )
    plan: list[str] | None = Field(default=None, description="The followed plan's steps, when `follow` was a card id.")


def answer(result: BaseModel, text: str) -> CallToolResult:
    """``result`` as ``structuredContent`` (JSON, as its schema says) and ``text`` as what the model reads."""
    return CallToolResult(
        content=[TextContent(text=text)], structuredContent=result.model_dump(mode="json", by_alias=True)
    )


def pool_page(
    pools: list[models.NodePool], *, pool: str | None, offset: int, limit: int
) -> tuple[list[models.NodePool], int, int | None]:
    """The pools named ``pool`` (all when None), the page from ``offset``, the count, and the next offset."""
    chosen = [p for p in pools if pool is None or p.name == pool]
    page = chosen[offset : offset + limit]
    after = offset + len(page)
    return page, len(chosen), after if after < len(chosen) else None


def _map(value: dict[str, str]) -> str:
    return "{" + ", ".join(f"{clean_text(k)}={clean_text(v)}" for k, v in sorted(value.items())) + "}"


def pool_line(p: models.NodePool, *, detail: bool) -> str:
    line = f"- {p.name}: {p.size} × {p.count}"
    if p.auto_scale:
        line += f", autoscale {p.min_nodes if p.min_nodes is not None else '?'}–{p.max_nodes if p.max_nodes is not None else '?'}"
    if p.lifecycle != "active":
        line += f", {clean_text(p.lifecycle)}"
    for name, value in (("labels", p.labels), ("tags", p.tags)):
        if value:
            line += f", {name} {_map(value)}" if detail else f", {len(value)} {name}"
    return line


def paging(offset: int, shown: int, total: int, next_offset: int | None) -> str:
    """Paging in words: which part of ``total`` this page is, and the offset that asks for more."""
    where = f"showing {shown} of {total}" if offset == 0 else f"showing {offset + 1}–{offset + shown} of {total}"
    return where + (f"; ask with offset {next_offset} for more" if next_offset is not None else "")


def pools_text(
    pools: list[models.NodePool], total: int, offset: int, next_offset: int | None, *, pool: str | None, detail: bool
) -> str:
    lines = []
    if not pools:
        lines.append(f"No pool named {pool!r}." if pool is not None else "No pools on this page.")
    else:
        lines.append(f"Pools {offset + 1}–{offset + len(pools)} of {total} (name: tier × count):")
        lines += [pool_line(p, detail=detail) for p in pools]
    if next_offset is not None:
        lines.append(f"{paging(offset, len(pools), total, next_offset)}; or pool=NAME for one pool.")
    if not detail and any(p.labels or p.tags for p in pools):
        lines.append("Labels and tags are counted; detail=true shows them.")
    return "\n".join(lines)


def cluster_text(result: ClusterResult, *, pool: str | None, detail: bool) -> str:
    head = f"Cluster {result.name} (id {result.id}), phase {result.phase}, Kubernetes {result.kubernetes_version}"
    if result.tags:
        head += ", tags " + ", ".join(clean_text(tag) for tag in result.tags)
    capacity = (
        f"Planned capacity: {result.total_vcpu} vCPU, {result.total_memory_gib} GiB memory, "
        f"{result.total_volume_gib} GiB volume."
        if result.total_vcpu is not None
        else "Planned capacity: unknown (a pool's tier is not in the catalog)."
    )
    page = pools_text(
        result.node_pools, result.pools_total, result.offset, result.next_offset, pool=pool, detail=detail
    )
    return "\n".join([head + ".", capacity, page])


def _counted(counts: Iterable[tuple[str, int]]) -> str:
    return ", ".join(f"{n} {status}" for status, n in counts)


def nodes_text(result: NodesResult, waited: float) -> str:
    """Counts first, the page, and paging in words; a cold snapshot says the list is not known yet
    (R-NODE-03: Door answers a cold read with no items, which is not a count of zero)."""
    where = f"pool {result.pool} of {result.cluster_name}" if result.pool else result.cluster_name
    if result.total is None:
        expected = f" (Door expects it at {when(result.next_refresh_at)})" if result.next_refresh_at else ""
        return (
            f"The workers of {where} are not known yet: Door has no snapshot of them (cold), and the refresh "
            f"it queued had not landed after {waited:g} s of waiting{expected}. Ask again in a few seconds."
        )
    by_status: Counter[str] = Counter()
    by_pool: dict[str | None, Counter[str]] = {}
    for c in result.summary:
        by_status[c.status] += c.count
        by_pool.setdefault(c.pool, Counter())[c.status] += c.count
    head = f"{where}: {result.total} {'worker' if result.total == 1 else 'workers'}"
    if by_status:
        head += " (" + _counted(sorted(by_status.items())) + ")"
    lines = [f"{head}; snapshot {result.freshness}."]
    if len(by_pool) > 1:
        shown = sorted(by_pool.items(), key=lambda kv: (set(kv[1]) == {"Running"}, kv[0] or ""))
        lines.append(f"By pool ({len(by_pool)} pools, those not all Running first):")
        lines += [f"- {p or '(none)'}: {_counted(sorted(c.items()))}" for p, c in shown[:TEXT_POOL_LINES]]
        if len(shown) > TEXT_POOL_LINES:
            lines.append(
                f"… {len(shown) - TEXT_POOL_LINES} more pools (structuredContent `summary`; or pass pool=NAME)."
            )
    if result.items:
        lines.append("Workers (name, pool, status, ready):")
        lines += [f"- {n.name} {n.pool or '-'} {n.status}{' ready' if n.ready else ''}" for n in result.items]
    if result.total and (result.offset or result.next_offset is not None):
        lines.append(paging(result.offset, len(result.items), result.total, result.next_offset).capitalize() + ".")
    return "\n".join(lines)


def clusters_text(result: ClusterListResult, name: str | None) -> str:
    if not result.clusters:
        asked = f" named {name!r}" if name is not None else ""
        return f"No cluster{asked} that you can see ({result.backend})."
    count = len(result.clusters)
    lines = [f"{count} {'cluster' if count == 1 else 'clusters'} ({result.backend}):"]
    for c in result.clusters[:TEXT_POOL_LINES]:
        planned = (
            f"{c.total_vcpu} vCPU / {c.total_memory_gib:g} GiB planned"
            if c.total_vcpu is not None and c.total_memory_gib is not None
            else "planned capacity unknown"
        )
        lines.append(f"- {c.name}: {c.phase}, {c.pools} {'pool' if c.pools == 1 else 'pools'}, {planned}")
    if count > TEXT_POOL_LINES:
        lines.append(f"… {count - TEXT_POOL_LINES} more (structuredContent `clusters`; or pass name=NAME).")
    return "\n".join(lines)


def tiers_text(tiers: models.MachineTierList) -> str:
    lines = [f"{len(tiers.items)} machine tiers a pool can use (id: vCPU, memory, disk, price per hour):"]
    lines += [
        f"- {t.id}: {t.vcpu} vCPU, {t.memory_gib:g} GiB, {t.spec.disk_gib} GiB disk, {t.price_per_hour:g}/h"
        for t in tiers.items
    ]
    return "\n".join(lines)


def _operation_line(op: models.Operation) -> str:
    said = clean_text(op.error or op.message or "", MESSAGE_LIMIT)
    return f"- {op.kind} {op.target}: {op.status}" + (f", {said}" if said else "") + f" (id {op.id})"


def operations_text(result: OperationsResult) -> str:
    running = f"{result.running} {'operation' if result.running == 1 else 'operations'} running"
    lines = [f"{result.cluster_name} is {result.phase}; {running}."]
    if result.plan is not None:
        lines.append("Plan followed:")
        lines += ["- " + step for step in result.plan]
    if result.followed is not None:
        lines.append("Followed to its end: " + _operation_line(result.followed).removeprefix("- ") + ".")
    if result.operations:
        lines.append("Operations, newest first:")
        lines += [_operation_line(op) for op in result.operations[:TEXT_POOL_LINES]]
        if len(result.operations) > TEXT_POOL_LINES:
            lines.append(f"… {len(result.operations) - TEXT_POOL_LINES} more (structuredContent `operations`).")
    else:
        lines.append("No operations recorded.")
    return "\n".join(lines)
