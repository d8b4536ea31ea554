"""The only path from a card to the backend: consume it once, re-check the target, execute, record.

``approve`` is called by an approval channel the model cannot drive (DESIGN.md property 1); it
never raises for anything Door answers: every outcome is a card status with a plain result.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from backend_client.errors import DoorConnectionError, DoorError, DoorStatusError, OutcomeUnknown
from backend_client.models import OperationKind, PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from confirmation_cards.door import DoorApi
from confirmation_cards.errors import CardNotFound
from confirmation_cards.models import Action, AuditKind, Card, CardResult, CardStatus, request_digest
from confirmation_cards.planner import request_line, utc_now
from confirmation_cards.store import AuditEntry, CardStore
from confirmation_cards.targets import describe_changes, fingerprint, read_target

OPERATION_KIND: dict[Action, OperationKind] = {
    "add_node_pool": "pool.create",
    "scale_node_pool": "pool.update",
    "relabel_node_pool": "pool.update",
    "remove_node_pool": "pool.delete",
    "replace_node": "node.replace",
}

ACCEPTED = {
    "add_node_pool": "Door accepted the new pool {target}; its workers are being provisioned.",
    "scale_node_pool": "Door accepted the change to pool {target}; the workers follow in the background.",
    "relabel_node_pool": "Door accepted the new labels and tags of pool {target}.",
    "remove_node_pool": "Door accepted the removal of pool {target}; it is deleting until its workers are gone.",
    "replace_node": "Door accepted the replacement of node {target}; watch the node list for the new worker.",
}


# A card still executing this long after its approval belongs to a server that stopped: a Door
# call and its read-back end well within it (the client's timeout is 30 s, with two retries).
INTERRUPTED_AFTER = timedelta(minutes=5)


class ApprovalService:
    """Decides cards held in ``store``; ``clock`` is the time expiry is measured against."""

    def __init__(self, store: CardStore, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._store = store
        self._clock = clock

    def get(self, card_id: str) -> Card:
        """The card as it stands now: a pending card past its expiry is expired first (property 4)."""
        card = self._require(card_id)
        if card.status is CardStatus.PENDING and self._clock() >= card.expires_at:
            return self._expire(card)
        return card

    async def approve(self, card_id: str, *, approver: str, door: DoorApi) -> Card:
        """Execute the card's request once, through ``door``, if it is still pending, live and current.

        A card that is not pending comes back unchanged, so a replay executes nothing. Raises
        ``CardNotFound`` for an unknown id; never raises for what Door answers.
        """
        card = self._require(card_id)
        now = self._clock()
        claimed = self._store.transition(
            card_id,
            expected=CardStatus.PENDING,
            to=CardStatus.EXECUTING,
            entry=AuditEntry("approved", now, by=approver),
            update={"approved_by": approver, "approved_at": now},
            live_at=now,
        )
        if claimed is None:
            # Someone else consumed it, it was decided already, or it expired: never execute.
            return self.get(card_id)
        card = claimed
        try:
            return await self._execute(card, door)
        except BaseException as error:
            # A bug or a cancellation after the claim: record it so the card is not stuck in executing.
            self._finish(
                card,
                CardStatus.FAILED,
                CardResult(
                    message="The approval was interrupted before Door's answer was recorded "
                    f"({type(error).__name__}); the change may or may not have happened. "
                    "Check the cluster state before planning it again."
                ),
            )
            raise

    async def decline(self, card_id: str, *, by: str, reason: str = "declined") -> Card:
        """Decline a pending card; an expired one is reported as expired, a decided one comes back unchanged.

        A cancel is a decline with ``reason="cancelled"``.
        """
        card = self._require(card_id)
        now = self._clock()
        moved = self._store.transition(
            card_id,
            expected=CardStatus.PENDING,
            to=CardStatus.DECLINED,
            entry=AuditEntry("declined", now, by=by, detail=reason),
            update={"declined_by": by, "decided_at": now, "result": CardResult(message=f"Declined by {by}: {reason}.")},
            live_at=now,
        )
        return moved if moved is not None else self.get(card.id)

    def expire_due(self) -> list[Card]:
        """Mark every pending card past its expiry as expired; returns those it marked."""
        now = self._clock()
        expired: list[Card] = []
        for card_id in self._store.due(now):
            card = self._store.get(card_id)
            if card is not None and card.status is CardStatus.PENDING:
                moved = self._expire(card)
                if moved.status is CardStatus.EXPIRED:
                    expired.append(moved)
        return expired

    def recover_interrupted(self, *, older_than: timedelta = INTERRUPTED_AFTER) -> list[Card]:
        """Close cards left ``executing`` by a server that stopped mid-approval, as ``failed``.

        Door may or may not have received the call, so the result says so and points at the
        cluster's operations; nothing is re-sent without a person. Only cards approved longer
        ago than ``older_than`` are touched, so another server's approval in progress is not.
        """
        now = self._clock()
        recovered: list[Card] = []
        for card in self._store.list(status=CardStatus.EXECUTING):
            if card.approved_at is not None and now - card.approved_at < older_than:
                continue
            result = CardResult(
                message="The server stopped after this card was approved and before Door's answer was recorded; "
                "the change may or may not have happened (at most once: the card id was the idempotency key). "
                "Check the cluster's operations before planning it again."
            )
            moved = self._finish(card, CardStatus.FAILED, result)
            if moved.status is CardStatus.FAILED:
                recovered.append(moved)
        return recovered

    # --- execution -----------------------------------------------------------------------------

    async def _execute(self, card: Card, door: DoorApi) -> Card:
        # Property 2: the stored request must still be the one that was shown, and the call made
        # from the card's cluster and target must be the one its digest covers.
        sent = request_line(card.action, card.cluster_id, card.target)
        if request_digest(card.method, card.path, card.body) != card.body_digest or sent != (card.method, card.path):
            return self._finish(
                card,
                CardStatus.FAILED,
                CardResult(message="The card's request does not match its digest; nothing was sent. Plan it again."),
            )
        try:
            now_snapshot = await read_target(
                door, card.action, card.cluster_id, card.target, planned=card.target_snapshot
            )
        except DoorError as error:
            return self._finish(card, CardStatus.FAILED, _explain(error, before=True))
        if fingerprint(now_snapshot) != card.target_fingerprint:
            changes = describe_changes(card.target_snapshot, now_snapshot, target=card.target)
            said = "; ".join(changes) if changes else "its state differs from when the card was made"
            return self._finish(
                card,
                CardStatus.STALE,
                CardResult(
                    message=f"Nothing was changed: {card.target} changed since this card was shown ({said}). "
                    "Plan the change again against the current state."
                ),
            )
        try:
            await self._call(card, door)
        except DoorError as error:
            return self._finish(card, CardStatus.FAILED, _explain(error, before=False))
        operation_id = await self._operation_id(card, door)
        return self._finish(
            card,
            CardStatus.EXECUTED,
            CardResult(
                status_code=202, operation_id=operation_id, message=ACCEPTED[card.action].format(target=card.target)
            ),
        )

    @staticmethod
    async def _call(card: Card, door: DoorApi) -> None:
        """The one backend mutation, keyed by the card id so a retry replays instead of repeating (property 6)."""
        key = card.id
        if card.action == "add_node_pool":
            request = PublicNodePoolCreateRequest.model_validate(card.body)
            await door.add_node_pool(card.cluster_id, request, idempotency_key=key)
        elif card.action in ("scale_node_pool", "relabel_node_pool"):
            patch = PublicNodePoolPatchRequest.model_validate(card.body)
            await door.update_node_pool(card.cluster_id, card.target, patch, idempotency_key=key)
        elif card.action == "remove_node_pool":
            await door.remove_node_pool(card.cluster_id, card.target, idempotency_key=key)
        else:
            await door.replace_node(card.cluster_id, card.target, idempotency_key=key)

    @staticmethod
    async def _operation_id(card: Card, door: DoorApi) -> str | None:
        """The newest operation on the card's target, as Door lists it right after accepting (R-OP-03)."""
        try:
            state = await door.get_cluster_state(card.cluster_id)
        except DoorError:
            return None  # the change was accepted; a missing operation id does not undo that
        kind = OPERATION_KIND[card.action]
        operation = next((op for op in state.operations if op.kind == kind and op.target == card.target), None)
        return None if operation is None else operation.id

    # --- state changes ---------------------------------------------------------------------------

    def _require(self, card_id: str) -> Card:
        card = self._store.get(card_id)
        if card is None:
            raise CardNotFound(card_id)
        return card

    def _expire(self, card: Card) -> Card:
        now = self._clock()
        moved = self._store.transition(
            card.id,
            expected=CardStatus.PENDING,
            to=CardStatus.EXPIRED,
            entry=AuditEntry("expired", now, detail=f"expired at {card.expires_at.isoformat()}"),
            update={
                "decided_at": now,
                "result": CardResult(message="This card expired before anyone approved it; nothing was changed."),
            },
        )
        return moved if moved is not None else self._require(card.id)

    def _finish(self, card: Card, status: CardStatus, result: CardResult) -> Card:
        """Leave ``executing`` for a final state; the audit event is named after it."""
        events: dict[CardStatus, AuditKind] = {CardStatus.EXECUTED: "executed", CardStatus.STALE: "stale"}
        event = events.get(status, "failed")
        entry = AuditEntry(
            event,
            self._clock(),
            status_code=result.status_code,
            operation_id=result.operation_id,
            rule=result.rule,
            detail=result.message,
        )
        moved = self._store.transition(
            card.id,
            expected=CardStatus.EXECUTING,
            to=status,
            entry=entry,
            update={"result": result, "decided_at": self._clock()},
        )
        return moved if moved is not None else self._require(card.id)


def _explain(error: DoorError, *, before: bool) -> CardResult:
    """Door's refusal as a plain result: what happened, the rule, and what to do."""
    if isinstance(error, DoorStatusError):
        what = "Door refused the change" if not before else "Door refused to show the target again"
        detail = (error.problem.detail or error.problem.title).rstrip(".")
        rule = f" ({error.rule})" if error.rule else ""
        return CardResult(
            status_code=error.status_code,
            rule=error.rule,
            request_id=error.request_id,
            message=f"{what} with {error.status_code}{rule}: {detail}. {error.advice()} Nothing was changed.",
        )
    if isinstance(error, OutcomeUnknown | DoorConnectionError) and not before:
        return CardResult(
            message=f"Door did not give a clear answer ({error}). The card id was the idempotency key, so the "
            "change was made at most once; check the cluster state to see whether it happened."
        )
    return CardResult(message=f"Door could not be asked ({error}). Nothing was changed; plan the change again.")
