"""The Door DKS public API contract: every request and response body as a pydantic model.

The reference backend serves these models and the client parses them, so the two cannot disagree
on a shape. Responses tolerate unknown fields (Door may add some); requests forbid them (R-ADD-07,
R-PATCH-01). Rule ids refer to ``shared/door-api-rules.md``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt

POOL_SCHEMA = "nodepool.public.v1"
NODE_SCHEMA = "node.public.v1"
CATALOG_SCHEMA = "catalog.public.v1"
CLUSTER_SCHEMA = "cluster.public.v1"
STATE_SCHEMA = "clusterstate.public.v1"

Phase = Literal[
    "Provisioning",
    "ControlPlaneReady",
    "NodesReady",
    "Provisioned",
    "Deprovisioning",
    "Deprovisioned",
]
PoolLifecycle = Literal["active", "deleting"]
NodeStatus = Literal["Pending", "Provisioning", "Provisioned", "Running", "Deleting", "Deleted", "Failed", "Unknown"]
OperationKind = Literal["pool.create", "pool.update", "pool.delete", "node.replace"]
OperationStatus = Literal["running", "succeeded", "failed"]

PATCHABLE_FIELDS = ("count", "auto_scale", "min_nodes", "max_nodes", "labels", "tags")


def _strip_titles(schema: dict[str, Any]) -> None:
    # pydantic's generated titles repeat the property names; the published schemas leave them out.
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)


class _Response(BaseModel):
    """A body Door sends: unknown fields are kept, never rejected."""

    model_config = ConfigDict(extra="allow", frozen=True, json_schema_extra=_strip_titles)


class _Request(BaseModel):
    """A body Door receives: unknown fields and wrong types are refused (422)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# --- catalog -------------------------------------------------------------------------------------


class TierSpec(_Response):
    disk_gib: int


class MachineTier(_Response):
    id: str
    vcpu: int
    memory_gib: float
    spec: TierSpec
    price_per_hour: float = Field(
        description="Price of one node of this tier per hour, in the organisation's currency."
    )


class MachineTierList(_Response):
    schema_version: str = CATALOG_SCHEMA
    items: list[MachineTier]


# --- pools ---------------------------------------------------------------------------------------


class NodePool(_Response):
    """A pool item (R-POOL-02), the same shape in the pool list and embedded in a cluster (R-POOL-03)."""

    id: str
    name: str
    size: str
    count: int
    auto_scale: bool
    min_nodes: int | None
    max_nodes: int | None
    labels: dict[str, str]
    tags: dict[str, str]
    root_volume_size_gib: int
    lifecycle: PoolLifecycle


class NodePoolList(_Response):
    """R-POOL-01."""

    schema_version: str = POOL_SCHEMA
    cluster_id: str
    items: list[NodePool]
    total: int


def _whole_number(value: Any) -> Any:
    """A JSON number without a fraction is an integer, as in JSON Schema's data model (`3.0` is `3`).

    The published schema says ``"type": "integer"``, which JSON Schema cannot narrow to "written
    without .0", so the routes accept what it admits; `true`, `"3"`, `2.5`, NaN stay refused.
    """
    if type(value) is float and value.is_integer():
        return int(value)
    return value


WholeInt = Annotated[StrictInt, BeforeValidator(_whole_number)]
"""A request count or bound (R-ADD-04, R-ADD-06, R-PATCH-06): an integer, `3.0` included, never a bool."""


class PublicNodePoolCreateRequest(_Request):
    """``POST /clusters/{id}/node-pools`` (R-ADD-01..07). Range and combination rules live in ``rules``."""

    name: str
    size: str
    count: WholeInt = 1
    auto_scale: StrictBool = False
    min_nodes: WholeInt | None = None
    max_nodes: WholeInt | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    tags: dict[str, str] = Field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        """The JSON body to send: every field the caller set, nothing else."""
        return self.model_dump(mode="json", exclude_unset=True)


