"""Read tools: clusters, pools, nodes, machine tiers and operations. None of them changes anything."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field, StrictStr

from backend_client import models
from backend_client._constants import DEFAULT_FRESH_TIMEOUT
from backend_client.errors import OperationFailed
from backend_client.node_counts import NodePage
from confirmation_cards.planner import NODES_FRESH_TIMEOUT
from confirmation_cards.plans import PLAN_POLL
from confirmation_cards.render import clean_text, environment, one_line
from maya_tools.channels.form import card_errors
from maya_tools.errors import door_errors
from maya_tools.runtime import runtime_of
from maya_tools.tools.arguments import CLUSTER_MAX, ClusterArg, Flag, Name, Number, Whole
from maya_tools.tools.results import (
    ClusterListResult,
    ClusterResult,
    ClusterSummary,
    NodesResult,
    OperationsResult,
    PoolsResult,
    answer,
    cluster_text,
    clusters_text,
    nodes_text,
    operations_text,
    pool_page,
    pools_text,
    tiers_text,
)

# Door's strings reach the model one line long, without control or format characters, and at most
# this long: above the longest valid name (a node name, 254) so a name can still be passed back.
DOOR_TEXT_LIMIT = 256

M = TypeVar("M", bound=BaseModel)

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True)


def _tidy(value: Any) -> Any:
    if isinstance(value, str):
        return one_line(value, DOOR_TEXT_LIMIT)
    if isinstance(value, dict):
        return {_tidy(k): _tidy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tidy(v) for v in value]
    return value


def tidy(result: M) -> M:
    """``result`` with every string in it (names, labels, tags, versions, operation errors, unknown
    fields Door added) through ``one_line``: what the model reads in ``content`` and in
    ``structuredContent`` cannot carry a terminal escape, a bidi override or a megabyte. Not
    defanged (``clean_text``): the model passes names back as Door wrote them. Validated again as
    the same model, so it still matches the tool's output schema."""
    return type(result).model_validate(_tidy(result.model_dump()))


# The pool page and filter of get_cluster and list_node_pools.
PoolFilter = Annotated[Name | None, Field(min_length=1, description="Only the pool with this name.")]
PoolOffset = Annotated[Whole, Field(ge=0, description="Index of the first pool to return.")]
PoolLimit = Annotated[Whole, Field(ge=1, le=200, description="At most this many pools in `node_pools`.")]
Detail = Annotated[Flag, Field(description="Show every label and tag in the text (they are counted otherwise).")]


