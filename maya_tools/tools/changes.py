"""Change tools. Each one plans a confirmation card, asks a person to approve it, and only then
calls Door, once. No argument of these tools approves anything.

This module does not use ``from __future__ import annotations``: the SDK evaluates the
``Resolve(plan)`` annotations of the closures below at registration time.
"""

from typing import Annotated, Any, get_args

from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from backend_client import rules
from backend_client.models import PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from confirmation_cards import Action, Card
from maya_tools.channels.app_secret import APP_URI
from maya_tools.channels.form import (
    AlreadyDecided,
    AppCard,
    ChangeResult,
    Confirm,
    NoApprovalChannel,
    PageAnswer,
    Plan,
    ask,
    card_for,
    decide,
)
from maya_tools.tools.arguments import AutoArg, ClusterArg, CountArg, MapArg, MaxArg, MinArg, Name, PoolArg
from maya_tools.tools.card_texts import change_answer

# Each change tool renders as the MCP Apps card view for clients that declared the extension.
APP_META: dict[str, Any] = {"ui": {"resourceUri": APP_URI}}

# One change tool per card action: the tool names are the actions' names (change_pool_tier: tools/plans.py).
# stop_plan changes no pool but steers a change, so a read-only server does not offer it either.
CHANGE_TOOLS: frozenset[str] = frozenset(get_args(Action)) | {"stop_plan"}


def _change(destructive: bool) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=False, destructive_hint=destructive, idempotent_hint=False, open_world_hint=True
    )


