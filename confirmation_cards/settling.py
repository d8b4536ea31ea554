"""Settling what an approval could not see through: an unclear Door answer, a card whose executor is gone.

``ApprovalService`` (``confirmation_cards.approval``) inherits this: ``_settle`` reads Door back for
a bounded time after an unclear answer (DESIGN.md property 11); ``settle_orphans`` takes over
executing cards whose executor is gone (a dead pid on this host, or a lapsed lease) and settles
each as its owner, never re-sending without a person's approval.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from backend_client.errors import DoorError
from confirmation_cards.actions import ACTIONS
from confirmation_cards.door import DoorApi
from confirmation_cards.leases import LEASE, executor_alive
from confirmation_cards.models import Card, CardResult, CardStatus
from confirmation_cards.owners import NoCredential, Owners, current_door
from confirmation_cards.plans import PlanRunner
from confirmation_cards.stores import AuditEntry, CardStore, Lease
from confirmation_cards.targets import new_operation_id, shows_change

log = logging.getLogger("confirmation_cards")

ORPHAN_SETTLE_WINDOW = 10.0
"""An orphan's read-back is shorter, so lease (30 s) + sweep (≤ 20 s) + read-back stays within 60 s."""
SETTLE_POLL = 2.0
"""Seconds (Door's time) between two read-backs while settling."""


class Settling:
    """The settling half of ``ApprovalService``; the attributes and the two methods below are its."""

    _store: CardStore
    _clock: Callable[[], datetime]
    _sleep: Callable[[float], Awaitable[None]]
    _executing: set[str]
    settle_window: float
    executor: str
    plans: PlanRunner

    def _owners(self, door: DoorApi | None) -> Owners:
        raise NotImplementedError

    async def _finish(self, card: Card, status: CardStatus, result: CardResult) -> Card:
        raise NotImplementedError

    # --- cards whose executor is gone ------------------------------------------------------------

    async def orphans(self) -> list[Lease]:
        """Executing cards whose executor is gone: never one this service or a live process on this host runs."""
        now = self._clock()
        return [
            lease
            for lease in await self._store.leases()
            if lease.card_id not in self._executing and not executor_alive(lease, now, mine=self.executor)
        ]

    async def settle_orphans(self, door: DoorApi | None = None) -> list[Card]:
        """Take over and settle every orphaned executing card, each as its owner (``owners``; ``door``
        only when the service has none).

        A card whose request never left is ``failed`` (nothing was sent); one whose request may
        have left is ``executed`` when reading Door back shows the change, else ``outcome_unknown``.
        A plan continues from its recorded step with its owner's credential, or stops before its
        next step saying which steps ran. Nothing is re-sent without a person's approval.
        """
        owners = self._owners(door)
        settled: list[Card] = []
        for lease in await self.orphans():
            now = self._clock()
            entry = AuditEntry("recovered", now, by=self.executor, detail=f"its executor {lease.executor} is gone")
            if not await self._store.take_over(
                lease.card_id, old=lease.executor, new=self.executor, until=now + LEASE, entry=entry
            ):
                continue  # another server took it first
            card = await self._store.get(lease.card_id)
            if card is None:
                continue
            self._executing.add(card.id)
            try:
                if card.steps:
                    settled.append(await self.plans.run(card, owners))  # continued from its recorded step
                    continue
                settled.append(await self._settle_orphan(card, lease, owners))
            finally:
                self._executing.discard(card.id)
        return settled

    async def _settle_orphan(self, card: Card, lease: Lease, owners: Owners) -> Card:
        if not lease.sending:
            return await self._finish(
                card,
                CardStatus.FAILED,
                CardResult(
                    message="The server approving this card stopped before its request was sent to Door, so nothing "
                    "was changed. Plan the change again if it is still wanted."
                ),
            )
        try:
            door = await current_door(owners, card)
        except NoCredential as missing:
            why = f"the server approving it stopped, and Door was not read back since {missing.why}"
            return await self._finish(card, CardStatus.OUTCOME_UNKNOWN, self._unknown(card, why))
        return await self._settle(
            card,
            door,
            "the server approving it stopped before recording Door's answer",
            None,
            window=min(self.settle_window, ORPHAN_SETTLE_WINDOW),
        )

    async def _settle(
        self, card: Card, door: DoorApi, why: str, known: set[str] | None, *, window: float | None = None
    ) -> Card:
        """Read Door back for up to ``window`` seconds (``settle_window`` by default): ``executed`` if the
        change is there, else unknown."""
        window = self.settle_window if window is None else window
        waited = 0.0
        while True:
            try:
                applied = await shows_change(card, door, known)
            except DoorError as error:
                log.info("reading Door back for card %s failed: %s", card.id, type(error).__name__)
                applied = False
            if applied:
                operation_id = await new_operation_id(card, door, known)
                return await self._finish(
                    card,
                    CardStatus.EXECUTED,
                    CardResult(
                        operation_id=operation_id,
                        message=f"{why[:300]}; reading Door back shows the change took effect, once (the card id "
                        f"was the idempotency key). {ACTIONS[card.action].accepted.format(target=card.target)}",
                    ),
                )
            if waited >= window:
                return await self._finish(card, CardStatus.OUTCOME_UNKNOWN, self._unknown(card, why))
            delay = min(SETTLE_POLL, window - waited)
            await self._sleep(delay)
            waited += delay

    def _unknown(self, card: Card, why: str) -> CardResult:
        what = "the node's replacement" if card.action == "replace_node" else f"pool {card.target}"
        return CardResult(
            message=f"Outcome unknown: {why[:300]}, and reading Door back did not show the change. It may still "
            f"happen, at most once (the card id is the idempotency key). Check {what} on cluster "
            f"{card.cluster_name} (get_cluster, and get_cluster_operations for a recent "
            f"{ACTIONS[card.action].operation} on {card.target}) before planning it again."
        )
