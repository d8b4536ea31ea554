"""Read tools: clusters, pools, nodes, machine tiers and operations. None of them changes anything."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from backend_client import models
from backend_client.errors import OperationFailed
from confirmation_cards.render import clean_text
from maya_tools.errors import door_errors
from maya_tools.runtime import runtime_of
from maya_tools.tools.arguments import CLUSTER_MAX, ClusterArg, Flag, Name, Number, Whole

# Door's strings reach the model one line long, without control or format characters, and at most
# this long: above the longest valid name (a node name, 254) so a name can still be passed back.
DOOR_TEXT_LIMIT = 256

M = TypeVar("M", bound=BaseModel)

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True)


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ClusterSummary(_Result):
    id: str
    name: str
    phase: str
    pools: int
    total_vcpu: int | None
    total_memory_gib: float | None


class ClusterListResult(_Result):
    backend: str = Field(description="Where these clusters live: Door, or the embedded reference backend.")
    clusters: list[ClusterSummary]


class PoolStatusCount(_Result):
    pool: str | None
    status: str
    count: int


class NodesResult(_Result):
    cluster_id: str
    cluster_name: str
    pool: str | None = Field(description="The pool listed, or null for the whole cluster.")
    freshness: str = Field(description="How fresh the snapshot is, in words.")
    cold: bool
    stale: bool
    next_refresh_at: datetime | None
    total: int
    summary: list[PoolStatusCount] = Field(description="Workers counted by pool and status.")
    items: list[models.Node] = Field(description="This page of workers.")
    offset: int
    next_offset: int | None = Field(description="Pass as `offset` for the next page; null on the last page.")


class OperationsResult(_Result):
    cluster_id: str
    cluster_name: str
    phase: str
    running: int
    operations: list[models.Operation]
    followed: models.Operation | None = Field(
        default=None, description="The operation that was followed to its end, when `follow` was given."
    )


def _tidy(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value, DOOR_TEXT_LIMIT)
    if isinstance(value, dict):
        return {_tidy(k): _tidy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tidy(v) for v in value]
    return value


def tidy(result: M) -> M:
    """``result`` with every string in it (names, labels, tags, versions, operation errors, unknown
    fields Door added) through ``clean_text``: what the model reads in ``content`` and in
    ``structuredContent`` cannot carry a terminal escape, a bidi override or a megabyte. Validated
    again as the same model, so it still matches the tool's output schema."""
    return type(result).model_validate(_tidy(result.model_dump()))


def freshness_words(nodes: models.NodeList) -> str:
    """R-NODE-03/04 said plainly, so a person knows how far to trust the list."""
    if nodes.cold:
        return "cold: Door has no snapshot yet (the list may be empty); a refresh is queued" + (
            f" for {nodes.next_refresh_at.isoformat()}" if nodes.next_refresh_at else ""
        )
    if nodes.stale:
        return "stale: this snapshot is older than Door's cache lifetime; a refresh is queued" + (
            f" for {nodes.next_refresh_at.isoformat()}" if nodes.next_refresh_at else ""
        )
    return "fresh"


