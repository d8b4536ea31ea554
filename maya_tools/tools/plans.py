"""``change_pool_tier``: one card for the whole move of a pool to another tier; ``stop_plan`` stops one.

The plan is approved once through the same channels as every change tool (form, approval page,
Apps card); the approving call then follows it, step by step, with progress notifications
(``confirmation_cards.plans``). ``stop_plan`` changes nothing in Door: it asks the plan to send
nothing further.

This module does not use ``from __future__ import annotations``: the SDK evaluates the
``Resolve(...)`` annotations at registration time.
"""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, ElicitationResult, MCPServer, Resolve
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from confirmation_cards import Card, CardStatus
from confirmation_cards.tier_plan import plan_tier_change
from maya_tools.channels.form import ChangeResult, Confirm, card_errors, card_for, decide
from maya_tools.runtime import runtime_of
from maya_tools.tools.arguments import CARD_ID_MAX, ClusterArg, Flag, Name, PoolArg
from maya_tools.tools.card_texts import change_answer
from maya_tools.tools.changes import APP_META, _asker, _change

STOP_SAID = (
    "Asked plan {card} to stop: it sends nothing further (a step already sent finishes at Door). "
    "Stopping changes nothing in Door itself. get_card shows where it stopped and which pools exist."
)


async def plan_tier(
    cluster: str, pool: str, size: str, new_name: str | None, keep_name: bool, ctx: Context[Any, Any]
) -> Card:
    request = {"pool": pool, "size": size, "new_name": new_name, "keep_name": keep_name}
    return await card_for(
        ctx,
        "change_pool_tier",
        cluster,
        pool,
        request,
        lambda planner: plan_tier_change(planner, cluster, pool, size, new_name=new_name, keep_name=keep_name),
        replan=True,
    )


ask_tier = _asker(plan_tier)


def register(mcp: MCPServer[Any]) -> None:
    @mcp.tool(title="Change Pool Tier", annotations=_change(destructive=True), meta=APP_META)
    async def change_pool_tier(
        cluster: ClusterArg,
        pool: PoolArg,
        size: Annotated[Name, Field(description="The new machine tier id, e.g. `dks.c5.2xlarge`.")],
        card: Annotated[Card, Resolve(plan_tier)],
        answer: Annotated[ElicitationResult[Confirm], Resolve(ask_tier)],
        ctx: Context[Any, Any],
        new_name: Annotated[
            Name | None, Field(description="The new pool's name; default `<pool>-<tier>`, e.g. `workers-c5-2xlarge`.")
        ] = None,
        keep_name: Annotated[
            Flag, Field(description="Bring the old name back in the new tier (3 more steps).")
        ] = False,
    ) -> Annotated[CallToolResult, ChangeResult]:
        """Move a pool to another machine tier, one card approved once: add a pool in the new tier, wait
        until its workers are Running, remove the old pool. Use it, not separate add and remove cards."""
        return change_answer(await decide(card, answer, ctx))

    @mcp.tool(
        title="Stop Plan",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def stop_plan(
        ctx: Context[Any, Any],
        card_id: Annotated[str, Field(max_length=CARD_ID_MAX, description="The plan card's id (`card_…`).")],
    ) -> Annotated[CallToolResult, ChangeResult]:
        """Stop a change_pool_tier plan before its next step. Sends nothing to Door; what is done stays."""
        runtime = runtime_of(ctx)
        by = runtime.approver(ctx, "stop_plan")
        with card_errors():
            card = await runtime.service.stop_plan(card_id, by=by, principal=runtime.principal(ctx))
        if card.status is CardStatus.EXECUTING:
            message = STOP_SAID.format(card=card.id)
        elif card.status is CardStatus.DECLINED:
            message = "The plan was not approved yet: its card is declined and nothing was changed."
        else:
            said = card.result.message if card.result is not None else ""
            message = f"The plan is already {card.status.value}; nothing to stop. {said}".strip()
        changed: bool = any(s.kind == "add" and s.status == "done" for s in card.steps)
        return change_answer(ChangeResult(status=card.status, changed=changed, message=message, card=card))
