"""Approval through MCP elicitation, built on the SDK's resolver pattern.

A change tool has two resolved parameters: the card (planned, preflighted and stored before anyone
is asked) and the person's answer to it. The answer comes only from the client's elicitation
handler, a channel the model cannot drive (DESIGN.md property 1); no tool argument approves.

The SDK re-runs resolvers on every round of the 2026-07-28 ``input_required`` flow and pins a
recorded answer to the exact question it answered. So planning reuses a pending card for the same
request and target state: the question renders identically, and the answer given to it counts.
A replayed ``requestState`` meets a card that is no longer pending, so it plans a new card, the
question differs, and the SDK asks again instead of executing anything (property 3 still holds
in the store: approval is an atomic, single-use transition).
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
)
from pydantic import BaseModel, ConfigDict, Field

from confirmation_cards import Card, CardStatus, render_text
from maya_tools.errors import door_errors
from maya_tools.runtime import Runtime, runtime_of

Plan = Callable[..., Awaitable[Card]]


class Confirm(BaseModel):
    """The form a person answers: accepting it with ``approve`` ticked approves this one card."""

    approve: bool = Field(default=True, description="Approve exactly the change described on this card.")


class NoApprovalChannel(BaseModel):
    """The client cannot show an elicitation: the card stays pending and nothing executes (property 9)."""

    model_config = ConfigDict(frozen=True)
    reason: str


NO_CHANNEL = (
    "Nothing was changed. This MCP client cannot ask you to approve (it does not support MCP "
    "elicitation), so the card is pending and will expire unapproved at {expires}. To approve "
    "changes, use a client that supports elicitation (VS Code, Claude Code, Cursor, the Maya chat: "
    "`maya-tools chat`); a card is never approved automatically."
)


async def keep_or_store(runtime: Runtime, planned: Card, ctx: Context[Any, Any]) -> Card:
    """The pending card for this exact request and target state, stored once.

    Reusing it keeps the elicitation question identical across input_required rounds. On a
    later round (``request_state`` present) the card the person answered is kept even if it
    expired meanwhile or its target changed: approving it then reports it expired or stale
    (DESIGN.md properties 4 and 5) instead of quietly asking about a new card. A new call never
    reuses an expired card, nor one planned against another state of the target.
    """
    resuming = ctx.request_state is not None
    now = runtime.now()
    matches = [
        card
        for card in runtime.store.list(status=CardStatus.PENDING)
        if card.action == planned.action
        and card.body_digest == planned.body_digest
        and (resuming or (card.target_fingerprint == planned.target_fingerprint and card.expires_at > now))
    ]
    if matches:
        return max(matches, key=lambda card: card.created_at)
    runtime.store.create(planned)
    return planned


def question(card: Card) -> str:
    return (
        render_text(card)
        + "\n\nApprove this change? Accept with `approve` ticked to execute it once; decline to discard it."
    )


async def ask(card: Card, ctx: Context[Any, Any]) -> Elicit[Confirm] | NoApprovalChannel:
    """Ask the person, or report that nobody can be asked."""
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None or (elicitation.form is None and elicitation.url is not None):
        return NoApprovalChannel(reason=NO_CHANNEL.format(expires=card.expires_at.isoformat()))
    return Elicit(question(card), Confirm)


class ChangeResult(BaseModel):
    """What a change tool did: the card, its status, and in plain words what happened and what next."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: CardStatus
    changed: bool = Field(description="True only when Door accepted the change after a person approved it.")
    message: str
    operation_id: str | None = None
    card: Card


async def decide(
    card: Card, answer: ElicitationResult[Confirm] | AcceptedElicitation[Any], ctx: Context[Any, Any]
) -> ChangeResult:
    """Execute, decline or leave pending, according to the person's answer."""
    runtime = runtime_of(ctx)
    # One approver string per decision, so this call can tell whether it was the one that
    # consumed the card (fifty concurrent approvals: one executes, the rest report it).
    who = f"{runtime.approver(ctx)} #{secrets.token_hex(4)}"
    if isinstance(answer, AcceptedElicitation) and isinstance(answer.data, NoApprovalChannel):
        return ChangeResult(status=card.status, changed=False, message=answer.data.reason, card=card)
    if isinstance(answer, AcceptedElicitation) and isinstance(answer.data, Confirm) and answer.data.approve:
        with door_errors():
            done = await runtime.service.approve(card.id, approver=who, door=runtime.door(ctx))
        return outcome(done, decided_here=done.approved_by == who)
    reason = "cancelled" if answer.action == "cancel" else "declined"
    done = await runtime.service.decline(card.id, by=who, reason=reason)
    return outcome(done, decided_here=done.declined_by == who)


def outcome(card: Card, *, decided_here: bool) -> ChangeResult:
    result = card.result
    said = result.message if result is not None else ""
    if not decided_here and card.status in (CardStatus.EXECUTING, CardStatus.EXECUTED, CardStatus.DECLINED):
        # Someone else's decision on this card already stands; this call changed nothing.
        return ChangeResult(
            status=card.status,
            changed=False,
            message=f"This card was already {card.status.value} by another approval; nothing more was done. {said}".strip(),
            operation_id=result.operation_id if result else None,
            card=card,
        )
    if card.status == CardStatus.EXECUTED:
        message = f"Approved and sent to Door, which accepted it. {said}".strip()
        return ChangeResult(
            status=card.status,
            changed=True,
            message=message + " Follow it with get_cluster_operations.",
            operation_id=result.operation_id if result else None,
            card=card,
        )
    if card.status == CardStatus.DECLINED:
        return ChangeResult(status=card.status, changed=False, message="Declined: nothing was changed.", card=card)
    if card.status == CardStatus.EXPIRED:
        return ChangeResult(
            status=card.status,
            changed=False,
            message="The card expired before approval: nothing was changed.",
            card=card,
        )
    if card.status == CardStatus.STALE:
        return ChangeResult(
            status=card.status,
            changed=False,
            message=f"Nothing was changed: the target changed since the card was made. {said} Ask again for a fresh card.",
            card=card,
        )
    if card.status == CardStatus.FAILED:
        return ChangeResult(status=card.status, changed=False, message=f"Door refused the change: {said}", card=card)
    return ChangeResult(status=card.status, changed=False, message=said or f"Card {card.status.value}.", card=card)
