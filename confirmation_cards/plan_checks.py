"""What Door must look like before a plan's next step, and how to tell whether a step took effect.

Before every step Door is read again (R-OP-03, R-POOL-02): the old pool must be as approved until it
is removed, and every pool a step made must be as that step made it; otherwise the plan stops
(``Stop``) before removing anything and says why."""

from __future__ import annotations

from backend_client.errors import DoorError
from backend_client.models import Cluster, NodePool
from confirmation_cards.door import DoorApi
from confirmation_cards.models import Card, CardStatus, PlanStep, StepStatus
from confirmation_cards.targets import describe_changes, fingerprint, pool_snapshot


class Stop(Exception):
    """The plan stops before its next step; ``status`` is ``stale`` before any change, else ``stopped``."""

    def __init__(self, why: str, status: CardStatus = CardStatus.STOPPED) -> None:
        super().__init__(why)
        self.why = why
        self.status = status


def check_before(card: Card, step: PlanStep, cluster: Cluster) -> None:
    """Door as the plan expects it before ``step``, else ``Stop`` (stale before any change)."""
    changed_nothing = all(s.status is StepStatus.PENDING for s in card.steps)
    old_removed = any(s.kind == "remove" and s.pool == card.target and s.status is StepStatus.DONE for s in card.steps)
    # A removal that may have left already is settled by reading Door (``_call``), not refused here.
    removing = step.pool if step.kind == "remove" and step.status is StepStatus.SENDING else None
    if not old_removed and removing != card.target:
        now = pool_snapshot(cluster, card.target)
        if fingerprint(now) != card.target_fingerprint:
            said = "; ".join(describe_changes(card.target_snapshot, now, target=card.target))
            status = CardStatus.STALE if changed_nothing else CardStatus.STOPPED
            raise Stop(f"pool {card.target} changed since the plan was approved ({said})", status)
    for made in made_pools(card):
        if made.pool == removing:
            continue
        problem = differs(cluster.pool(made.pool), made)
        if problem is not None:
            raise Stop(f"pool {made.pool} is not what step {made.index} made: {problem}")
    waiting = step.status in (StepStatus.PENDING, StepStatus.WAITING)
    if step.kind == "add" and waiting and cluster.pool(step.pool) is not None:
        status = CardStatus.STALE if changed_nothing else CardStatus.STOPPED
        raise Stop(f"a pool named {step.pool} exists now, so step {step.index} cannot add it", status)


def made_pools(card: Card) -> list[PlanStep]:
    """The add steps done whose pool no done step has removed since."""
    made: list[PlanStep] = []
    for s in card.steps:
        if s.status is not StepStatus.DONE:
            continue
        if s.kind == "add":
            made.append(s)
        elif s.kind == "remove":
            made = [m for m in made if m.pool != s.pool]
    return made


def differs(pool: NodePool | None, made: PlanStep) -> str | None:
    """How the pool on Door differs from what its add step asked for, or None."""
    if pool is None:
        return "it no longer exists"
    body = made.body
    want = {
        "size": body.get("size"),
        "count": body.get("count", 1),
        "auto_scale": body.get("auto_scale", False),
        "labels": body.get("labels", {}),
        "tags": body.get("tags", {}),
    }
    if want["auto_scale"]:
        want |= {"min_nodes": body.get("min_nodes"), "max_nodes": body.get("max_nodes")}
    have = pool.model_dump(mode="json")
    said = [f"{k} is {have.get(k)!r}, not {v!r}" for k, v in want.items() if have.get(k) != v]
    return "; ".join(said) or None


def applied(step: PlanStep, cluster: Cluster) -> bool:
    """Whether Door's state shows ``step``'s change (its pool added in its tier, or removed)."""
    pool = cluster.pool(step.pool)
    if step.kind == "add":
        return pool is not None and pool.size == step.body.get("size")
    return pool is None


async def operation_of(door: DoorApi, cluster_id: str, step: PlanStep) -> str | None:
    kind = "pool.create" if step.kind == "add" else "pool.delete"
    try:
        state = await door.get_cluster_state(cluster_id)
    except DoorError:
        return None
    return next((op.id for op in state.operations if op.kind == kind and op.target == step.pool), None)
