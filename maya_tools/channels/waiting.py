"""Cards that wait for the policy's approvers (``MAYA_POLICY``): what the caller's channel says instead of asking.

A card whose requirements the caller cannot meet alone (another person must approve, or a claim
the caller does not hold) is not offered to the caller as an approval in any channel: the change
tool returns it ``pending`` at once, saying who must approve and where (the review page,
``/cards/<card id>`` on ``MAYA_PUBLIC_URL``); the Apps view's Approve is disabled with that reason;
the approval page and ``decide_card`` refuse with it. The approval service refuses such an
approval too (``ApprovalRefused``), whatever a channel does.
"""

from __future__ import annotations

from confirmation_cards import Approver, Card, CardStatus
from confirmation_cards.approvals import needs_approvers, waiting_line, would_complete
from confirmation_cards.render import when
from maya_tools.runtime import Runtime

REVIEW_PATH = "/cards"
"""The approvers' review pages: ``/cards`` lists what a person may approve, ``/cards/<card id>`` one card."""


def review_url(runtime: Runtime, card: Card) -> str:
    """Where a person who may approve ``card`` does so."""
    base = runtime.settings.public_url
    path = f"{REVIEW_PATH}/{card.id}"
    return f"{base}{path}" if base else f"{path} on this server (MAYA_PUBLIC_URL)"


def waiting_for(card: Card, caller: Approver) -> str | None:
    """What ``card`` waits for, said to ``caller``, when the caller's own approval cannot complete it;
    None when the caller's channel may approve it (no policy requirement, or theirs alone meets them)."""
    if card.status is not CardStatus.PENDING or not needs_approvers(card) or would_complete(card, caller):
        return None
    return waiting_line(card, caller)


def waiting_message(runtime: Runtime, card: Card, line: str) -> str:
    """The change tool's answer for a waiting card: nothing changed, who must approve, where, until when."""
    return (
        f"Nothing has changed yet: card {card.id} {line}. A person who may approve it does so at "
        f"{review_url(runtime, card)}; it cannot be approved from this MCP client. It expires unapproved at "
        f"{when(card.expires_at)}; get_card shows what became of it."
    )


def refused_here(runtime: Runtime, card: Card, line: str) -> str:
    """A channel's refusal to approve a waiting card, naming the rule, the reason and where to go instead."""
    return f"Refused, nothing was changed: card {card.id} {line}. It is approved at {review_url(runtime, card)}."
