"""The response bodies of the public API, built from the world's records (no checks, no changes).

Each function is one body of docs/contracts.md; the items inside come from the records'
``to_public`` (R-POOL-02, R-NODE-06, R-OP-03).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from backend_client import models, rules
from backend_client.models import MachineTier
from reference_backend.world import Cluster, Doc, Principal, iso, iso_or_none


def catalog_body(catalog: Mapping[str, MachineTier]) -> Doc:
    """The machine-tier catalog: vCPU, memory, disk and hourly price of every size."""
    return {"schema_version": models.CATALOG_SCHEMA, "items": [t.model_dump(mode="json") for t in catalog.values()]}


def cluster_fields(cluster: Cluster) -> Doc:
    return {
        "id": cluster.id,
        "name": cluster.name,
        "organisation": cluster.organisation,
        "phase": cluster.phase,
        "kubernetes_version": cluster.kubernetes_version,
        "tags": list(cluster.tags),
        "created_at": iso(cluster.created_at),
    }


def cluster_body(cluster: Cluster, catalog: Mapping[str, MachineTier]) -> Doc:
    """R-POOL-03: the cluster, its pools (deleting ones included) and the capacity totals (R-CAP-*)."""
    pools = [p.to_model() for p in cluster.pools.values()]
    totals = rules.capacity(pools, catalog)
    return {
        "schema_version": "cluster.public.v1",
        **cluster_fields(cluster),
        "node_pools": [p.model_dump(mode="json") for p in pools],
        "total_vcpu": totals.total_vcpu,
        "total_memory_gib": totals.total_memory_gib,
        "total_volume_gib": totals.total_volume_gib,
    }


def cluster_list_body(clusters: Iterable[Cluster], catalog: Mapping[str, MachineTier]) -> Doc:
    items = [cluster_body(c, catalog) for c in clusters]
    return {"schema_version": "cluster.public.v1", "items": items, "total": len(items)}


def pools_body(cluster: Cluster) -> Doc:
    """R-POOL-01: the pool list envelope, 200 in any phase (R-PHASE-02)."""
    items = [p.to_public() for p in cluster.pools.values()]
    return {"schema_version": "nodepool.public.v1", "cluster_id": cluster.id, "items": items, "total": len(items)}


def state_body(cluster: Cluster) -> Doc:
    """R-OP-03: the phase, every running operation and the most recent finished ones
    (``KEPT_FINISHED_OPERATIONS``), newest first."""
    operations = reversed(cluster.operations.values())  # kept in seq order (Cluster.add_operation)
    return {
        "schema_version": "clusterstate.public.v1",
        "cluster_id": cluster.id,
        "phase": cluster.phase,
        "operations": [op.to_public() for op in operations],
    }


def nodes_body(cluster: Cluster, pool_name: str | None, *, cold: bool, stale: bool) -> Doc:
    """R-NODE-02: the best-known snapshot of the cluster's (or one pool's) workers, with its freshness."""
    inventory = cluster.inventory
    items: list[Doc] = inventory.snapshot or []
    if pool_name is not None and inventory.snapshot is not None:
        items = inventory.snapshot.by_pool.get(pool_name, [])  # grouped once per snapshot
    return {
        "schema_version": "node.public.v1",
        "cluster_id": cluster.id,
        "items": items,
        "total": len(items),
        "cold": cold,
        "stale": stale,
        "next_refresh_at": iso_or_none(inventory.refresh_at),
    }


def node_deleting_body(cluster: Cluster, node_name: str) -> Doc:
    """R-RNODE-01: the answer to a node replacement."""
    return {"schema_version": "node.public.v1", "cluster_id": cluster.id, "node_name": node_name}


def principal_body(principal: Principal) -> Doc:
    """A token's holder, as the admin plane answers ``PUT /_reference/tokens/{token}``."""
    return {"user": principal.user, "organisation": principal.organisation, "role": principal.role}