def freshness_words(nodes: models.NodeList | NodePage) -> str:
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
    @mcp.tool(title="List Clusters", annotations=READ)
    async def list_clusters(
        ctx: Context[Any, Any],
        name: Annotated[
            StrictStr | None, Field(max_length=CLUSTER_MAX, description="Only the cluster with this exact name.")
        ] = None,
    ) -> Annotated[CallToolResult, ClusterListResult]:
        """List the DKS clusters you can see, with their phase and planned capacity."""
        runtime = runtime_of(ctx)
        with door_errors():
            listing = await runtime.door(ctx).list_clusters(name=name)
        where = (
            "embedded reference backend (demo seed; nothing here reaches Door)"
            if runtime.embedded
            else f"Door at {runtime.base_url}"
        )
        result = tidy(
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
        return answer(result, clusters_text(result, name))

    @mcp.tool(title="Show Cluster", annotations=READ)
    async def get_cluster(
        ctx: Context[Any, Any],
        cluster: ClusterArg,
        pool: PoolFilter = None,
        offset: PoolOffset = 0,
        limit: PoolLimit = 25,
        detail: Detail = False,
    ) -> Annotated[CallToolResult, ClusterResult]:
        """One cluster: its phase, planned capacity totals (R-CAP-*) and its node pools, a page at a time."""
        with door_errors():
            found = await runtime_of(ctx).door(ctx).resolve_cluster(cluster)
        page, total, next_offset = pool_page(found.node_pools, pool=pool, offset=offset, limit=limit)
        result = tidy(
            ClusterResult(
                id=found.id,
                name=found.name,
                organisation=found.organisation,
                phase=found.phase,
                kubernetes_version=found.kubernetes_version,
                tags=found.tags,
                total_vcpu=found.total_vcpu,
                total_memory_gib=found.total_memory_gib,
                total_volume_gib=found.total_volume_gib,
                created_at=found.created_at,
                pools_total=total,
                node_pools=page,
                offset=offset,
                next_offset=next_offset,
            )
        )
        return answer(result, cluster_text(result, pool=pool, detail=detail))

    @mcp.tool(title="List Node Pools", annotations=READ)
    async def list_node_pools(
        ctx: Context[Any, Any],
        cluster: ClusterArg,
        pool: PoolFilter = None,
        offset: PoolOffset = 0,
        limit: PoolLimit = 25,
        detail: Detail = False,
    ) -> Annotated[CallToolResult, PoolsResult]:
        """The node pools of a cluster, a page at a time: tier, count, autoscaling bounds, labels, tags, lifecycle."""
        door = runtime_of(ctx).door(ctx)
        with door_errors():
            found = await door.resolve_cluster(cluster)
            listing = await door.list_node_pools(found.id)
        page, total, next_offset = pool_page(listing.items, pool=pool, offset=offset, limit=limit)
        result = tidy(
            PoolsResult(
                cluster_id=found.id,
                cluster_name=found.name,
                items=page,
                total=total,
                offset=offset,
                next_offset=next_offset,
            )
        )
        text = pools_text(result.items, total, offset, next_offset, pool=pool, detail=detail)
        return answer(result, f"Cluster {result.cluster_name}.\n{text}")

    @mcp.tool(title="List Nodes", annotations=READ)
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
    ) -> Annotated[CallToolResult, NodesResult]:
        """The workers of a cluster or pool with their status, summarised by pool and status, in pages.

        Door serves node lists from a cache (R-NODE-01..04): `freshness` says whether this snapshot
        is fresh, cold or stale."""
        door = runtime_of(ctx).door(ctx)
        waited = DEFAULT_FRESH_TIMEOUT if wait_for_fresh else 0.0
        with door_errors():
            found = await door.resolve_cluster(cluster)
            pools = [p.name for p in found.node_pools]
            nodes = await door.node_page(found.id, pool, offset=offset, limit=limit, fresh=wait_for_fresh, pools=pools)
            if nodes.cold and not wait_for_fresh:
                # R-NODE-03: a cold read has no items, which is not "0 workers". Wait for the refresh it
                # queued, as long as the planner waits, and say "not known yet" if it does not land.
                waited = NODES_FRESH_TIMEOUT
                nodes = await door.node_page(
                    found.id,
                    pool,
                    offset=offset,
                    limit=limit,
                    fresh=True,
                    fresh_timeout=NODES_FRESH_TIMEOUT,
                    pools=pools,
                )
        result = tidy(
            NodesResult(
                cluster_id=found.id,
                cluster_name=found.name,
                pool=pool,
                freshness=freshness_words(nodes),
                cold=nodes.cold,
                stale=nodes.stale,
                next_refresh_at=nodes.next_refresh_at,
                total=None if nodes.cold else nodes.total,
                summary=nodes.counts,
                items=nodes.items,
                offset=offset,
                next_offset=nodes.next_offset,
            )
        )
        return answer(result, nodes_text(result, waited))

    @mcp.tool(title="List Machine Tiers", annotations=READ)
    async def list_machine_tiers(ctx: Context[Any, Any]) -> Annotated[CallToolResult, models.MachineTierList]:
        """The machine tiers a pool can use (its `size`): vCPU, memory, disk and price per hour."""
        with door_errors():
            tiers = tidy(await runtime_of(ctx).door(ctx).list_machine_tiers())
        return answer(tiers, tiers_text(tiers))

    @mcp.tool(title="Show Cluster Operations", annotations=READ)
    async def get_cluster_operations(
        ctx: Context[Any, Any],
        cluster: ClusterArg,
        follow: Annotated[
            Name | None,
            Field(description="An operation id, pool or node name (until its operation ends), or a plan's card id."),
        ] = None,
        timeout_seconds: Annotated[Number, Field(gt=0, le=900, description="How long to follow at most.")] = 120.0,
    ) -> Annotated[CallToolResult, OperationsResult]:
        """The cluster's phase and its pool and node operations, newest first (R-OP-03).

        With `follow`, waits for that operation to finish and reports progress meanwhile."""
        door = runtime_of(ctx).door(ctx)
        followed: models.Operation | None = None
        plan: list[str] | None = None
        with door_errors():
            found = await door.resolve_cluster(cluster)
            if follow is not None and follow.startswith("card_"):
                plan = await follow_plan(ctx, follow, timeout_seconds)
            elif follow is not None:
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
        result = tidy(
            OperationsResult(
                cluster_id=found.id,
                cluster_name=found.name,
                phase=state.phase,
                running=len(state.running()),
                operations=state.operations,
                followed=followed,
                plan=plan,
            )
        )
        return answer(result, operations_text(result))


async def follow_plan(ctx: Context[Any, Any], card_id: str, within: float) -> list[str]:
    """Follow the caller's plan card until it leaves ``executing`` or ``within`` seconds (Door's time) pass,
    one progress notification per change of a step; returns its steps in words."""
    runtime = runtime_of(ctx)
    words: Any = environment().get_template("_words.j2").module
    with card_errors():
        card = await runtime.service.get(card_id, principal=runtime.principal(ctx))
    if not card.steps:
        raise ToolError(f"Card {card_id!r} is not a plan; follow its operation id or pool instead.")
    waited, said = 0.0, ""
    while True:
        now = "; ".join(f"{s.index} {s.status.value}" for s in card.steps)
        if now != said:
            said = now
            done = sum(1 for s in card.steps if s.status == "done")
            await ctx.report_progress(done, len(card.steps), f"plan {card.status.value}: steps {now}")
        if card.status.value != "executing" or waited >= within:
            return [str(words.step(step)) for step in card.steps] + [f"plan {card.status.value}"]
        await runtime.sleep(PLAN_POLL)
        waited += PLAN_POLL
        card = await runtime.service.get(card_id)
