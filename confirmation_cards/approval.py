"""The only path from a card to the backend: consume it once, re-check the target, execute, record.

``approve`` is called by an approval channel the model cannot drive (DESIGN.md property 1); it
never raises for anything Door answers: every outcome is a card status with a plain result.

Outcomes are honest (property 11). Before the Door call leaves, the card records that it is
``sending``; from then on only Door's own refusal of the request (a 4xx rule answer) may say
"nothing was changed". Any other failure (a 5xx, a timeout, a broken connection, a key still in
flight) is settled by reading Door back for a bounded time: ``executed`` when the change is there,
else ``outcome_unknown`` with what to check.

Executing cards carry a lease (``executor`` = host, pid and instance; ``lease_until``) renewed while
the call runs. A card whose executor is gone (a dead pid on this host, or a lapsed lease) is settled
by any server on the store, at start and by its periodic sweep (``settle_orphans``), never while its
own process still runs it (the read-back and the orphans: ``confirmation_cards.settling``).

A card under the team's policy (``Card.policy``, issue 28) waits for its approvers: ``approve_as``
records one verified person's approval (``confirmation_cards.approvals`` counts them) and executes
the card, as its owner, once every requirement is met; ``approve`` (the requester's own channel)
executes it only when the requester's approval alone meets them. Anything else is ``ApprovalRefused``.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Awaitable, Callable
from datetime import datetime

import anyio

from backend_client.errors import DoorError, DoorStatusError
from confirmation_cards.actions import ACTIONS, request_line
from confirmation_cards.answers import explain, proves_nothing_changed
from confirmation_cards.approvals import (
    REVIEW_HINT,
    ApprovalRefused,
    Approver,
    approval_by,
    approver_label,
    counts_for,
    is_requester,
    needs_approvers,
    outstanding,
    refusal,
    requester_of,
    requirements,
    waiting_line,
    would_complete,
)
from confirmation_cards.door import DoorApi
from confirmation_cards.errors import CardNotFound
from confirmation_cards.leases import HOST, LEASE
from confirmation_cards.models import AuditKind, Card, CardResult, CardStatus, StepStatus, request_digest
from confirmation_cards.owners import FixedDoor, NoCredential, NoDoor, Owners, current_door
from confirmation_cards.planner import utc_now
from confirmation_cards.plans import PLAN_STEP_TIMEOUT, PlanRunner, Progress
from confirmation_cards.roles import RoleMemory
from confirmation_cards.settling import ORPHAN_SETTLE_WINDOW, Settling
from confirmation_cards.stores import AuditEntry, CardStore
from confirmation_cards.targets import (
    describe_changes,
    fingerprint,
    new_operation_id,
    operation_ids,
    read_target,
)

log = logging.getLogger("confirmation_cards")

RENEW_EVERY = 10.0
"""Seconds (real time) between two renewals of a running execution's lease."""
SETTLE_WINDOW = 30.0
"""Seconds (Door's time) an unclear answer is settled for by reading Door back, before ``outcome_unknown``."""

Sleep = Callable[[float], Awaitable[None]]


