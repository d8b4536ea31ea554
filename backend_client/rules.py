"""The pure rules of the Door node-pool API, each implemented once and named by its id.

The reference backend enforces them, the confirmation cards preflight with them, and the client
uses them to explain refusals, so all three agree. Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
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


def patch_field_violations(body: Mapping[str, Any]) -> list[Violation]:
    """R-PATCH-01 and R-PATCH-02 on a raw PATCH body, before it is parsed."""
    found: list[Violation] = []
    for key in body:
        if key == "size":
            found.append(
                Violation(
                    "R-PATCH-01",
                    422,
                    "size",
                    "size is immutable",
                    "To change tier, add a new pool with the new size, wait until it is up, "
                    "then delete the old one (R-PATCH-10).",
                )
            )
        elif key == "root_volume_size_gib":
            found.append(
                Violation(
                    "R-POOL-04",
                    422,
                    key,
                    "root_volume_size_gib comes from the machine tier",
                    "To change disk, add a new pool with a different size (R-PATCH-10).",
                )
            )
        elif key not in PATCHABLE_FIELDS:
            found.append(
                Violation(
                    "R-PATCH-01",
                    422,
                    key,
                    f"{key} cannot be patched",
                    "Send only count, auto_scale, min_nodes, max_nodes, labels or tags.",
                )
            )
    if not body:
        found.append(Violation("R-PATCH-02", 422, None, MSG_EMPTY_PATCH, "Send at least one field to change."))
    return found


def patch_shape_violations(patch: PublicNodePoolPatchRequest) -> list[Violation]:
    """R-PATCH-02 and R-PATCH-06 ranges on a parsed patch; nulls are refused except for the bounds."""
    found: list[Violation] = []
    if not patch.sent():
        found.append(Violation("R-PATCH-02", 422, None, MSG_EMPTY_PATCH, "Send at least one field to change."))
    for name in ("count", "auto_scale", "labels", "tags"):
        if name in patch.sent() and getattr(patch, name) is None:
            found.append(
                Violation("R-PATCH-01", 422, name, f"{name} cannot be null", f"Send a value for {name}, or omit it.")
            )
    found += _bounds_shape(patch.count, patch.min_nodes, patch.max_nodes, add=False)
    return found


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