class PublicNodePoolPatchRequest(_Request):
    """``PATCH /clusters/{id}/node-pools/{name}`` (R-PATCH-01..06).

    A field is *sent* when it is in ``model_fields_set``: ``PublicNodePoolPatchRequest(count=0)``
    sends ``{"count": 0}`` and ``PublicNodePoolPatchRequest()`` sends ``{}``. ``min_nodes`` and
    ``max_nodes`` may be sent as null, which clears them before the merge.
    """

    count: WholeInt | None = None
    auto_scale: StrictBool | None = None
    min_nodes: WholeInt | None = None
    max_nodes: WholeInt | None = None
    labels: dict[str, str] | None = None
    tags: dict[str, str] | None = None

    def sent(self) -> frozenset[str]:
        return frozenset(self.model_fields_set)

    def body(self) -> dict[str, Any]:
        """The JSON body to send: exactly the fields that were set, zeros and nulls included."""
        return self.model_dump(mode="json", exclude_unset=True)


# --- clusters ------------------------------------------------------------------------------------


class Capacity(_Response):
    """Planned capacity (R-CAP-01..03); null when a pool's tier cannot be resolved."""

    total_vcpu: int | None
    total_memory_gib: float | None
    total_volume_gib: int | None


class Cluster(_Response):
    """``GET /clusters/{id}``: the cluster with its pools embedded and its capacity totals (R-POOL-03)."""

    schema_version: str = CLUSTER_SCHEMA
    id: str
    name: str
    organisation: str
    phase: Phase
    kubernetes_version: str
    tags: list[str] = Field(
        default_factory=list, description="Cluster tags: a string array, not pool tags (R-POOL-05)."
    )
    node_pools: list[NodePool]
    total_vcpu: int | None
    total_memory_gib: float | None
    total_volume_gib: int | None
    created_at: datetime

    @property
    def capacity(self) -> Capacity:
        return Capacity(
            total_vcpu=self.total_vcpu,
            total_memory_gib=self.total_memory_gib,
            total_volume_gib=self.total_volume_gib,
        )

    def pool(self, name: str) -> NodePool | None:
        """The alive pool of that name, if any."""
        return next((p for p in self.node_pools if p.name == name and p.lifecycle == "active"), None)


class ClusterList(_Response):
    schema_version: str = CLUSTER_SCHEMA
    items: list[Cluster]
    total: int


class Operation(_Response):
    """A pool or node activity (R-OP-03)."""

    id: str
    kind: OperationKind
    target: str = Field(description="The pool name, or the node name for node.replace.")
    pool: str | None
    status: OperationStatus
    started_at: datetime
    finished_at: datetime | None
    error: str | None
    message: str | None = None


class ClusterState(_Response):
    """``GET /clusters/{id}/state``: the phase and the operations, newest first (R-OP-03)."""

    schema_version: str = STATE_SCHEMA
    cluster_id: str
    phase: Phase
    operations: list[Operation]

    def running(self) -> list[Operation]:
        return [op for op in self.operations if op.status == "running"]


# --- nodes ---------------------------------------------------------------------------------------


class Node(_Response):
    """R-NODE-06: no addresses, no provider ids."""

    name: str
    pool: str | None
    status: NodeStatus
    kubernetes_version: str | None
    ready: bool
    created_at: datetime
    deleted_at: datetime | None


class NodeList(_Response):
    """R-NODE-01..04: the best-known snapshot with its freshness."""

    schema_version: str = NODE_SCHEMA
    cluster_id: str
    items: list[Node]
    total: int
    cold: bool
    stale: bool
    next_refresh_at: datetime | None

    @property
    def fresh(self) -> bool:
        return not self.cold and not self.stale


class NodeDeletePending(_Response):
    """R-RNODE-01."""

    schema_version: str = NODE_SCHEMA
    cluster_id: str
    node_name: str


# --- errors --------------------------------------------------------------------------------------


class FieldError(_Response):
    field: str
    message: str
    rule: str | None = None


class Problem(_Response):
    """An ``application/problem+json`` body (RFC 9457) naming the rule that refused the request."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    rule: str | None = None
    errors: list[FieldError] = Field(default_factory=list)
    request_id: str | None = None
