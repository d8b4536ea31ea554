"""The worlds a backend starts with.

``demo``: organisation ``payments`` (credit 5000.0) with ``payments-prod`` (Provisioned, pool
``workers`` of two Running dks.c5.xlarge nodes) and ``payments-staging`` (NodesReady, one pool);
organisation ``acme`` with one small cluster; the three demo tokens.

``empty`` (decision): the catalog only — no organisation, cluster or token, so every public request
answers 401 until the admin plane adds tokens (``PUT /_reference/tokens/{token}``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final, Literal

from backend_client.models import PublicNodePoolCreateRequest
from reference_backend.setters import WorldSetters

SeedName = Literal["demo", "empty"]

DEMO_ORGANISATION: Final = "payments"
DEMO_CREDIT: Final = 5000.0
DEMO_CLUSTER_ID: Final = "3f9c1a2e-7b4d-4c58-9e21-5d6f8a0b1c2d"
DEMO_CLUSTER_NAME: Final = "payments-prod"
DEMO_POOL_ID: Final = "a1b2c3d4-0000-4000-8000-000000000001"
DEMO_POOL_NAME: Final = "workers"
DEMO_NODE_NAME: Final = "payments-prod-workers-abc12"
# Before the clock starts (2026-10-01T12:00Z): a Running node cannot be born in the future.
DEMO_NODE_CREATED_AT: Final = datetime(2026, 9, 30, 12, 4, 0, tzinfo=UTC)
DEMO_KUBERNETES_VERSION: Final = "v1.32.4"

DEMO_PENDING_CLUSTER_ID: Final = "7c1e5b9a-2f4d-4e8a-b6c3-0d9e8f7a6b5c"
DEMO_PENDING_CLUSTER_NAME: Final = "payments-staging"

OUTSIDER_ORGANISATION: Final = "acme"
OUTSIDER_CREDIT: Final = 500.0
OUTSIDER_CLUSTER_ID: Final = "9b8a7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
OUTSIDER_CLUSTER_NAME: Final = "acme-dev"

DEMO_ADMIN_TOKEN: Final = "demo-admin-token"
DEMO_MEMBER_TOKEN: Final = "demo-member-token"
DEMO_OUTSIDER_TOKEN: Final = "demo-outsider-token"

DEMO_TOKENS: Final = {
    DEMO_ADMIN_TOKEN: ("ada", DEMO_ORGANISATION, "super_admin"),
    DEMO_MEMBER_TOKEN: ("mel", DEMO_ORGANISATION, "member"),
    DEMO_OUTSIDER_TOKEN: ("oscar", OUTSIDER_ORGANISATION, "member"),
}

_CLUSTERS_BORN: Final = datetime(2026, 9, 30, 9, 0, 0, tzinfo=UTC)


def populate(backend: WorldSetters, seed: SeedName) -> None:
    """Fill an empty backend with the named world."""
    if seed == "empty":
        return
    backend.set_credit(DEMO_ORGANISATION, DEMO_CREDIT)
    backend.set_credit(OUTSIDER_ORGANISATION, OUTSIDER_CREDIT)
    prod = backend.install_cluster(
        name=DEMO_CLUSTER_NAME,
        organisation=DEMO_ORGANISATION,
        cluster_id=DEMO_CLUSTER_ID,
        kubernetes_version=DEMO_KUBERNETES_VERSION,
        tags=["prod"],
        created_at=_CLUSTERS_BORN,
    )
    backend.install_pool(
        prod,
        PublicNodePoolCreateRequest(name=DEMO_POOL_NAME, size="dks.c5.xlarge", count=2),
        pool_id=DEMO_POOL_ID,
        node_names=(DEMO_NODE_NAME,),
        created_at=DEMO_NODE_CREATED_AT,
    )
    backend.install_cluster(
        name=DEMO_PENDING_CLUSTER_NAME,
        organisation=DEMO_ORGANISATION,
        cluster_id=DEMO_PENDING_CLUSTER_ID,
        phase="NodesReady",
        kubernetes_version=DEMO_KUBERNETES_VERSION,
        pools=[PublicNodePoolCreateRequest(name="general", size="dks.c5.large", count=1)],
        tags=["staging"],
        created_at=_CLUSTERS_BORN,
    )
    backend.install_cluster(
        name=OUTSIDER_CLUSTER_NAME,
        organisation=OUTSIDER_ORGANISATION,
        cluster_id=OUTSIDER_CLUSTER_ID,
        kubernetes_version=DEMO_KUBERNETES_VERSION,
        pools=[PublicNodePoolCreateRequest(name="default", size="dks.m5.large", count=1)],
        created_at=_CLUSTERS_BORN,
    )
    for token, (user, organisation, role) in DEMO_TOKENS.items():
        backend.put_token(token, user, organisation, role)  # type: ignore[arg-type]
