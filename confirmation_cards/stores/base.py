"""What every card store promises (``CardStore``), and the pieces both engines share.

Single use (DESIGN.md property 3) is a guarded state change: ``transition`` moves a card only from
the state the caller expects, in one transaction, and says whether it did. Fifty concurrent
approvals of one card therefore see one ``pending → executing`` and forty-nine refusals.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from confirmation_cards.models import AuditEvent, AuditKind, Card, CardApproval, CardStatus


@dataclass(frozen=True)
class Lease:
    """Who executes a card (``host:pid:instance``), until when, and whether its Door call may have left."""

    card_id: str
    executor: str | None
    until: datetime | None
    sending: bool


@dataclass(frozen=True)
class AuditEntry:
    """An audit row to append, before the store gives it a sequence number."""

    event: AuditKind
    at: datetime
    by: str | None = None
    status_code: int | None = None
    operation_id: str | None = None
    rule: str | None = None
    detail: str = ""
    request_id: str | None = None


AuditObserver = Callable[[AuditEvent, Card], None]
"""Called with every audit row a store has committed, and the card it belongs to (``confirmation_cards.audit_log``)."""


class CardStore(Protocol):
    """What the approval service needs from a store of cards."""

    async def create(self, card: Card) -> Card:
        """Save a new pending card and audit ``created``; a card id can be saved once."""
        ...

    async def get(self, card_id: str) -> Card | None: ...

    async def list(self, status: CardStatus | None = None) -> list[Card]: ...

    async def audit(self, card_id: str) -> builtins.list[AuditEvent]: ...

    async def audit_since(self, since: datetime) -> builtins.list[tuple[AuditEvent, Card]]:
        """Every audit row written at or after ``since``, in sequence order, each with its card."""
        ...

    async def transition(
        self,
        card_id: str,
        *,
        expected: CardStatus,
        to: CardStatus,
        entry: AuditEntry,
        update: Mapping[str, Any] | None = None,
        live_at: datetime | None = None,
    ) -> Card | None:
        """Move a card from ``expected`` to ``to`` and append ``entry``, atomically.

        ``update`` sets other card fields at the same time. With ``live_at``, a card that has
        expired by then does not move. Returns the card as it is now, or None when it did not move.
        """
        ...

    async def due(self, now: datetime) -> builtins.list[str]:
        """Ids of pending cards whose expiry has passed at ``now``."""
        ...

    async def find_live(
        self, principal: str | None, action: str, digest: str, fingerprint: str, now: datetime
    ) -> Card | None:
        """The newest pending, unexpired card of this principal for this exact request and target state."""
        ...

    async def find_asked(self, principal: str | None, action: str, digest: str) -> Card | None:
        """This principal's card for this exact request: the newest pending one, else the newest."""
        ...

    async def claim(
        self,
        card_id: str,
        *,
        executor: str,
        until: datetime,
        entry: AuditEntry,
        update: Mapping[str, Any],
        live_at: datetime,
    ) -> Card | None:
        """``pending → executing`` owned by ``executor`` with a lease until ``until``; None when it did not move."""
        ...

    async def advance(
        self, card_id: str, executor: str, *, update: Mapping[str, Any], entry: AuditEntry
    ) -> Card | None:
        """Change fields of an executing card ``executor`` still owns (a plan's step state) and append
        ``entry``, atomically; None when the card is no longer executing or no longer ``executor``'s."""
        ...

    async def mark_sending(self, card_id: str, executor: str) -> bool:
        """Record that the Door call of an executing card owned by ``executor`` is about to leave."""
        ...

    async def renew(self, card_id: str, executor: str, until: datetime) -> bool:
        """Extend the lease of an executing card ``executor`` still owns."""
        ...

    async def leases(self) -> builtins.list[Lease]:
        """The executing cards and their leases."""
        ...

    async def take_over(self, card_id: str, *, old: str | None, new: str, until: datetime, entry: AuditEntry) -> bool:
        """Become the executor of an executing card whose executor is still ``old`` (a dead one)."""
        ...

    async def add_approval(
        self, card_id: str, approval: CardApproval, *, entry: AuditEntry, live_at: datetime
    ) -> Card | None:
        """Append one person's approval to a pending, unexpired card (``Card.approvals`` and the store's
        append-only approvals table, keyed by card and principal) with ``entry``, atomically.

        None, and nothing written, when the card is not pending, has expired by ``live_at``, or
        ``approval.principal`` already approved it: one approval per person per card."""
        ...

    async def set_link(self, card_id: str, link_hash: str) -> bool:
        """Bind a pending card's approval-page link (by its secret's hash), replacing any earlier link."""
        ...

    async def has_link(self, card_id: str, link_hash: str) -> bool:
        """Whether ``link_hash`` is the pending card's current, unused link."""
        ...

    async def use_link(self, card_id: str, link_hash: str) -> bool:
        """Spend the pending card's link, atomically: true for exactly one caller."""
        ...

    async def ping(self) -> None:
        """Raise when the store cannot be read (the server's ``/healthz``)."""
        ...

    async def close(self) -> None: ...


