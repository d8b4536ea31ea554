"""A plan card's steps, carried out one by one after one approval, resumable and safe to stop.

Each step's state is written to the card store (``CardStore.advance``, guarded by the executor)
before its call leaves and after Door answers, so a server that dies mid-plan leaves the plan
``executing`` with a record of where it was; the next server on the store (or a live replica) takes
the lapsed lease over (``ApprovalService.settle_orphans``) and continues from that record. A step
found ``sending`` is settled by reading Door back (for ``resume_window``: the dead server's request
may still be in flight) and re-sent only when its change is still not there, with the same
``Idempotency-Key`` (``<card id>.<step>``), so Door never applies a step twice.

Before every step Door is read again (R-OP-03, R-POOL-02): the old pool must be as approved until it
is removed, and every pool a step made must be as that step made it; otherwise the plan stops before
removing anything and says why. A ``wait`` step has a deadline of Door's time (the setting
``MAYA_PLAN_STEP_TIMEOUT_SECONDS``); at the deadline the plan stops and the old pool stays.

Every request goes with the owner's own Door credential (DESIGN.md property 13), read again before
every step and every poll of a wait (``confirmation_cards.owners``): a credential that is gone
(disconnected on ``/connect``, never stored, not held by a restarted server) or replaced since the
approval stops the plan before its next request, and the result says so. ``DOOR_TOKEN`` never acts for
a person. A step that adds the old name back (``keep_name``) is sent only once the old pool has left
Door's list (R-DEL-02), not while it is still ``deleting``.

Outcomes come from what is known: a plan that stops (asked to, its owner's credential gone, Door not
as expected, or an unexpected error) says which steps ran, from their records, and, where Door can be
read, what Door holds now. "Nothing was changed" only when no step's request can have reached Door.

Statuses of a plan card: ``executed`` (every step done), ``failed`` (nothing was sent, or step 1
refused: nothing changed), ``stale`` (the old pool changed before step 1: nothing changed),
``stopped`` (stopped between steps; the result says which steps ran, which pools exist now and what
to do next), ``outcome_unknown`` (a step's request may have reached Door and neither its answer nor
reading Door back settled it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from backend_client.errors import DoorError
from backend_client.models import Cluster, PublicNodePoolCreateRequest
from confirmation_cards.answers import explain, proves_nothing_changed
from confirmation_cards.door import DoorApi
from confirmation_cards.models import Card, CardResult, CardStatus, PlanStep, StepStatus, plan_digest, step_digest
from confirmation_cards.owners import NoCredential, Owners, current_door
from confirmation_cards.plan_checks import Stop, applied, check_before, operation_of
from confirmation_cards.plan_words import next_move, ran, untouched, what_exists
from confirmation_cards.stores import AuditEntry, CardStore

log = logging.getLogger("confirmation_cards")

PLAN_STEP_TIMEOUT = 1800.0
"""Seconds (Door's time) a ``wait`` step may take before the plan stops (``MAYA_PLAN_STEP_TIMEOUT_SECONDS``)."""
PLAN_POLL = 5.0
"""Seconds (Door's time) between two reads of Door while a step waits."""
SETTLE_READS = 5
"""Read-backs of an unclear step answer, ``PLAN_POLL`` apart, before the step is ``outcome_unknown``."""

Progress = Callable[[float, float, str], Awaitable[None]]
"""(done, total, message): steps done (fractional while a step waits), steps in all, in words."""
Finish = Callable[[Card, CardStatus, CardResult], Awaitable[Card]]


def step_key(card_id: str, step: PlanStep) -> str:
    """A step's ``Idempotency-Key``: the card id and the step (R-ADD-09; decision: DELETEs too)."""
    return f"{card_id}.{step.index}"


async def _nothing(done: float, total: float, message: str) -> None:
    return None


class PlanRunner:
    """Runs and continues plan cards for one ``ApprovalService`` (its store, executor, clock and sleep)."""

    def __init__(
        self,
        store: CardStore,
        *,
        executor: str,
        clock: Callable[[], datetime],
        sleep: Callable[[float], Awaitable[None]],
        finish: Finish,
        renew: Callable[[str], Awaitable[bool]],
        step_timeout: float = PLAN_STEP_TIMEOUT,
        resume_window: float = 10.0,
    ) -> None:
        self._store = store
        self._executor = executor
        self._clock = clock
        self._sleep = sleep
        self._finish = finish
        self._renew = renew
        self.step_timeout = step_timeout
        self.resume_window = resume_window
        """Seconds (Door's time) a step found ``sending`` is read back before it is sent again."""
        self.poll = PLAN_POLL

    async def run(self, card: Card, owners: Owners, progress: Progress | None = None) -> Card:
        """Carry ``card``'s steps out from the first one not done, each with the Door client ``owners``
        gives for the card's owner at that moment; returns the card in its final state (or as it is,
        when another server took it over)."""
        report = progress or _nothing
        if plan_digest(card.steps) != card.body_digest or any(not _intact(s) for s in card.steps):
            result = CardResult(message="The plan's steps do not match its digest; nothing was sent. Plan it again.")
            return await self._finish(card, CardStatus.FAILED, result)
        total = float(len(card.steps))
        for position in range(len(card.steps)):
            now = await self._store.get(card.id)
            if now is None or now.status is not CardStatus.EXECUTING:
                return now if now is not None else card
            card = now
            step = card.steps[position]
            if step.status is StepStatus.DONE:
                continue
            try:
                if card.stop_requested_by is not None:
                    raise Stop(f"{card.stop_requested_by} asked to stop the plan")
                door = await self._door(card, owners)
                cluster = await door.get_cluster(card.cluster_id)
                check_before(card, step, cluster)
                await report(position, total, f"step {step.index} of {len(card.steps)}: {step.title}")
                if step.kind == "wait":
                    card = await self._wait(card, step, owners, door, report, position, total)
                else:
                    if _returns(card, step) and step.status is not StepStatus.SENDING:
                        card, door, cluster = await self._until_gone(
                            card, step, owners, door, cluster, report, position
                        )
                    card = await self._call(card, step, door, cluster)
            except _Lost:
                return await self._store.get(card.id) or card
            except Stop as stop:
                stopped = stop
            except DoorError as error:  # a read failed; nothing of this step was sent
                stopped = Stop(f"Door could not be read before step {step.index} ({error})")
            except Exception as error:
                # A bug, or an answer nothing here expected: the plan stops and says what is known, rather
                # than being left for the sweep to run into the same error again.
                log.exception("plan %s: unexpected error in step %s", card.id, step.index)
                stopped = Stop(f"an unexpected error ({type(error).__name__}) in step {step.index} ({step.title})")
            else:
                if card.status is not CardStatus.EXECUTING:
                    return card
                continue
            # What Door holds now is read as the owner too: with the credential found now, or not at all.
            return await self._stop(card, await self._door_or_none(card, owners), stopped)
        await report(total, total, "every step is done")
        said = await what_exists(card, await self._door_or_none(card, owners))
        return await self._finish(
            card, CardStatus.EXECUTED, CardResult(status_code=202, message=f"Every step is done. {said}")
        )

    async def _door(self, card: Card, owners: Owners) -> DoorApi:
        """The owner's Door client for the next request; ``Stop`` (``failed`` when nothing ran) when there is none."""
        try:
            return await current_door(owners, card)
        except NoCredential as missing:
            nothing_ran = all(s.status is StepStatus.PENDING for s in card.steps)
            raise Stop(
                f"the plan goes on only with its owner's own Door credential, and {missing.why}",
                CardStatus.FAILED if nothing_ran else CardStatus.STOPPED,
            ) from missing

    @staticmethod
    async def _door_or_none(card: Card, owners: Owners) -> DoorApi | None:
        try:
            return await current_door(owners, card)
        except NoCredential:
            return None

    # --- checks before a step ------------------------------------------------------------------

    # --- the steps -----------------------------------------------------------------------------

    async def _call(self, card: Card, step: PlanStep, door: DoorApi, cluster: Cluster) -> Card:
        if step.status is StepStatus.SENDING and await self._arrives(card, step, door, cluster):
            return await self._done(card, step, door, "found applied when the plan was continued")
        card = await self._mark(card, step, StepStatus.SENDING, started_at=step.started_at or self._clock())
        try:
            if step.kind == "add":
                request = PublicNodePoolCreateRequest.model_validate(step.body)
                await door.add_node_pool(card.cluster_id, request, idempotency_key=step_key(card.id, step))
            else:
                await door.remove_node_pool(card.cluster_id, step.pool, idempotency_key=step_key(card.id, step))
        except DoorError as error:
            if proves_nothing_changed(error):
                refused = explain(error, before=False)
                card = await self._mark(card, step, StepStatus.FAILED, note=refused.message)
                if all(s.status in (StepStatus.PENDING, StepStatus.FAILED) for s in card.steps):
                    message = f"Step {step.index} ({step.title}) was refused. {refused.message} Pool {card.target} is untouched."
                    return await self._finish(card, CardStatus.FAILED, refused.model_copy(update={"message": message}))
                raise Stop(f"Door refused step {step.index} ({step.title}): {refused.message}") from error
            return await self._settle(card, step, door, f"Door's answer to step {step.index} was unclear ({error})")
        return await self._done(card, step, door, "accepted by Door")

    async def _arrives(self, card: Card, step: PlanStep, door: DoorApi, cluster: Cluster) -> bool:
        """Whether a step found ``sending`` took effect, read back for ``resume_window``: the request of
        the server that died may still be in flight at Door (a live replica takes over at once), and
        sent again meanwhile its key would still be in use there, so Door would see the step twice."""
        deadline = self._clock() + timedelta(seconds=self.resume_window)
        while not applied(step, cluster):
            if self._clock() >= deadline:
                return False
            await self._renew(card.id)
            await self._sleep(self.poll)
            try:
                cluster = await door.get_cluster(card.cluster_id)
            except DoorError as error:
                log.info("reading Door back for card %s failed: %s", card.id, type(error).__name__)
        return True

    async def _settle(self, card: Card, step: PlanStep, door: DoorApi, why: str) -> Card:
        for attempt in range(SETTLE_READS):
            try:
                if applied(step, await door.get_cluster(card.cluster_id)):
                    return await self._done(card, step, door, f"{why}; reading Door back shows it took effect")
            except DoorError as error:
                log.info("reading Door back for card %s failed: %s", card.id, type(error).__name__)
            if attempt < SETTLE_READS - 1:
                await self._sleep(self.poll)
        card = await self._mark(card, step, StepStatus.OUTCOME_UNKNOWN, note=why[:300])
        said = await what_exists(card, door)
        result = CardResult(
            message=f"Outcome unknown at step {step.index} ({step.title}): {why[:300]}, and reading Door back did "
            f"not show it. It may still happen, at most once (its Idempotency-Key is {step_key(card.id, step)}). "
            f"The plan goes no further. {ran(card)} {said}{untouched(card)}"
        )
        return await self._finish(card, CardStatus.OUTCOME_UNKNOWN, result)

    async def _wait(
        self,
        card: Card,
        step: PlanStep,
        owners: Owners,
        door: DoorApi,
        report: Progress,
        position: int,
        total: float,
    ) -> Card:
        started = step.started_at or self._clock()
        if step.status is not StepStatus.WAITING:
            card = await self._mark(card, step, StepStatus.WAITING, started_at=started)
        deadline = started + timedelta(seconds=self.step_timeout)
        made = next(s for s in card.steps if s.kind == "add" and s.pool == step.pool and s.index < step.index)
        said = ""
        while True:
            door = await self._door(card, owners)  # every poll goes as the owner, or not at all
            state = await door.get_cluster_state(card.cluster_id)
            operation = next((op for op in state.operations if op.id == made.operation_id), None)
            if operation is None:
                operation = next(
                    (op for op in state.operations if op.kind == "pool.create" and op.target == step.pool), None
                )
            if operation is not None and operation.status == "failed":
                raise Stop(
                    f"Door's operation {operation.id} adding pool {step.pool} failed: {operation.error or 'no reason given'}"
                )
            nodes = await door.list_nodes(card.cluster_id, step.pool, fresh=True, fresh_timeout=self.poll)
            mine = [n for n in nodes.items if n.pool == step.pool]
            running = sum(1 for n in mine if n.status == "Running")
            want = _count(made)
            now_said = (
                f"step {step.index} of {len(card.steps)}: {running} of {want} workers of pool {step.pool} Running"
            )
            if now_said != said:
                said = now_said
                await report(position + (running / want if want else 1.0) * 0.99, total, said)
            done = operation is None or operation.status == "succeeded"
            if done and not nodes.cold and running >= want and all(n.status == "Running" for n in mine):
                return await self._done(card, step, door, f"{running} workers Running", operation_id=made.operation_id)
            if self._clock() >= deadline:
                raise Stop(
                    f"pool {step.pool} did not reach Running within {self.step_timeout:.0f} s of Door's time "
                    f"({running} of {want} workers Running)"
                )
            card = await self._between_polls(card)

    async def _until_gone(
        self,
        card: Card,
        step: PlanStep,
        owners: Owners,
        door: DoorApi,
        cluster: Cluster,
        report: Progress,
        position: int,
    ) -> tuple[Card, DoorApi, Cluster]:
        """Before adding the old name back: wait until the old pool has left Door's list (R-DEL-02).

        The step is ``waiting`` meanwhile (its start recorded, so a server continuing the plan keeps
        its deadline); every poll goes as the owner and checks Door as before any step."""
        started = step.started_at or self._clock()
        if step.status is not StepStatus.WAITING:
            card = await self._mark(card, step, StepStatus.WAITING, started_at=started)
        deadline = started + timedelta(seconds=self.step_timeout)
        said = ""
        while True:
            left = [p for p in cluster.node_pools if p.name == step.pool]
            if not left:
                return card, door, cluster
            now_said = (
                f"step {step.index} of {len(card.steps)}: the old pool {step.pool} is still {left[0].lifecycle} "
                "on Door (its workers drain); its name is added back once it is gone"
            )
            if now_said != said:
                said = now_said
                await report(position, float(len(card.steps)), said)
            if self._clock() >= deadline:
                raise Stop(
                    f"the old pool {step.pool} was still on Door's list ({left[0].lifecycle}) "
                    f"{self.step_timeout:.0f} s of Door's time after step {step.index} began, so its name was not added back"
                )
            card = await self._between_polls(card)
            door = await self._door(card, owners)
            cluster = await door.get_cluster(card.cluster_id)
            check_before(card, step, cluster)

    async def _between_polls(self, card: Card) -> Card:
        """The card as stored, after renewing the lease and waiting one poll; ``_Lost`` or ``Stop`` when
        the plan is no longer this server's to go on with, or someone asked it to stop."""
        fresh = await self._store.get(card.id)
        if fresh is None or fresh.status is not CardStatus.EXECUTING:
            raise _Lost(card.id)
        if fresh.stop_requested_by is not None:
            raise Stop(f"{fresh.stop_requested_by} asked to stop the plan")
        await self._renew(card.id)
        await self._sleep(self.poll)
        return fresh

    async def _done(
        self, card: Card, step: PlanStep, door: DoorApi, note: str, *, operation_id: str | None = None
    ) -> Card:
        if operation_id is None and step.kind != "wait":
            operation_id = await operation_of(door, card.cluster_id, step)
        return await self._mark(card, step, StepStatus.DONE, note=note, operation_id=operation_id, finished=True)

    async def _mark(
        self,
        card: Card,
        step: PlanStep,
        status: StepStatus,
        *,
        note: str | None = None,
        started_at: datetime | None = None,
        operation_id: str | None = None,
        finished: bool = False,
    ) -> Card:
        """Write ``step``'s new state to the store; ``Stop`` when this server no longer owns the card."""
        now = self._clock()
        changes: dict[str, Any] = {"status": status}
        if note is not None:
            changes["note"] = note[:500]
        if started_at is not None:
            changes["started_at"] = started_at
        if operation_id is not None:
            changes["operation_id"] = operation_id
        if finished:
            changes["finished_at"] = now
        steps = [s.model_copy(update=changes) if s.index == step.index else s for s in card.steps]
        entry = AuditEntry(
            "step",
            now,
            by=self._executor,
            operation_id=operation_id,
            detail=f"step {step.index} {step.kind} {step.pool}: {status.value}" + (f" ({note[:200]})" if note else ""),
        )
        moved = await self._store.advance(card.id, self._executor, update={"steps": steps}, entry=entry)
        if moved is None:
            raise _Lost(card.id)
        return moved

    async def _stop(self, card: Card, door: DoorApi | None, stop: Stop) -> Card:
        """End the plan before its next step: what was done stays, nothing further is sent.

        The result says which steps ran (from their records) and what Door holds now, read as the
        owner (``door``; None when the owner's credential is gone: then it says what to check). A step
        whose request may have left and was not read back makes the plan ``outcome_unknown``; "nothing
        was changed" is said only when no step's request was sent."""
        fresh = await self._store.get(card.id)
        if fresh is None or fresh.status is not CardStatus.EXECUTING:
            return fresh if fresh is not None else card
        card = fresh
        in_doubt = [s for s in card.steps if s.status is StepStatus.SENDING]
        # A failed step is one Door refused (a 4xx rule answer proves it changed nothing).
        nothing_sent = all(s.status in (StepStatus.PENDING, StepStatus.WAITING, StepStatus.FAILED) for s in card.steps)
        ended = {StepStatus.PENDING: StepStatus.SKIPPED, StepStatus.WAITING: StepStatus.SKIPPED}
        ended[StepStatus.SENDING] = StepStatus.OUTCOME_UNKNOWN
        steps = tuple(s.model_copy(update={"status": ended[s.status]}) if s.status in ended else s for s in card.steps)
        moved = await self._store.advance(
            card.id,
            self._executor,
            update={"steps": steps},
            entry=AuditEntry("stopped", self._clock(), by=self._executor, detail=stop.why[:500]),
        )
        card = moved or card
        said = await what_exists(card, door)
        if in_doubt:
            step = in_doubt[0]
            message = (
                f"Outcome unknown: {stop.why}. Step {step.index}'s request ({step.title}) may have reached Door and "
                f"was not read back: it may still happen, at most once (its Idempotency-Key is "
                f"{step_key(card.id, step)}). {ran(card)} {said}{untouched(card)}"
            )
            return await self._finish(card, CardStatus.OUTCOME_UNKNOWN, CardResult(message=message))
        if nothing_sent and stop.status in (CardStatus.STALE, CardStatus.FAILED):
            message = f"Nothing was changed: {stop.why}. {said} Plan the change again against the current state."
            return await self._finish(card, stop.status, CardResult(message=message))
        status = CardStatus.STOPPED if stop.status is CardStatus.FAILED else stop.status
        message = f"Stopped: {stop.why}. No further step was sent. {ran(card)} {said} {next_move(card)}"
        return await self._finish(card, status, CardResult(message=message))


class _Lost(Stop):
    """Another server owns the card now (its lease was taken over): this one sends nothing more."""

    def __init__(self, card_id: str) -> None:
        super().__init__(f"card {card_id} is continued by another server")


def _count(step: PlanStep) -> int:
    count = step.body.get("count", 1)
    return count if isinstance(count, int) else 1


def _returns(card: Card, step: PlanStep) -> bool:
    """Whether ``step`` adds back a name an earlier step of the plan removes (``keep_name``'s step 4)."""
    return step.kind == "add" and any(
        s.kind == "remove" and s.pool == step.pool and s.index < step.index for s in card.steps
    )


def _intact(step: PlanStep) -> bool:
    return step_digest(step.method, step.path, step.body, step.index) == step.digest
