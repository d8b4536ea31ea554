"""The part of ``backend_client.DoorClient`` the cards use, as a Protocol.

The card layer depends on this shape rather than the concrete client so it can be type-checked and
built while the client is written; ``backend_client.DoorClient`` satisfies it. Parameters are
positional-only here so that the client's own parameter names stay its business.
"""

from __future__ import annotations

from typing import Protocol

from backend_client.models import (
    Cluster,
    ClusterState,
    MachineTierList,
    NodeDeletePending,
    NodeList,
    PublicNodePoolCreateRequest,
    PublicNodePoolPatchRequest,
)


class DoorApi(Protocol):
    async def resolve_cluster(self, name_or_id: str, /) -> Cluster: ...

    async def get_cluster(self, cluster_id: str, /) -> Cluster: ...

    async def get_cluster_state(self, cluster_id: str, /) -> ClusterState: ...

    async def list_nodes(
        self, cluster_id: str, pool: str | None = None, /, *, fresh: bool = False, fresh_timeout: float = ...
    ) -> NodeList: ...

    async def list_machine_tiers(self, *, max_age: float = ...) -> MachineTierList: ...

    async def add_node_pool(
        self, cluster_id: str, request: PublicNodePoolCreateRequest, /, *, idempotency_key: str | None = None
    ) -> Cluster: ...

    async def update_node_pool(
        self,
        cluster_id: str,
        pool_name: str,
        patch: PublicNodePoolPatchRequest,
        /,
        *,
        idempotency_key: str | None = None,
    ) -> Cluster: ...

    async def remove_node_pool(
        self, cluster_id: str, pool_name: str, /, *, idempotency_key: str | None = None
    ) -> Cluster: ...

    async def replace_node(
        self, cluster_id: str, node_name: str, /, *, idempotency_key: str | None = None
    ) -> NodeDeletePending: ...
