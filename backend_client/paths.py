"""The public API's paths, built in one place for the client and for the cards (part of the contract).

Every segment is percent-encoded (``safe=""``), so a name can never reach another route. Paths are
relative to ``API_PREFIX``; ``public()`` adds it, as a card shows the request it binds.
"""

from __future__ import annotations

from urllib.parse import quote

from backend_client._constants import API_PREFIX


def segment(value: str) -> str:
    """A path segment, escaped so a name can never reach another route."""
    return quote(value, safe="")


def cluster(cluster_id: str) -> str:
    return f"/clusters/{segment(cluster_id)}"


def cluster_state(cluster_id: str) -> str:
    return f"{cluster(cluster_id)}/state"


def pools(cluster_id: str) -> str:
    return f"{cluster(cluster_id)}/node-pools"


def pool(cluster_id: str, pool_name: str) -> str:
    return f"{pools(cluster_id)}/{segment(pool_name)}"


def nodes(cluster_id: str, pool_name: str | None = None) -> str:
    return f"{pool(cluster_id, pool_name)}/nodes" if pool_name is not None else f"{cluster(cluster_id)}/nodes"


def node(cluster_id: str, node_name: str) -> str:
    return f"{cluster(cluster_id)}/nodes/{segment(node_name)}"


def public(path: str) -> str:
    """The path as sent to Door's host: under ``/v1/public``."""
    return API_PREFIX + path
