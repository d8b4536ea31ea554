"""The target of a card as it stands: read once when the card is planned, again when it is approved.

A card is planned against a snapshot of its target; approval reads the same snapshot again and
executes only if nothing changed (DESIGN.md property 5). Both reads go through the functions here so
the two snapshots are comparable key by key, and the difference can be said in words.
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from backend_client import rules
from backend_client.errors import DoorError, DoorStatusError
from backend_client.models import Cluster, ClusterState, Node, NodeList, NodePool, PublicNodePoolPatchRequest
from confirmation_cards.actions import ACTIONS, POOL_ACTIONS
from confirmation_cards.door import DoorApi
from confirmation_cards.models import Action, Card, sha256

# The pool fields a card depends on; anything else Door may add to a pool item is not part of the
# decision, so a new informational field cannot make every pending card stale.
POOL_FIELDS = ("id", "size", "count", "auto_scale", "min_nodes", "max_nodes", "labels", "tags", "lifecycle")
NODE_FIELDS = ("pool", "status", "ready")
DRAINING = frozenset({"Deleting", "Deleted", "Failed"})


def find_pool(cluster: Cluster, name: str) -> NodePool | None:
    """The pool of that name, alive first, else one still deleting (so a card can say so)."""
    alive = cluster.pool(name)
    if alive is not None:
        return alive
    return next((p for p in cluster.node_pools if p.name == name), None)


def pool_snapshot(cluster: Cluster, name: str) -> dict[str, JsonValue]:
    pool = find_pool(cluster, name)
    data = None if pool is None else {k: v for k, v in pool.model_dump(mode="json").items() if k in POOL_FIELDS}
    return {"phase": cluster.phase, "pool": data}


def node_snapshot(cluster: Cluster, state: ClusterState, nodes: NodeList | None, name: str) -> dict[str, JsonValue]:
    """The node as the inventory shows it (``"unlisted"`` when it does not, yet) and whether it is being replaced.

    ``replacing`` comes from the operations (R-OP-03), which are current, while the node list is a
    cached snapshot (R-NODE-01) that may still show a node as Running after its drain began.
    """
    replacing = any(
        op.status == "running" and op.kind == "node.replace" and op.target == name for op in state.operations
    )
    node: Node | None = None
    if nodes is not None:
        node = next((n for n in nodes.items if n.name == name), None)
    data: JsonValue = "unlisted"
    if node is not None:
        data = {k: v for k, v in node.model_dump(mode="json").items() if k in NODE_FIELDS}
    return {"phase": cluster.phase, "node": data, "replacing": replacing}


async def read_target(
    door: DoorApi, action: Action, cluster_id: str, target: str, *, planned: dict[str, JsonValue] | None = None
) -> dict[str, JsonValue]:
    """Read the target of a card now, in the same shape the planner recorded.

    Raises the client's ``DoorError`` when the cluster itself cannot be read. A node inventory that
    cannot be read (409 while not Provisioned, 503 while down) reads as ``"unlisted"``: the phase in
    the snapshot already says why.

    With ``planned`` (the card's snapshot): a node the planner could not see because the inventory
    was still cold, and that is now listed alive, reads as ``"unlisted"`` again. The first node read
    is always cold (R-NODE-03), so otherwise nearly every replace card would go stale merely because
    the inventory loaded; a node now being deleted still counts as a change.
    """
    cluster = await door.get_cluster(cluster_id)
    if action in POOL_ACTIONS:
        return pool_snapshot(cluster, target)
    state = await door.get_cluster_state(cluster_id)
    nodes: NodeList | None = None
    if cluster.phase == "Provisioned":
        try:
            nodes = await door.list_nodes(cluster_id)
        except DoorStatusError:
            nodes = None
    now = node_snapshot(cluster, state, nodes, target)
    seen = now["node"]
    was_unlisted = planned is not None and planned.get("node") == "unlisted"
    if was_unlisted and isinstance(seen, dict) and seen.get("status") not in DRAINING:
        now["node"] = "unlisted"
    return now


def fingerprint(snapshot: dict[str, JsonValue]) -> str:
    return sha256(snapshot)


def _say(value: Any) -> str:
    if value is None:
        return "absent"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_say(v)}" for k, v in sorted(value.items())) + "}"
    return str(value)


def describe_changes(before: dict[str, Any], after: dict[str, Any], *, target: str) -> list[str]:
    """What differs between two snapshots, one plain sentence each ("count was 2 and is now 3")."""
    said: list[str] = []
    if before.get("phase") != after.get("phase"):
        said.append(f"the cluster phase was {_say(before.get('phase'))} and is now {_say(after.get('phase'))}")
    if not before.get("replacing") and after.get("replacing"):
        said.append(f"a replacement of node {target} has started since")
    for kind in ("pool", "node"):
        if kind not in before and kind not in after:
            continue
        old, new = before.get(kind), after.get(kind)
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            for key in sorted(set(old) | set(new)):
                if old.get(key) != new.get(key):
                    said.append(f"{key} was {_say(old.get(key))} and is now {_say(new.get(key))}")
        elif not isinstance(new, dict):
            gone = "no longer exists" if kind == "pool" else "is no longer listed"
            said.append(f"{kind} {target} {gone}")
        elif kind == "pool":
            said.append(f"pool {target} did not exist and now does")
        else:
            said.append(f"node {target} was not listed and is now {_say(new.get('status'))}")
    return said


async def operation_ids(card: Card, door: DoorApi) -> set[str] | None:
    """The operations on the card's target before its call, to tell the call's own from older ones."""
    try:
        state = await door.get_cluster_state(card.cluster_id)
    except DoorError:
        return None
    return {op.id for op in state.operations if op.target == card.target}


async def new_operation_id(card: Card, door: DoorApi, known: set[str] | None = None) -> str | None:
    """The newest operation on the card's target that was not there before the call (R-OP-03)."""
    try:
        state = await door.get_cluster_state(card.cluster_id)
    except DoorError:
        return None  # the change was accepted; a missing operation id does not undo that
    kind = ACTIONS[card.action].operation
    operation = next(
        (
            op
            for op in state.operations
            if op.kind == kind and op.target == card.target and (known is None or op.id not in known)
        ),
        None,
    )
    return None if operation is None else operation.id


async def shows_change(card: Card, door: DoorApi, known: set[str] | None) -> bool:
    """Whether Door's state shows the card's change (its pool as requested, or a new operation)."""
    if card.action in POOL_ACTIONS:
        cluster = await door.get_cluster(card.cluster_id)
        pool = cluster.pool(card.target)
        if card.action == "add_node_pool":
            return pool is not None and pool.size == card.body.get("size")
        if card.action == "remove_node_pool":
            return pool is None
        if pool is None:
            return False
        patch = PublicNodePoolPatchRequest.model_validate(card.body)
        return rules.merge_patch(pool, patch) == pool
    state = await door.get_cluster_state(card.cluster_id)
    kind = ACTIONS[card.action].operation
    return any(
        op.kind == kind
        and op.target == card.target
        and (op.id not in known if known is not None else op.status == "running")
        for op in state.operations
    )
