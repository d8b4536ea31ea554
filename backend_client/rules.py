"""The pure rules of the Door node-pool API, each implemented once and named by its id.

The reference backend enforces them, the confirmation cards preflight with them, and the client
uses them to explain refusals, so all three agree. Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from backend_client.models import (
    PATCHABLE_FIELDS,
    Capacity,
    MachineTier,
    NodePool,
    Phase,
    PublicNodePoolCreateRequest,
    PublicNodePoolPatchRequest,
)

# Written as JSON Schema (ECMA-262) patterns, where `$` is the end of the input, and published as
# such in /openapi.json. Python's `$` also matches before a final newline, so they are only ever
# applied with `fullmatch` (see `is_dns_label`, `is_node_name`): `re.match` would let "batch\n" in.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # R-ADD-01
NODE_NAME = re.compile(r"^[a-z0-9][-a-z0-9.]{0,252}[a-z0-9]$")  # R-RNODE-03
MAX_COUNT = 200  # R-ADD-04, R-PATCH-06
CREDIT_HOURS = 24  # R-CREDIT-01

MSG_EMPTY_PATCH = "at least one of: count, auto_scale, min_nodes, max_nodes, labels, tags"
MSG_MAX_REQUIRED = "max_nodes is required when auto_scale=true"
MSG_COUNT_ZERO = "count=0 requires auto_scale=true (or use DELETE to remove the pool)"


# What a caller can do about each rule's refusal: the one fix sentence per rule id, used by the
# violations below (the backend and the planner) and by the client's errors (``DoorStatusError.advice``).
FIXES: dict[str, str] = {
    "R-AUTH-01": "Send a valid token as 'Authorization: Bearer <token>' (DOOR_TOKEN).",
    "R-AUTH-02": "Ask an admin of the cluster's organisation to add you as a member.",
    "R-AUTH-03": "Ask a super_admin of the organisation to make this change, or use a super_admin token.",
    "R-AUTH-04": "Check the cluster id or name (list_clusters shows yours); it may have been torn down.",
    "R-PHASE-01": "Wait until the cluster is Provisioned, then try again.",
    "R-PHASE-02": "The cluster is not Provisioned yet; read its nodes once it is.",
    "R-OP-01": "Wait until that operation finishes (get_cluster_operations or wait_for_operation can follow it), "
    "then try again.",
    "R-ADD-01": "Use a DNS label: lowercase letters, digits and '-', 1 to 63 characters.",
    "R-ADD-02": "Choose another name, or change the existing pool instead.",
    "R-ADD-03": "Pick a size from list_machine_tiers().",
    "R-ADD-04": "Choose a count from 0 to 200.",
    "R-ADD-05": "count=0 needs auto_scale=true with bounds; or remove the pool instead.",
    "R-ADD-06": "With auto_scale=true send max_nodes, keep min_nodes ≤ max_nodes and count within them.",
    "R-ADD-07": "Send only name, size, count, auto_scale, min_nodes, max_nodes, labels and tags.",
    "R-ADD-08": "Top up the organisation's prepaid credit, or ask for fewer nodes.",
    "R-ADD-09": "This idempotency key was used with another body; use a new key for a new request.",
    "R-PATCH-01": "Send only count, auto_scale, min_nodes, max_nodes, labels or tags; to change the size add a "
    "new pool, then delete the old one.",
    "R-PATCH-02": "Send at least one of count, auto_scale, min_nodes, max_nodes, labels, tags.",
    "R-PATCH-04": "Fix the autoscaling bounds: max_nodes is required with auto_scale=true, min_nodes ≤ max_nodes, "
    "count within them; count=0 needs auto_scale=true.",
    "R-PATCH-05": "Send max_nodes when turning autoscaling on.",
    "R-PATCH-06": "Choose a count from 0 to 200.",
    "R-PATCH-07": "Check the pool name (list_node_pools shows the pools); a pool being deleted cannot be changed.",
    "R-PATCH-08": "Wait for the running operation or for the cluster to be Provisioned, then try again.",
    "R-PATCH-09": "This idempotency key was used with another patch; use a new key for a new request.",
    "R-DEL-01": "Add a replacement pool first, wait until it is up, then delete this one.",
    "R-DEL-03": "Check the pool name (list_node_pools shows the pools); a pool being deleted is gone already.",
    "R-NODE-05": "Check the cluster phase and the pool name; if the inventory is down, retry after a moment.",
    "R-RNODE-03": "Use the node name exactly as list_nodes or `kubectl get nodes` shows it.",
    "R-RNODE-05": "Wait for the running replacement (list_nodes shows the new worker), not another one.",
    "R-CREDIT-01": "Top up the organisation's prepaid credit, or ask for fewer nodes.",
}


@dataclass(frozen=True)
class Violation:
    """One broken rule: the status Door answers, the field at fault and what to do instead."""

    rule: str
    status: int
    field: str | None
    message: str
    fix: str

    def explain(self) -> str:
        where = f" ({self.field})" if self.field else ""
        return f"{self.rule}{where}: {self.message}. {self.fix}"


def is_dns_label(name: str) -> bool:
    """R-ADD-01: the whole name is an RFC 1123 DNS label (a trailing newline included)."""
    return DNS_LABEL.fullmatch(name) is not None


def is_node_name(name: str) -> bool:
    """R-RNODE-03: the whole name matches the Kubernetes node-name pattern."""
    return NODE_NAME.fullmatch(name) is not None


# --- who and when --------------------------------------------------------------------------------


def is_provisioned(phase: Phase | str) -> bool:
    """R-PHASE-01: only a Provisioned cluster accepts mutations; every other phase answers 409."""
    return phase == "Provisioned"


def phase_violation(phase: Phase | str) -> Violation | None:
    """R-PHASE-01 as a violation, or None when the cluster accepts changes."""
    if is_provisioned(phase):
        return None
    return Violation(
        "R-PHASE-01",
        409,
        None,
        f"the cluster is in phase {phase}, not Provisioned",
        "Wait until the cluster is Provisioned, then try again.",
    )


# --- request shape -------------------------------------------------------------------------------


def _bounds_shape(count: int | None, min_nodes: int | None, max_nodes: int | None, add: bool) -> list[Violation]:
    rule_count = "R-ADD-04" if add else "R-PATCH-06"
    found: list[Violation] = []
    if count is not None and not 0 <= count <= MAX_COUNT:
        found.append(
            Violation(
                rule_count,
                422,
                "count",
                f"count must be between 0 and {MAX_COUNT}, got {count}",
                f"Choose a count from 0 to {MAX_COUNT}.",
            )
        )
    if min_nodes is not None and min_nodes < 0:
        found.append(
            Violation("R-ADD-06", 422, "min_nodes", f"min_nodes must be ≥ 0, got {min_nodes}", "Use 0 or more.")
        )
    if max_nodes is not None and not 0 <= max_nodes <= MAX_COUNT:
        found.append(
            Violation(
                "R-ADD-06",
                422,
                "max_nodes",
                f"max_nodes must be between 0 and {MAX_COUNT}, got {max_nodes}",
                f"Choose max_nodes from 0 to {MAX_COUNT}.",
            )
        )
    return found


def create_shape_violations(request: PublicNodePoolCreateRequest) -> list[Violation]:
    """R-ADD-01 and R-ADD-04/06 ranges: what is wrong with a create body on its own."""
    found: list[Violation] = []
    if not is_dns_label(request.name):
        found.append(
            Violation(
                "R-ADD-01",
                422,
                "name",
                f"name {request.name!r} is not a DNS label",
                "Use lowercase letters, digits and '-', 1 to 63 characters, starting and ending "
                "with a letter or digit.",
            )
        )
    found += _bounds_shape(request.count, request.min_nodes, request.max_nodes, add=True)
    return found


def patch_field_violation(
    field: str,
    *,
    problem: str | None = None,
    allowed: Collection[str] = PATCHABLE_FIELDS,
    tool: str | None = None,
    other_tool: str | None = None,
) -> Violation | None:
    """R-PATCH-01 (and R-POOL-04 for the disk): only the patchable fields, each with a value of its type.

    ``problem`` says what is wrong with a patchable field's value (null, wrong type). ``allowed``
    narrows the fields to one change tool's (``tool``; the rest belong to ``other_tool``): Door would
    accept those, so that refusal carries status 0 (not a backend refusal).
    """
    if field == "size":
        return Violation(
            "R-PATCH-01",
            422,
            "size",
            "size is immutable",
            "To change tier, add a new pool with the new size, wait until it is up, then delete the old one "
            "(R-PATCH-10).",
        )
    if field == "root_volume_size_gib":
        return Violation(
            "R-POOL-04",
            422,
            field,
            "root_volume_size_gib comes from the machine tier",
            "To change disk, add a new pool with a different size (R-PATCH-10).",
        )
    if field not in PATCHABLE_FIELDS:
        return Violation(
            "R-PATCH-01",
            422,
            field,
            f"{field} cannot be patched",
            "Send only count, auto_scale, min_nodes, max_nodes, labels or tags.",
        )
    if field not in allowed:
        return Violation(
            "R-PATCH-01",
            0,
            field,
            f"{tool} does not change {field}",
            f"Use {other_tool} for {field}, as a separate card.",
        )
    if problem is not None:
        return Violation("R-PATCH-01", 422, field, problem, f"Send a value of the right type for {field}, or omit it.")
    return None


def empty_patch_violation(sent: Iterable[str]) -> Violation | None:
    """R-PATCH-02: a patch names at least one field."""
    if any(True for _ in sent):
        return None
    return Violation("R-PATCH-02", 422, None, MSG_EMPTY_PATCH, "Send at least one field to change.")


def patch_field_violations(body: Mapping[str, Any]) -> list[Violation]:
    """R-PATCH-01 and R-PATCH-02 on a raw PATCH body, before it is parsed."""
    found = [patch_field_violation(key) for key in body]
    found.append(empty_patch_violation(body))
    return [v for v in found if v is not None]


def patch_shape_violations(patch: PublicNodePoolPatchRequest) -> list[Violation]:
    """R-PATCH-02 and R-PATCH-06 ranges on a parsed patch; nulls are refused except for the bounds."""
    found = [empty_patch_violation(patch.sent())]
    for name in ("count", "auto_scale", "labels", "tags"):
        if name in patch.sent() and getattr(patch, name) is None:
            found.append(patch_field_violation(name, problem=f"{name} cannot be null"))
    checked = [v for v in found if v is not None]
    return checked + _bounds_shape(patch.count, patch.min_nodes, patch.max_nodes, add=False)


def role_violation(is_super_admin: bool, organisation: str, role: str | None = None) -> Violation | None:
    """R-AUTH-03: mutations need the super_admin role of the cluster's organisation (403 otherwise).

    ``role`` is the caller's role when it is known (the backend knows it; the planner knows only
    that Door refused this token a change there before).
    """
    if is_super_admin:
        return None
    who = f"role {role}" if role else "this token"
    return Violation(
        "R-AUTH-03",
        403,
        None,
        f"{who} cannot change pools or nodes of organisation {organisation}: changes need the super_admin role",
        FIXES["R-AUTH-03"],
    )


def tier_violation(size: str, catalog: Mapping[str, MachineTier]) -> Violation | None:
    """R-ADD-03: the size must be a catalog machine tier id (400 otherwise)."""
    if size in catalog:
        return None
    return Violation(
        "R-ADD-03",
        400,
        "size",
        f"unknown machine tier {size!r}",
        "Pick a tier from GET /v1/public/machine-tiers, for example " + ", ".join(sorted(catalog)[:3]) + ".",
    )


def node_name_violation(node_name: str) -> Violation | None:
    """R-RNODE-03: a node name must match the Kubernetes node-name pattern (400 otherwise)."""
    if is_node_name(node_name):
        return None
    return Violation(
        "R-RNODE-03",
        400,
        "node_name",
        f"{node_name!r} is not a valid node name",
        "Use the name exactly as `kubectl get nodes` or list_nodes shows it.",
    )


# --- merge and validate --------------------------------------------------------------------------


def pool_from_create(request: PublicNodePoolCreateRequest, tier: MachineTier, pool_id: str) -> NodePool:
    """The pool a create request asks for, with Door's defaults filled in (R-ADD-04..07, R-POOL-04)."""
    auto = request.auto_scale
    return NodePool(
        id=pool_id,
        name=request.name,
        size=request.size,
        count=request.count,
        auto_scale=auto,
        # R-ADD-06: min_nodes null → 1 when autoscaling; R-PATCH-06 decision: no bounds without autoscaling.
        min_nodes=(1 if request.min_nodes is None else request.min_nodes) if auto else None,
        max_nodes=request.max_nodes if auto else None,
        labels=dict(request.labels),
        tags=dict(request.tags),
        root_volume_size_gib=tier.spec.disk_gib,
        lifecycle="active",
    )