def register(mcp: MCPServer[Any]) -> None:
    @mcp.tool(annotations=READ)
    async def list_clusters(
        ctx: Context[Any, Any],
        name: Annotated[
            StrictStr | None, Field(max_length=CLUSTER_MAX, description="Only the cluster with this exact name.")
        ] = None,
    ) -> ClusterListResult:
        """List the DKS clusters you can see, with their phase and planned capacity."""
        runtime = runtime_of(ctx)
        with door_errors():
            listing = await runtime.door(ctx).list_clusters(name=name)
        where = (
            "embedded reference backend (demo seed; nothing here reaches Door)"
            if runtime.embedded
            else f"Door at {runtime.base_url}"
        )
        return tidy(
            ClusterListResult(
                backend=where,
                clusters=[
                    ClusterSummary(
                        id=c.id,
                        name=c.name,
                        phase=c.phase,
                        pools=sum(1 for p in c.node_pools if p.lifecycle == "active"),
                        total_vcpu=c.total_vcpu,
                        total_memory_gib=c.total_memory_gib,
                    )
                    for c in listing.items
                ],
            )
        )

    @mcp.tool(annotations=READ)
    async def get_cluster(ctx: Context[Any, Any], cluster: ClusterArg) -> models.Cluster:
        """One cluster: its phase, its node pools and its planned capacity totals (R-CAP-*)."""
        with door_errors():
            return tidy(await runtime_of(ctx).door(ctx).resolve_cluster(cluster))

    @mcp.tool(annotations=READ)
    async def list_node_pools(ctx: Context[Any, Any], cluster: ClusterArg) -> models.NodePoolList:
        """The node pools of a cluster: tier, count, autoscaling bounds, labels, tags, lifecycle."""
        door = runtime_of(ctx).door(ctx)
        with door_errors():
            found = await door.resolve_cluster(cluster)
            return tidy(await door.list_node_pools(found.id))

    @mcp.tool(annotations=READ)
    async def list_nodes(
        ctx: Context[Any, Any],
        cluster: ClusterArg,
        pool: Annotated[
            Name | None, Field(min_length=1, description="Only this pool's workers; omit for the whole cluster.")
        ] = None,
        wait_for_fresh: Annotated[
            Flag, Field(description="Wait (briefly) until Door's snapshot is neither cold nor stale.")
        ] = False,
        offset: Annotated[Whole, Field(ge=0, description="Index of the first worker to return.")] = 0,
        limit: Annotated[Whole, Field(ge=1, le=200, description="At most this many workers in `items`.")] = 50,
    ) -> NodesResult:
        """The workers of a cluster or pool with their status, summarised by pool and status, in pages.

        Door serves node lists from a cache (R-NODE-01..04): `freshness` says whether this snapshot
        is fresh, cold or stale."""
        door = runtime_of(ctx).door(ctx)
        with door_errors():
            found = await door.resolve_cluster(cluster)
            nodes = await door.list_nodes(found.id, pool, fresh=wait_for_fresh)
        counts = Counter((n.pool, n.status) for n in nodes.items)
        page = nodes.items[offset : offset + limit]
        after = offset + len(page)
        return tidy(
            NodesResult(
                cluster_id=found.id,
                cluster_name=found.name,
                pool=pool,
                freshness=freshness_words(nodes),
                cold=nodes.cold,
                stale=nodes.stale,
                next_refresh_at=nodes.next_refresh_at,
                total=len(nodes.items),
                summary=[
                    PoolStatusCount(pool=p, status=s, count=n)
                    for (p, s), n in sorted(counts.items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))
                ],
                items=page,
                offset=offset,
                next_offset=after if after < len(nodes.items) else None,
            )
        )

    @mcp.tool(annotations=READ)
    async def list_machine_tiers(ctx: Context[Any, Any]) -> models.MachineTierList:
        """The machine tiers a pool can use (its `size`): vCPU, memory, disk and price per hour."""
        with door_errors():
            return tidy(await runtime_of(ctx).door(ctx).list_machine_tiers())

    @mcp.tool(annotations=READ)
    async def get_cluster_operations(
        ctx: Context[Any, Any],
        cluster: ClusterArg,
        follow: Annotated[
            Name | None,
            Field(description="An operation id, pool name or node name: wait until its running operation ends."),
        ] = None,
        timeout_seconds: Annotated[Number, Field(gt=0, le=900, description="How long to follow at most.")] = 120.0,
    ) -> OperationsResult:
        """The cluster's phase and its pool and node operations, newest first (R-OP-03).

        With `follow`, waits for that operation to finish and reports progress meanwhile."""
        door = runtime_of(ctx).door(ctx)
        followed: models.Operation | None = None
        with door_errors():
            found = await door.resolve_cluster(cluster)
            if follow is not None:
                state = await door.get_cluster_state(found.id)
                match = next(
                    (op for op in state.operations if follow in (op.id, op.target, op.pool)),
                    None,
                )
                if match is None:
                    raise ToolError(f"No operation on {found.name} has the id, pool or node {follow!r}.")
                steps = 0
                said: str | None = None

                async def progress(current: models.ClusterState) -> None:
                    nonlocal steps, said
                    op = next((o for o in current.operations if o.id == match.id), None)
                    message = clean_text(op.message, DOOR_TEXT_LIMIT) if op and op.message else "waiting"
                    if message != said:  # one notification per visible step, not per poll
                        steps += 1
                        said = message
                        await ctx.report_progress(steps, None, message)

                try:
                    followed = await door.wait_for_operation(
                        found.id,
                        operation_id=match.id,
                        timeout=timeout_seconds,
                        on_progress=progress,
                    )
                except OperationFailed as failed:
                    followed = failed.operation  # a failed operation is an answer, not a tool failure
            state = await door.get_cluster_state(found.id)
        return tidy(
            OperationsResult(
                cluster_id=found.id,
                cluster_name=found.name,
                phase=state.phase,
                running=len(state.running()),
                operations=state.operations,
                followed=followed,
            )
        )
