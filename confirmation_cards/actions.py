"""One spec per card action: everything the cards, the approval and the server need to know about it.

Adding an action means a row here, its planner method and its tool; nothing else branches on the
action's name. The path comes from ``backend_client.paths``, the client's own builder, so the card
shows exactly the request the client sends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from backend_client import paths
from backend_client.models import OperationKind, PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from confirmation_cards.door import DoorApi
from confirmation_cards.models import Action, Card, Method


async def _add(door: DoorApi, card: Card) -> None:
    request = PublicNodePoolCreateRequest.model_validate(card.body)
    await door.add_node_pool(card.cluster_id, request, idempotency_key=card.id)


async def _patch(door: DoorApi, card: Card) -> None:
    patch = PublicNodePoolPatchRequest.model_validate(card.body)
    await door.update_node_pool(card.cluster_id, card.target, patch, idempotency_key=card.id)


async def _remove(door: DoorApi, card: Card) -> None:
    await door.remove_node_pool(card.cluster_id, card.target, idempotency_key=card.id)


async def _replace(door: DoorApi, card: Card) -> None:
    await door.replace_node(card.cluster_id, card.target, idempotency_key=card.id)


async def _plan(door: DoorApi, card: Card) -> None:
    raise TypeError("a plan card runs step by step (confirmation_cards.plans), never as one call")


@dataclass(frozen=True)
class ActionSpec:
    """An action's one backend call and how it is spoken of (``title`` heads its card, before the target).

    ``execute`` sends the card's exact body with the card id as ``Idempotency-Key`` (property 6).
    """

    title: str
    method: Method
    path: Callable[[str, str], str]
    operation: OperationKind
    target: Literal["pool", "node"]
    accepted: str
    execute: Callable[[DoorApi, Card], Awaitable[None]]


ACTIONS: dict[Action, ActionSpec] = {
    "add_node_pool": ActionSpec(
        "Add node pool",
        "POST",
        lambda cluster_id, _: paths.pools(cluster_id),
        "pool.create",
        "pool",
        "Door accepted the new pool {target}; its workers are being provisioned.",
        _add,
    ),
    "scale_node_pool": ActionSpec(
        "Scale node pool",
        "PATCH",
        paths.pool,
        "pool.update",
        "pool",
        "Door accepted the change to pool {target}; the workers follow in the background.",
        _patch,
    ),
    "relabel_node_pool": ActionSpec(
        "Change the labels and tags of node pool",
        "PATCH",
        paths.pool,
        "pool.update",
        "pool",
        "Door accepted the new labels and tags of pool {target}.",
        _patch,
    ),
    "remove_node_pool": ActionSpec(
        "Remove node pool",
        "DELETE",
        paths.pool,
        "pool.delete",
        "pool",
        "Door accepted the removal of pool {target}; it is deleting until its workers are gone.",
        _remove,
    ),
    "replace_node": ActionSpec(
        "Replace node",
        "DELETE",
        paths.node,
        "node.replace",
        "node",
        "Door accepted the replacement of node {target}; watch the node list for the new worker.",
        _replace,
    ),
    "change_pool_tier": ActionSpec(
        "Change the tier of node pool",
        "POST",
        lambda cluster_id, _: paths.pools(cluster_id),
        "pool.create",
        "pool",
        "Door carried out every step of the move of pool {target} to its new tier.",
        _plan,
    ),
}

POOL_ACTIONS: frozenset[Action] = frozenset(action for action, spec in ACTIONS.items() if spec.target == "pool")


def request_line(action: Action, cluster_id: str, target: str) -> tuple[Method, str]:
    """The method and path of an action's one backend call: what a card's digest covers and approval sends."""
    spec = ACTIONS[action]
    return spec.method, paths.public(spec.path(cluster_id, target))