def merge_patch(pool: NodePool, patch: PublicNodePoolPatchRequest) -> NodePool:
    """The pool after the patch (R-PATCH-03, R-PATCH-05, R-PATCH-06), not yet validated."""
    sent = patch.sent()
    count = patch.count if "count" in sent and patch.count is not None else pool.count
    auto = patch.auto_scale if "auto_scale" in sent and patch.auto_scale is not None else pool.auto_scale
    min_nodes = patch.min_nodes if "min_nodes" in sent else pool.min_nodes
    max_nodes = patch.max_nodes if "max_nodes" in sent else pool.max_nodes
    if auto:
        if min_nodes is None:
            min_nodes = 1  # R-PATCH-05
    else:
        min_nodes = max_nodes = None  # R-PATCH-06 decision
    labels = patch.labels if "labels" in sent and patch.labels is not None else pool.labels
    tags = patch.tags if "tags" in sent and patch.tags is not None else pool.tags
    return pool.model_copy(
        update={
            "count": count,
            "auto_scale": auto,
            "min_nodes": min_nodes,
            "max_nodes": max_nodes,
            "labels": dict(labels),
            "tags": dict(tags),
        }
    )


def pool_violations(pool: NodePool, *, add: bool) -> list[Violation]:
    """R-ADD-05/06 (create) and R-PATCH-04 (patch, after the merge): the autoscaling combinations."""
    rule = "R-ADD-06" if add else "R-PATCH-04"
    found = _bounds_shape(pool.count, pool.min_nodes, pool.max_nodes, add=add)
    if found:
        return found
    if pool.auto_scale:
        if pool.max_nodes is None:
            return [Violation(rule, 422, "max_nodes", MSG_MAX_REQUIRED, "Send max_nodes with auto_scale=true.")]
        low = pool.min_nodes if pool.min_nodes is not None else 1
        if low > pool.max_nodes:
            return [
                Violation(
                    rule,
                    422,
                    "min_nodes",
                    f"min_nodes ({low}) is greater than max_nodes ({pool.max_nodes})",
                    "Choose min_nodes ≤ max_nodes.",
                )
            ]
        if not low <= pool.count <= pool.max_nodes:
            return [
                Violation(
                    rule,
                    422,
                    "count",
                    f"count {pool.count} is outside [{low}, {pool.max_nodes}] while autoscaling",
                    f"Choose a count between {low} and {pool.max_nodes}, or change the bounds.",
                )
            ]
    elif pool.count == 0:
        return [
            Violation(
                "R-ADD-05" if add else "R-PATCH-04",
                422,
                "count",
                MSG_COUNT_ZERO,
                "Turn autoscaling on with bounds, or remove the pool.",
            )
        ]
    return []