def timestamp(when: datetime) -> float:
    """A moment as the stores keep it: seconds since the epoch, UTC."""
    return when.astimezone(UTC).timestamp()


def created_entry(card: Card) -> AuditEntry:
    """The audit row every store appends with a new card: what it will send, the body's digest and, under
    a policy, the rules that applied, the approvals each needs and their digest."""
    detail = f"{card.action} {card.method} {card.path} body sha256 {card.body_digest}"
    if card.policy is not None:
        needs = "; ".join(f"{r.rule} needs {r.approvals}" for r in card.policy.requirements) or "no approvals"
        detail += f"; policy rules {', '.join(card.policy.rules)} ({needs}), policy sha256 {card.policy.digest}"
    return AuditEntry("created", card.created_at, detail=detail)


def moved(card: Card, update: Mapping[str, Any], to: CardStatus) -> Card:
    """``card`` in state ``to`` with ``update`` applied, re-validated rather than model_copy'd, so an
    update can never smuggle in a malformed field."""
    return Card.model_validate({**card.model_dump(), **update, "status": to})


def with_approval(card: Card, approval: CardApproval, live_at: datetime) -> Card | None:
    """``card`` with ``approval`` appended, or None when it has expired by ``live_at``. One approval per
    person is the approvals table's primary key (card, principal), in the same transaction."""
    if live_at >= card.expires_at:
        return None
    return moved(card, {"approvals": (*card.approvals, approval)}, CardStatus.PENDING)


def lease_of(row: tuple[Any, ...] | Any) -> Lease:
    """A lease from a row of (id, executor, lease_until, sending)."""
    until = None if row[2] is None else datetime.fromtimestamp(row[2], UTC)
    return Lease(row[0], row[1], until, bool(row[3]))


AUDIT_COLUMNS = (
    "seq", "card_id", "at", "event", "by", "status_code", "operation_id", "rule", "detail", "status", "request_id", "replica"
)  # fmt: skip
"""The audit table's columns, in the order both stores select them."""

logger = logging.getLogger("confirmation_cards.stores")


def audit_event(row: Iterable[Any]) -> AuditEvent:
    """An audit row, selected as ``AUDIT_COLUMNS``, as an ``AuditEvent``."""
    return AuditEvent.model_validate(dict(zip(AUDIT_COLUMNS, row, strict=True)))


def notify(observer: AuditObserver | None, appended: Iterable[tuple[AuditEvent, Card]]) -> None:
    """Hand committed rows to the observer; whatever it raises is logged and never reaches the card."""
    if observer is None:
        return
    for event, card in appended:
        try:
            observer(event, card)
        except Exception:
            logger.exception("the audit observer failed on row %s of card %s", event.seq, event.card_id)
