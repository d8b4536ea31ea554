"""What a plan card's result says: which steps ran, what Door holds, what to do next.

Each sentence comes from what is known (the steps' records, and Door read as the plan's owner), so
a plan stopped by a restart, a lost credential or an unexpected error never claims more or less
than happened (DESIGN.md property 11)."""

from __future__ import annotations

from backend_client.errors import DoorError
from confirmation_cards.door import DoorApi
from confirmation_cards.models import Card, StepStatus


def ran(card: Card) -> str:
    """The steps whose records say they ran, in words ("Steps done: 1 (add pool x, operation op_1)")."""
    done = [s for s in card.steps if s.status is StepStatus.DONE and s.kind != "wait"]
    if not done:
        return "No step's request reached Door."
    said = [
        f"{s.index} ({s.title[:1].lower()}{s.title[1:]}" + (f", operation {s.operation_id})" if s.operation_id else ")")
        for s in done
    ]
    return f"Step{'s' if len(done) > 1 else ''} done: " + "; ".join(said) + "."


async def what_exists(card: Card, door: DoorApi | None) -> str:
    """Which of the plan's pools exist on Door now, in which tier, with how many workers; read through
    ``door`` (the owner's). Without one, or when Door cannot be read, what to check instead."""
    names = list(dict.fromkeys([card.target, *(s.pool for s in card.steps)]))
    check = f"check pools {', '.join(names)} on cluster {card.cluster_name} (get_cluster)"
    if door is None:
        return f"Door was not read without its owner's credential: {check}."
    try:
        cluster = await door.get_cluster(card.cluster_id)
    except DoorError:
        return f"Door could not be read to say which pools exist now: {check}."
    said = []
    for name in names:
        pool = next((p for p in cluster.node_pools if p.name == name and p.lifecycle == "active"), None)
        gone = next((p for p in cluster.node_pools if p.name == name), None)
        if pool is not None:
            said.append(f"pool {name} in {pool.size} with {pool.count} worker{'s' if pool.count != 1 else ''}")
        elif gone is not None:
            said.append(f"pool {name} is deleting (its workers drain)")
    return ("On Door now: " + "; ".join(said) + ".") if said else "None of the plan's pools exists on Door now."


def untouched(card: Card) -> str:
    """ " Pool <old> is untouched." while no step has tried to remove it, else nothing."""
    removed = any(
        s.kind == "remove"
        and s.pool == card.target
        and s.status is not StepStatus.PENDING
        and s.status is not StepStatus.SKIPPED
        for s in card.steps
    )
    return "" if removed else f" Pool {card.target} is untouched."


def next_move(card: Card) -> str:
    """What to do after a stop: remove what the plan added, or ask again."""
    added = [s.pool for s in card.steps if s.kind == "add" and s.status is StepStatus.DONE and s.pool != card.target]
    old_removed = any(s.kind == "remove" and s.pool == card.target and s.status is StepStatus.DONE for s in card.steps)
    if added and not old_removed:
        return (
            f"Next: remove the new pool {', '.join(added)} (remove_node_pool) to go back, or ask for "
            f"change_pool_tier again; pool {card.target} is untouched."
        )
    if added:
        return f"Next: pool {card.target} is removed; {', '.join(added)} carries its workloads. Ask again to finish."
    return f"Next: ask for change_pool_tier again when ready; pool {card.target} is untouched."