# --- capacity and credit -------------------------------------------------------------------------


def effective_nodes(pool: NodePool) -> int:
    """R-CAP-01: max_nodes when autoscaling with max_nodes set, otherwise count."""
    if pool.auto_scale and pool.max_nodes is not None:
        return pool.max_nodes
    return pool.count


def _alive(pools: Iterable[NodePool]) -> list[NodePool]:
    return [p for p in pools if p.lifecycle == "active"]


def capacity(pools: Iterable[NodePool], catalog: Mapping[str, MachineTier]) -> Capacity:
    """R-CAP-02/03: planned totals over alive pools; vCPU and memory null if a tier is unknown."""
    alive = _alive(pools)
    volume = sum(p.root_volume_size_gib * effective_nodes(p) for p in alive)
    if any(p.size not in catalog for p in alive):
        return Capacity(total_vcpu=None, total_memory_gib=None, total_volume_gib=volume)
    vcpu = sum(catalog[p.size].vcpu * effective_nodes(p) for p in alive)
    memory = sum(catalog[p.size].memory_gib * effective_nodes(p) for p in alive)
    return Capacity(total_vcpu=vcpu, total_memory_gib=float(memory), total_volume_gib=volume)


def hourly_price(pools: Iterable[NodePool], catalog: Mapping[str, MachineTier]) -> float:
    """The hourly price of the effective nodes of the alive pools (unknown tiers count as free)."""
    return sum(catalog[p.size].price_per_hour * effective_nodes(p) for p in _alive(pools) if p.size in catalog)


