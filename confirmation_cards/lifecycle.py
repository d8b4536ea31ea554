"""A card's life around the person's answer: plan or reuse, ask, decide, outcome.

The channel that asks (MCP elicitation today) only adapts this: it turns what it heard into a
``Decision`` and hands it to ``decide``, which is the only place an answer becomes an approval.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from confirmation_cards.actions import request_line
from confirmation_cards.approval import ApprovalService
from confirmation_cards.approvals import Approver
from confirmation_cards.door import DoorApi
from confirmation_cards.models import Action, Card, CardStatus, request_digest
from confirmation_cards.plans import Progress
from confirmation_cards.stores import CardStore


@dataclass(frozen=True)
class Approve:
    """The person approved this card, through a channel the model cannot drive."""


@dataclass(frozen=True)
class Decline:
    """The person declined or cancelled (``reason`` says which, in words)."""

    reason: str = "declined"


@dataclass(frozen=True)
class NoChannel:
    """Nobody can be asked: the card stays pending and nothing executes (property 9)."""

    reason: str


@dataclass(frozen=True)
class AlreadyDecided:
    """The card was decided before this call could ask (a concurrent approval, a replayed round)."""

    status: CardStatus


Decision = Approve | Decline | NoChannel | AlreadyDecided


async def keep_or_store(store: CardStore, planned: Card, now: datetime) -> Card:
    """The live pending card for this exact request, target state and principal, stored once.

    Calls racing on one request share one card (and one question); an expired card, one planned
    against another state of the target or under other policy requirements, or another principal's
    card is never reused.
    """
    found = await store.find_live(
        planned.principal, planned.action, planned.body_digest, planned.target_fingerprint, now
    )
    if found is not None and _same_policy(found, planned):
        return found
    return await store.create(planned)


def _same_policy(found: Card, planned: Card) -> bool:
    """A card planned under other policy requirements (the policy file changed) is another card."""
    before = found.policy.digest if found.policy is not None else None
    now = planned.policy.digest if planned.policy is not None else None
    return before == now


async def asked_card(
    store: CardStore, principal: str | None, action: Action, cluster_id: str, target: str, body: dict[str, Any]
) -> Card | None:
    """On a later round of a question: this principal's card for this exact request, pending first.

    Only a card the same principal planned is found (property 12). Nothing is re-planned, so the
    answer meets the card it was given to, even when that card has since expired or its target
    changed (properties 4 and 5 then say so).
    """
    method, path = request_line(action, cluster_id, target)
    return await store.find_asked(principal, action, request_digest(method, path, body))


async def decide(
    service: ApprovalService,
    card: Card,
    decision: Decision,
    *,
    by: str,
    principal: str | None,
    door: DoorApi,
    progress: Progress | None = None,
    person: Approver | None = None,
) -> Card:
    """Carry out a decision on ``card``; returns the card as it stands after it.

    ``Approve`` executes once (consume, re-check, call Door, settle) when ``person`` (the requester,
    with their verified claims) may complete the card's policy alone, else raises ``ApprovalRefused``;
    ``Decline`` declines;
    ``NoChannel`` leaves the card pending; ``AlreadyDecided`` reports the card as it is.
    """
    if isinstance(decision, Approve):
        return await service.approve(
            card.id, approver=by, door=door, principal=principal, progress=progress, person=person
        )
    if isinstance(decision, Decline):
        return await service.decline(card.id, by=by, reason=decision.reason, principal=principal)
    return await service.get(card.id, principal=principal)