def _given(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _asker(plan: Plan) -> Any:
    async def ask_about_card(
        card: Annotated[Card, Resolve(plan)], ctx: Context[Any, Any]
    ) -> Elicit[Confirm] | NoApprovalChannel | AlreadyDecided | PageAnswer | AppCard:
        return await ask(card, ctx)

    ask_about_card.__qualname__ = f"ask_about_{plan.__name__}"
    return ask_about_card


async def plan_add(
    cluster: str,
    name: str,
    size: str,
    count: int | None,
    auto_scale: bool | None,
    min_nodes: int | None,
    max_nodes: int | None,
    labels: dict[str, str] | None,
    tags: dict[str, str] | None,
    ctx: Context[Any, Any],
) -> Card:
    request = PublicNodePoolCreateRequest(
        **_given(
            name=name,
            size=size,
            count=count,
            auto_scale=auto_scale,
            min_nodes=min_nodes,
            max_nodes=max_nodes,
            labels=labels,
            tags=tags,
        )
    )
    return await card_for(
        ctx, "add_node_pool", cluster, name, request.body(), lambda planner: planner.add_node_pool(cluster, request)
    )


async def plan_scale(
    cluster: str,
    pool: str,
    count: int | None,
    auto_scale: bool | None,
    min_nodes: int | None,
    max_nodes: int | None,
    size: str | None,
    ctx: Context[Any, Any],
) -> Card:
    if size is not None:
        # R-PATCH-01/R-PATCH-10: the tier of a pool never changes; say how to move instead.
        raise ToolError(
            "Refused before any change (no card was made): " + rules.patch_field_violations({"size": size})[0].explain()
        )
    patch = PublicNodePoolPatchRequest(
        **_given(count=count, auto_scale=auto_scale, min_nodes=min_nodes, max_nodes=max_nodes)
    )
    return await card_for(
        ctx,
        "scale_node_pool",
        cluster,
        pool,
        patch.body(),
        lambda planner: planner.scale_node_pool(cluster, pool, patch),
    )


async def plan_relabel(
    cluster: str, pool: str, labels: dict[str, str] | None, tags: dict[str, str] | None, ctx: Context[Any, Any]
) -> Card:
    patch = PublicNodePoolPatchRequest(**_given(labels=labels, tags=tags))
    return await card_for(
        ctx,
        "relabel_node_pool",
        cluster,
        pool,
        patch.body(),
        lambda planner: planner.relabel_node_pool(cluster, pool, patch),
    )


async def plan_remove(cluster: str, pool: str, ctx: Context[Any, Any]) -> Card:
    return await card_for(
        ctx, "remove_node_pool", cluster, pool, {}, lambda planner: planner.remove_node_pool(cluster, pool)
    )


async def plan_replace(cluster: str, node_name: str, ctx: Context[Any, Any]) -> Card:
    return await card_for(
        ctx, "replace_node", cluster, node_name, {}, lambda planner: planner.replace_node(cluster, node_name)
    )


ask_add = _asker(plan_add)
ask_scale = _asker(plan_scale)
ask_relabel = _asker(plan_relabel)
ask_remove = _asker(plan_remove)
ask_replace = _asker(plan_replace)


def register(mcp: MCPServer[Any]) -> None:
    @mcp.tool(title="Add Node Pool", annotations=_change(destructive=False), meta=APP_META)
    async def add_node_pool(
        cluster: ClusterArg,
        name: Annotated[Name, Field(description="The new pool's name: a DNS label, unique in the cluster.")],
        size: Annotated[Name, Field(description="Machine tier id, for example `dks.m5.xlarge` (list_machine_tiers).")],
        card: Annotated[Card, Resolve(plan_add)],
        answer: Annotated[ElicitationResult[Confirm], Resolve(ask_add)],
        ctx: Context[Any, Any],
        count: CountArg = None,
        auto_scale: AutoArg = None,
        min_nodes: MinArg = None,
        max_nodes: MaxArg = None,
        labels: MapArg = None,
        tags: MapArg = None,
    ) -> Annotated[CallToolResult, ChangeResult]:
        """Add a node pool. Shows a confirmation card; Door is called only if a person approves it."""
        return change_answer(await decide(card, answer, ctx))

    @mcp.tool(title="Scale Node Pool", annotations=_change(destructive=True), meta=APP_META)
    async def scale_node_pool(
        cluster: ClusterArg,
        pool: PoolArg,
        card: Annotated[Card, Resolve(plan_scale)],
        answer: Annotated[ElicitationResult[Confirm], Resolve(ask_scale)],
        ctx: Context[Any, Any],
        count: CountArg = None,
        auto_scale: AutoArg = None,
        min_nodes: MinArg = None,
        max_nodes: MaxArg = None,
        size: Annotated[
            Name | None,
            Field(description="Not changeable (R-PATCH-10): giving it only explains how to move to another tier."),
        ] = None,
    ) -> Annotated[CallToolResult, ChangeResult]:
        """Scale a pool to a fixed count, or turn autoscaling on or off with its bounds.

        Shows a confirmation card; Door is called only if a person approves it."""
        return change_answer(await decide(card, answer, ctx))

    @mcp.tool(title="Relabel Node Pool", annotations=_change(destructive=True), meta=APP_META)
    async def relabel_node_pool(
        cluster: ClusterArg,
        pool: PoolArg,
        card: Annotated[Card, Resolve(plan_relabel)],
        answer: Annotated[ElicitationResult[Confirm], Resolve(ask_relabel)],
        ctx: Context[Any, Any],
        labels: MapArg = None,
        tags: MapArg = None,
    ) -> Annotated[CallToolResult, ChangeResult]:
        """Replace a pool's labels and/or tags. They are stored on the pool, not applied as Kubernetes
        node labels (R-POOL-05): use `kubectl label node` for scheduling. Needs a person's approval."""
        return change_answer(await decide(card, answer, ctx))

    @mcp.tool(title="Remove Node Pool", annotations=_change(destructive=True), meta=APP_META)
    async def remove_node_pool(
        cluster: ClusterArg,
        pool: PoolArg,
        card: Annotated[Card, Resolve(plan_remove)],
        answer: Annotated[ElicitationResult[Confirm], Resolve(ask_remove)],
        ctx: Context[Any, Any],
    ) -> Annotated[CallToolResult, ChangeResult]:
        """Remove a node pool and drain its workers. The last pool of a cluster cannot be removed
        (R-DEL-01). Shows a confirmation card; Door is called only if a person approves it."""
        return change_answer(await decide(card, answer, ctx))

    @mcp.tool(title="Replace Node", annotations=_change(destructive=True), meta=APP_META)
    async def replace_node(
        cluster: ClusterArg,
        node_name: Annotated[
            Name, Field(description="The worker's name as `kubectl get nodes` or list_nodes shows it.")
        ],
        card: Annotated[Card, Resolve(plan_replace)],
        answer: Annotated[ElicitationResult[Confirm], Resolve(ask_replace)],
        ctx: Context[Any, Any],
    ) -> Annotated[CallToolResult, ChangeResult]:
        """Replace one worker: Door drains it and brings up a new one, keeping the pool's count
        (R-RNODE-02). Use it to recycle a bad node, not to scale down. Needs a person's approval."""
        return change_answer(await decide(card, answer, ctx))