class ApprovalService(Settling):
    """Decides cards held in ``store``; ``clock`` is the time expiry and leases are measured against.

    ``sleep`` waits Door's time while settling an unclear answer; ``roles`` remembers Door's 403s.
    ``owners`` finds the Door credential of each card's owner (DESIGN.md property 13): with it, every
    request of a card, a plan's steps and a stopped server's cards alike, goes as the card's owner,
    whatever client the approving channel passes; without it (a library caller that owns every card
    it approves), the ``door`` given to ``approve`` runs the card.
    """

    def __init__(
        self,
        store: CardStore,
        *,
        clock: Callable[[], datetime] = utc_now,
        sleep: Sleep = anyio.sleep,
        roles: RoleMemory | None = None,
        settle_window: float = SETTLE_WINDOW,
        step_timeout: float = PLAN_STEP_TIMEOUT,
        owners: Owners | None = None,
    ) -> None:
        self._store = store
        self.owners = owners
        self._clock = clock
        self._sleep = sleep
        self.roles = roles if roles is not None else RoleMemory()
        self.settle_window = settle_window
        self.executor = f"{HOST}:{os.getpid()}:{secrets.token_hex(4)}"
        self._executing: set[str] = set()
        self._sent: set[str] = set()  # executing here, and the Door call may have left
        self.plans = PlanRunner(
            store,
            executor=self.executor,
            clock=clock,
            sleep=sleep,
            finish=self._finish,
            renew=lambda card_id: store.renew(card_id, self.executor, self._clock() + LEASE),
            step_timeout=step_timeout,
            resume_window=min(settle_window, ORPHAN_SETTLE_WINDOW),
        )

    async def get(self, card_id: str, *, principal: str | None = None) -> Card:
        """The card as it stands now: a pending card past its expiry is expired first (property 4).

        With ``principal``, a card planned by another principal is not found (property 12): the
        answer is the same as for an id that never existed.
        """
        card = await self._require(card_id, principal)
        if card.status is CardStatus.PENDING and self._clock() >= card.expires_at:
            return await self._expire(card)
        return card

    async def approve(
        self,
        card_id: str,
        *,
        approver: str,
        door: DoorApi | None = None,
        principal: str | None = None,
        progress: Progress | None = None,
        person: Approver | None = None,
    ) -> Card:
        """Execute the card's request once, as its owner, if it is still pending, live and current.

        The request goes through the owner's client from ``owners`` (``door`` only when the service
        has none); the fingerprint of that credential is recorded, and a plan's later steps go only
        with the same one. A plan card runs all its steps (``PlanRunner``), reporting each to ``progress``.

        A card that is not pending comes back unchanged, so a replay executes nothing; one whose owner
        has no usable credential is ``failed`` with nothing sent. Raises ``CardNotFound`` for an
        unknown id or another principal's card; never raises for what Door answers.
        """
        pending = await self._require(card_id, principal)
        if needs_approvers(pending) and pending.status is CardStatus.PENDING:
            # The requester's own channel: it approves only when their approval alone completes the policy.
            who = person if person is not None else requester_of(pending)
            if not would_complete(pending, who):
                raise ApprovalRefused(
                    f"This card cannot be approved here: it {waiting_line(pending, who)}. "
                    f"{REVIEW_HINT.format(card=pending.id)}"
                )
            recorded = await self._record(pending, who, approver)
            if recorded.status is not CardStatus.PENDING or outstanding(recorded):
                return recorded
        return await self._run(card_id, approver=approver, owners=self._owners(door), progress=progress)

    async def approve_as(
        self, card_id: str, approver: Approver, *, channel: str = "review page", progress: Progress | None = None
    ) -> Card:
        """One verified person's approval of a card waiting for the policy's approvers.

        Records it (append-only, once per person, with the claims it was judged by and the rules it
        counts for); when every requirement is met, claims the card (``pending → executing``, single
        use) and executes it as its owner, with the owner's own Door credential (``owners``), never
        the approver's. A card that is not pending comes back unchanged. Raises ``ApprovalRefused``
        (nothing changes) when the person does not qualify for any outstanding requirement, asked
        for the change and may not approve it, or approved it already; ``CardNotFound`` for an unknown id.
        """
        card = await self.get(card_id)
        if card.status is not CardStatus.PENDING:
            return card
        if not needs_approvers(card):
            if not is_requester(card, approver):
                raise ApprovalRefused(
                    "You cannot approve this card: no policy rule asks for approvers on it, so only the person "
                    "who asked for it may approve it, in their own MCP client."
                )
            return await self.approve(card_id, approver=f"{approver_label(approver)} ({channel})", person=approver)
        reason = refusal(card, approver)
        if reason is not None:
            raise ApprovalRefused(reason)
        recorded = await self._record(card, approver, f"{approver_label(approver)} ({channel})")
        if recorded.status is not CardStatus.PENDING or outstanding(recorded):
            return recorded
        names = ", ".join(approver_label(a) for a in recorded.approvals)
        by = f"{approver_label(approver)} ({channel}); approvals: {names}"
        return await self._run(card_id, approver=by, owners=self._owners(None), progress=progress)

    async def decline_as(
        self, card_id: str, approver: Approver, *, reason: str = "declined", channel: str = "review page"
    ) -> Card:
        """A decline by the requester or by a person who qualifies for one of the card's requirements
        ends the card; anyone else is refused (``ApprovalRefused``) and nothing changes."""
        card = await self.get(card_id)
        if card.status is not CardStatus.PENDING:
            return card
        rules = [r.rule for r in requirements(card) if counts_for(card, r, approver)]
        if not is_requester(card, approver) and not rules:
            raise ApprovalRefused(
                "You cannot decline this card: only the person who asked for it, or a person who may approve it "
                f"({waiting_line(card) or 'its requester only'}), may decline it."
            )
        said = f" (as approver for rule {', '.join(rules)})" if rules and not is_requester(card, approver) else ""
        return await self.decline(card_id, by=f"{approver_label(approver)} ({channel}){said}", reason=reason)

    async def _record(self, card: Card, who: Approver, by: str) -> Card:
        """Append ``who``'s approval of a pending card; the card as it stands after (or as it was decided)."""
        now = self._clock()
        approval = approval_by(card, who, now, channel=by)
        left = outstanding(card, [*card.approvals, approval])
        still = "; ".join(f"{r.rule} needs {n} more" for r, n in left) or "every requirement is met"
        entry = AuditEntry(
            "approval",
            now,
            by=by,
            rule=", ".join(approval.rules) or None,
            detail=f"counts for {', '.join(approval.rules) or 'no rule'}; {still}",
        )
        recorded = await self._store.add_approval(card.id, approval, entry=entry, live_at=now)
        if recorded is not None:
            return recorded
        current = await self.get(card.id)
        if current.status is CardStatus.PENDING and any(a.principal == who.principal for a in current.approvals):
            raise ApprovalRefused(f"You already approved this card; it still {waiting_line(current, who)}.")
        return current

    async def _run(self, card_id: str, *, approver: str, owners: Owners, progress: Progress | None) -> Card:
        """Claim a pending card once and carry it out as its owner."""
        pending = await self._require(card_id)
        if pending.status is CardStatus.PENDING and pending.policy is not None:
            from confirmation_cards.policy import policy_digest  # loaded where a card carries a policy

            policy = pending.policy
            if policy_digest(policy.rules, policy.requirements) != policy.digest or outstanding(pending):
                # The policy on the card is not the one it was planned with, or it is not met: never execute.
                raise ApprovalRefused(
                    f"This card cannot be approved yet: it {waiting_line(pending) or 'does not match its policy digest'}."
                )
        missing: NoCredential | None = None
        credential: str | None = None
        try:
            credential = (await owners.door_for(pending)).fingerprint
        except NoCredential as error:
            missing = error
        now = self._clock()
        claimed = await self._store.claim(
            card_id,
            executor=self.executor,
            until=now + LEASE,
            entry=AuditEntry("approved", now, by=approver),
            update={"approved_by": approver, "approved_at": now, "credential": credential},
            live_at=now,
        )
        if claimed is None:
            # Someone else consumed it, it was decided already, or it expired: never execute.
            return await self.get(card_id)
        card = claimed
        if missing is not None:
            result = CardResult(
                message=f"Nothing was sent to Door: a card runs only with its owner's own Door credential, and "
                f"{missing.why}. Connect it and plan the change again."
            )
            return await self._finish(card, CardStatus.FAILED, result)
        self._executing.add(card.id)
        done: Card | None = None
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._keep_lease, card.id)
                try:
                    if card.steps:
                        done = await self.plans.run(card, owners, progress)
                    else:
                        done = await self._execute(card, owners)
                finally:
                    group.cancel_scope.cancel()
        except BaseException as error:
            # A bug or a cancellation after the claim: never leave the card executing, never guess.
            with anyio.CancelScope(shield=True):  # record the outcome even while being cancelled
                await self._interrupted(card, error)
            raise
        finally:
            self._executing.discard(card.id)
            self._sent.discard(card.id)
        assert done is not None
        return done

    async def decline(self, card_id: str, *, by: str, reason: str = "declined", principal: str | None = None) -> Card:
        """Decline a pending card; an expired one is reported as expired, a decided one comes back unchanged.

        A cancel is a decline with ``reason="cancelled"``.
        """
        card = await self._require(card_id, principal)
        now = self._clock()
        moved = await self._store.transition(
            card_id,
            expected=CardStatus.PENDING,
            to=CardStatus.DECLINED,
            entry=AuditEntry("declined", now, by=by, detail=reason),
            update={"declined_by": by, "decided_at": now, "result": CardResult(message=f"Declined by {by}: {reason}.")},
            live_at=now,
        )
        return moved if moved is not None else await self.get(card.id)

    def _owners(self, door: DoorApi | None) -> Owners:
        if self.owners is not None:
            return self.owners
        return FixedDoor(door) if door is not None else NoDoor("no Door client was given to act for its owner")

    async def stop_plan(self, card_id: str, *, by: str, principal: str | None = None) -> Card:
        """Ask a running plan to stop before its next step (nothing in Door changes); a pending plan is declined."""
        card = await self._require(card_id, principal)
        if card.status is CardStatus.PENDING:
            return await self.decline(card_id, by=by, reason="stopped before approval", principal=principal)
        if card.status is not CardStatus.EXECUTING or not card.steps:
            return card
        moved = await self._store.transition(
            card_id,
            expected=CardStatus.EXECUTING,
            to=CardStatus.EXECUTING,
            entry=AuditEntry("stop_requested", self._clock(), by=by),
            update={"stop_requested_by": by},
        )
        return moved if moved is not None else await self.get(card_id)

    async def expire_due(self) -> list[Card]:
        """Mark every pending card past its expiry as expired; returns those it marked."""
        now = self._clock()
        expired: list[Card] = []
        for card_id in await self._store.due(now):
            card = await self._store.get(card_id)
            if card is not None and card.status is CardStatus.PENDING:
                moved = await self._expire(card)
                if moved.status is CardStatus.EXPIRED:
                    expired.append(moved)
        return expired

    async def _keep_lease(self, card_id: str) -> None:
        while True:
            await anyio.sleep(RENEW_EVERY)
            await self._store.renew(card_id, self.executor, self._clock() + LEASE)

    # --- execution -----------------------------------------------------------------------------

    async def _execute(self, card: Card, owners: Owners) -> Card:
        # Property 2: the stored request must still be the one that was shown, and the call made
        # from the card's cluster and target must be the one its digest covers.
        sent = request_line(card.action, card.cluster_id, card.target)
        if request_digest(card.method, card.path, card.body) != card.body_digest or sent != (card.method, card.path):
            return await self._finish(
                card,
                CardStatus.FAILED,
                CardResult(message="The card's request does not match its digest; nothing was sent. Plan it again."),
            )
        try:
            door = await current_door(owners, card)
        except NoCredential as missing:
            message = (
                f"Nothing was sent to Door: a card runs only with its owner's own Door credential, and {missing.why}."
            )
            return await self._finish(card, CardStatus.FAILED, CardResult(message=message))
        try:
            now_snapshot = await read_target(
                door, card.action, card.cluster_id, card.target, planned=card.target_snapshot
            )
        except DoorError as error:
            return await self._finish(card, CardStatus.FAILED, explain(error, before=True))
        if fingerprint(now_snapshot) != card.target_fingerprint:
            changes = describe_changes(card.target_snapshot, now_snapshot, target=card.target)
            said = "; ".join(changes) if changes else "its state differs from when the card was made"
            return await self._finish(
                card,
                CardStatus.STALE,
                CardResult(
                    message=f"Nothing was changed: {card.target} changed since this card was shown ({said}). "
                    "Plan the change again against the current state."
                ),
            )
        known = await operation_ids(card, door)
        if not await self._store.mark_sending(card.id, self.executor):
            return await self.get(card.id)  # no longer ours (taken over as orphaned): send nothing
        self._sent.add(card.id)
        try:
            await self._call(card, door)
        except DoorError as error:
            if proves_nothing_changed(error):
                self._learn_role(card, error)
                return await self._finish(card, CardStatus.FAILED, explain(error, before=False))
            return await self._settle(card, door, f"Door's answer was unclear ({error})", known)
        operation_id = await new_operation_id(card, door, known)
        return await self._finish(
            card,
            CardStatus.EXECUTED,
            CardResult(
                status_code=202,
                operation_id=operation_id,
                message=ACTIONS[card.action].accepted.format(target=card.target),
            ),
        )

    @staticmethod
    async def _call(card: Card, door: DoorApi) -> None:
        """The one backend mutation, keyed by the card id so a retry replays instead of repeating (property 6)."""
        await ACTIONS[card.action].execute(door, card)

    def _learn_role(self, card: Card, error: DoorError) -> None:
        """Door's 403 to an approved change (R-AUTH-03): this token is not super_admin in that organisation."""
        if isinstance(error, DoorStatusError) and error.status_code == 403 and card.principal and card.organisation:
            self.roles.deny(card.principal, card.organisation)

    # --- state changes ---------------------------------------------------------------------------

    async def _require(self, card_id: str, principal: str | None = None) -> Card:
        card = await self._store.get(card_id)
        if card is None or (principal is not None and card.principal is not None and card.principal != principal):
            raise CardNotFound(card_id)
        return card

    async def _interrupted(self, card: Card, error: BaseException) -> None:
        if card.steps:
            return  # a plan stays executing, its steps recorded: the next sweep here or elsewhere continues it
        if card.id not in self._sent:
            result = CardResult(
                message=f"The approval was interrupted ({type(error).__name__}) before the request was sent to "
                "Door; nothing was changed. Plan it again if it is still wanted."
            )
            await self._finish(card, CardStatus.FAILED, result)
            return
        await self._finish(
            card,
            CardStatus.OUTCOME_UNKNOWN,
            self._unknown(card, f"the approval was interrupted ({type(error).__name__}) after the request was sent"),
        )

    async def _expire(self, card: Card) -> Card:
        now = self._clock()
        moved = await self._store.transition(
            card.id,
            expected=CardStatus.PENDING,
            to=CardStatus.EXPIRED,
            entry=AuditEntry("expired", now, detail=f"expired at {card.expires_at.isoformat()}"),
            update={
                "decided_at": now,
                "result": CardResult(message="This card expired before anyone approved it; nothing was changed."),
            },
        )
        return moved if moved is not None else await self._require(card.id)

    async def _finish(self, card: Card, status: CardStatus, result: CardResult) -> Card:
        """Leave ``executing`` for a final state; the audit event is named after it."""
        events: dict[CardStatus, AuditKind] = {
            CardStatus.EXECUTED: "executed",
            CardStatus.STALE: "stale",
            CardStatus.OUTCOME_UNKNOWN: "outcome_unknown",
            CardStatus.STOPPED: "stopped",
        }
        event = events.get(status, "failed")
        entry = AuditEntry(
            event,
            self._clock(),
            status_code=result.status_code,
            operation_id=result.operation_id,
            rule=result.rule,
            detail=result.message,
            request_id=result.request_id,
        )
        moved = await self._store.transition(
            card.id,
            expected=CardStatus.EXECUTING,
            to=status,
            entry=entry,
            update={"result": result, "decided_at": self._clock()},
        )
        if moved is not None:
            self._learn_allowed(moved)
        return moved if moved is not None else await self._require(card.id)

    def _learn_allowed(self, card: Card) -> None:
        """Door took a change of this card (R-AUTH-03 passed): the caller's role is enough in that organisation."""
        took = card.status is CardStatus.EXECUTED or any(
            s.status is StepStatus.DONE and s.kind != "wait" for s in card.steps
        )
        if took and card.principal and card.organisation:
            self.roles.allow(card.principal, card.organisation)