def added_hourly_price(
    before: Iterable[NodePool], after: Iterable[NodePool], catalog: Mapping[str, MachineTier]
) -> float:
    """How much more per hour the cluster's effective nodes cost after a change (0 when cheaper)."""
    return max(0.0, hourly_price(after, catalog) - hourly_price(before, catalog))


def credit_violation(
    credit: float, before: Iterable[NodePool], after: Iterable[NodePool], catalog: Mapping[str, MachineTier]
) -> Violation | None:
    """R-CREDIT-01 (decision): refuse with 402 a raise in effective nodes that credit cannot cover for 24 h."""
    added = added_hourly_price(before, after, catalog)
    if added <= 0:
        return None
    needed = round(added * CREDIT_HOURS, 2)
    if credit >= needed:
        return None
    return Violation(
        "R-CREDIT-01",
        402,
        None,
        f"prepaid credit {credit:.2f} cannot cover the added capacity ({needed:.2f} for {CREDIT_HOURS} h)",
        "Top up the organisation's prepaid credit, or ask for fewer nodes.",
    )


# --- pools and nodes as they stand (decided here once; the backend and the planner pass their data) --


def name_clash_violation(name: str, cluster_name: str, alive_names: Iterable[str]) -> Violation | None:
    """R-ADD-02: a new pool's name is unique among the alive pools (a ``deleting`` pool does not block it)."""
    if name not in set(alive_names):
        return None
    return Violation(
        "R-ADD-02", 409, "name", f"a pool named {name!r} already exists on {cluster_name}", FIXES["R-ADD-02"]
    )


