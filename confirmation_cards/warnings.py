"""The warnings a card carries: what a careful operator would want to know before approving."""

from __future__ import annotations

from backend_client.models import NodeList, NodePool
from confirmation_cards.models import CardWarning


def labels_warning() -> CardWarning:
    return CardWarning(
        code="labels_not_node_labels",
        message="pool labels and tags are stored on the pool only; Door does not apply them as Kubernetes node "
        "labels, so they cannot steer scheduling (use kubectl label node for that)",
        rule="R-POOL-05",
    )


def autoscale_warning(pool: NodePool) -> CardWarning:
    return CardWarning(
        code="autoscale_may_shrink",
        message=f"with autoscaling from {pool.min_nodes} to {pool.max_nodes}, pool {pool.name} may shrink to "
        f"{pool.min_nodes} worker{'s' if pool.min_nodes != 1 else ''} on its own",
        rule="R-ADD-06",
    )


def unlisted_node_warning(node_name: str, nodes: NodeList) -> CardWarning:
    if nodes.cold or nodes.stale:
        why = "the node inventory is not loaded yet" if nodes.cold else "the node inventory is out of date"
        return CardWarning(
            code="node_unlisted",
            message=f"{why}, so it is not known whether node {node_name} exists; Door accepts an unknown name and "
            "the replacement then fails on its own",
            rule="R-RNODE-04",
        )
    return CardWarning(
        code="node_unlisted",
        message=f"no node named {node_name} is listed; Door accepts the request, but the replacement will fail "
        "(check the name with list_nodes)",
        rule="R-RNODE-04",
    )