def missing_pool_violation(
    name: str, cluster_name: str, alive_names: Iterable[str], deleting_names: Iterable[str], *, rule: str
) -> Violation | None:
    """R-PATCH-07 / R-DEL-03 (``rule`` says which): the pool exists and is not ``deleting``, else 404."""
    alive = sorted(set(alive_names))
    if name in alive:
        return None
    if name in set(deleting_names):
        message = f"pool {name!r} is already being deleted"
    else:
        message = f"{cluster_name} has no pool {name!r} (its pools: {', '.join(alive) or 'none'})"
    return Violation(rule, 404, "pool", message, FIXES[rule])


def last_pool_violation(name: str, cluster_name: str, alive_count: int) -> Violation | None:
    """R-DEL-01: a cluster keeps at least one alive pool."""
    if alive_count > 1:
        return None
    return Violation(
        "R-DEL-01",
        409,
        None,
        f"{name!r} is the last pool of {cluster_name}; a cluster keeps at least one",
        FIXES["R-DEL-01"],
    )


def busy_pool_violation(name: str, running: tuple[str, str, str] | None) -> Violation | None:
    """R-OP-01: one operation at a time per pool; ``running`` is (id, kind, started) of the running one, if any."""
    if running is None:
        return None
    op_id, kind, started = running
    return Violation(
        "R-OP-01",
        409,
        "pool",
        f"pool {name!r} is busy with operation {op_id} ({kind}, started {started})",
        FIXES["R-OP-01"],
    )


def node_busy_violation(node_name: str, replacing: bool) -> Violation | None:
    """R-RNODE-05: no second delete of a node whose replacement is in flight (or that is being deleted)."""
    if not replacing:
        return None
    return Violation(
        "R-RNODE-05", 409, "node_name", f"node {node_name!r} is already being replaced", FIXES["R-RNODE-05"]
    )
