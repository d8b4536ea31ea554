"""The planner of ``change_pool_tier``: one card for the whole move of a pool to another machine tier.

A pool's tier never changes in place (R-PATCH-01, R-PATCH-10): the move is a plan of steps, approved
once. 1 add the new pool (the old one's count, bounds, labels and tags) · 2 wait until its operation
is done and every worker Running · 3 remove the old pool. With ``keep_name`` three more bring the old
name back: 4 add ``<pool>`` in the new tier, sent only once the old pool has left Door's list (R-DEL-02;
the reference backend would take it while the old one is deleting, R-ADD-02's decision, but a Door
that counts a deleting pool as alive would answer 409) ·
5 wait · 6 remove the temporary pool. Like every planner it reads only, and refuses up front what
Door would refuse at step 1 (no card).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue

from backend_client import paths, rules
from backend_client.models import MachineTier, NodePool, PublicNodePoolCreateRequest
from backend_client.rules import Violation
from confirmation_cards.errors import NOT_A_BACKEND_REFUSAL, PreflightError
from confirmation_cards.models import Card, CardWarning, FieldChange, PlanStep, StepKind, plan_digest, step_digest
from confirmation_cards.planner import Planner, _alive_names, _refuse, _rule_order, new_card_id
from confirmation_cards.targets import fingerprint, pool_snapshot
from confirmation_cards.warnings import name_changes_warning, plan_credit_warning, plan_drain_warning

# What each kind of step costs in time, as the card says it (Door's simulated durations in
# docs/contracts.md: a worker is Running about two minutes after its pool is added; a drain takes 30 s).
TAKES: dict[StepKind, str] = {
    "add": "seconds: Door accepts the pool at once and provisions its workers in the background",
    "wait": "about 2 minutes on the reference backend (minutes on Door), at most the plan's step deadline",
    "remove": "seconds to accept; its workers drain in the background (about 30 s each on the reference backend)",
}
RULES = ("R-AUTH-03", "R-PHASE-01", "R-OP-01", "R-ADD-01", "R-ADD-02", "R-ADD-03", "R-ADD-09", "R-ADD-10")
RULES_MORE = ("R-DEL-01", "R-DEL-02", "R-PATCH-10", "R-POOL-05", "R-CAP-01", "R-OP-03")


def tier_suffix(size: str) -> str:
    """``dks.c5.2xlarge`` → ``c5-2xlarge``: the tier as a DNS-label fragment."""
    fragment = size.removeprefix("dks.").lower()
    return re.sub(r"[^a-z0-9]+", "-", fragment).strip("-") or "tier"


def derive_name(pool: str, size: str, taken: set[str]) -> str:
    """``<pool>-<tier>`` cut to a DNS label (63 characters), numbered when that name is taken."""
    suffix = tier_suffix(size)
    for n in range(1, 100):
        tail = suffix if n == 1 else f"{suffix}-{n}"
        name = f"{pool[: 62 - len(tail)].rstrip('-')}-{tail}"[:63].strip("-")
        if name not in taken and rules.is_dns_label(name):
            return name
    raise AssertionError("unreachable: 99 numbered names cannot all be taken")


def _step(
    index: int,
    kind: StepKind,
    pool: str,
    cluster_id: str,
    body: dict[str, Any] | None = None,
    *,
    once_gone: bool = False,
) -> PlanStep:
    takes = TAKES[kind]
    if kind == "add":
        method, path, title = "POST", paths.public(paths.pools(cluster_id)), f"Add pool {pool}"
        if once_gone:  # R-DEL-02: sent only once the old pool has left Door's list (``PlanRunner``)
            title = f"Add pool {pool} again, in the new tier, once the old {pool} is gone from Door's list"
            takes = f"the old pool's drain first (about 30 s a worker on the reference backend), then {takes}"
    elif kind == "wait":
        method, path = "GET", paths.public(paths.nodes(cluster_id, pool))
        title = f"Wait until pool {pool} is done and every worker Running"
    else:
        method, path, title = "DELETE", paths.public(paths.pool(cluster_id, pool)), f"Remove pool {pool}"
    sent: dict[str, JsonValue] = dict(body or {})
    return PlanStep(
        index=index,
        kind=kind,
        pool=pool,
        method=method,
        path=path,
        body=sent,
        digest=step_digest(method, path, sent, index),
        title=title,
        takes=takes,
    )


def _copy(pool: NodePool, name: str, size: str) -> PublicNodePoolCreateRequest:
    """The old pool's shape in the new tier: count, autoscaling bounds, labels and tags."""
    bounds: dict[str, Any] = {}
    if pool.auto_scale:
        bounds = {"auto_scale": True, "min_nodes": pool.min_nodes, "max_nodes": pool.max_nodes}
    return PublicNodePoolCreateRequest(
        name=name, size=size, count=pool.count, labels=dict(pool.labels), tags=dict(pool.tags), **bounds
    )


async def plan_tier_change(
    planner: Planner, cluster: str, pool: str, size: str, *, new_name: str | None = None, keep_name: bool = False
) -> Card:
    """A plan card moving ``pool`` to tier ``size``; raises ``PreflightError`` for what Door would refuse."""
    found = await planner._cluster(cluster)
    planner._require_super_admin(found)
    _refuse([rules.phase_violation(found.phase)])
    current = planner._alive_pool(found, pool, rule="R-PATCH-07")
    catalog = await planner._catalog(size)
    _refuse([rules.tier_violation(size, catalog)])
    if current.size == size:
        raise PreflightError(
            Violation(
                "R-PATCH-10",
                NOT_A_BACKEND_REFUSAL,
                "size",
                f"pool {pool!r} is already in tier {size}",
                "Ask for another tier (list_machine_tiers).",
            )
        )
    await planner._require_pool_idle(found, pool)
    alive = set(_alive_names(found))
    temporary = new_name if new_name is not None else derive_name(pool, size, alive)
    request = _copy(current, temporary, size)
    _refuse(rules.create_shape_violations(request))
    _refuse([rules.name_clash_violation(temporary, found.name, alive)])
    new = rules.pool_from_create(request, catalog[size], pool_id="(new)")
    _refuse(rules.pool_violations(new, add=True))
    steps = [
        _step(1, "add", temporary, found.id, request.body()),
        _step(2, "wait", temporary, found.id),
        _step(3, "remove", pool, found.id),
    ]
    final = new
    if keep_name:
        back = _copy(current, pool, size)
        steps += [
            _step(4, "add", pool, found.id, back.body(), once_gone=True),
            _step(5, "wait", pool, found.id),
            _step(6, "remove", temporary, found.id),
        ]
        final = rules.pool_from_create(back, catalog[size], pool_id="(new)")
    others = [p for p in found.node_pools if not (p.name == pool and p.lifecycle == "active")]
    peak = [*found.node_pools, new]
    after = [*others, final]
    return _card(planner, found, pool, current, final, steps, catalog, peak, after, keep_name=keep_name)


def _card(
    planner: Planner,
    found: Any,
    pool: str,
    current: NodePool,
    final: NodePool,
    steps: list[PlanStep],
    catalog: Mapping[str, MachineTier],
    peak: list[NodePool],
    after: list[NodePool],
    *,
    keep_name: bool,
) -> Card:
    before = found.node_pools
    added = rules.added_hourly_price(before, peak, catalog)
    credit = round(added * rules.CREDIT_HOURS, 2)
    warnings: list[CardWarning] = [plan_drain_warning(current.count)]
    if not keep_name:
        warnings.append(name_changes_warning(final.name))
    if added > 0:
        warnings.append(plan_credit_warning(added, credit))
    warnings += planner.role_warnings(found)
    price_before = rules.hourly_price(before, catalog)
    price_after = rules.hourly_price(after, catalog)
    diff = [FieldChange(field="size", before=current.size, after=final.size)]
    if final.name != pool:
        diff.append(FieldChange(field="name", before=pool, after=final.name))
    snapshot = pool_snapshot(found, pool)
    now = planner._clock()
    all_rules = {*RULES, *RULES_MORE, *(w.rule for w in warnings if w.rule)}
    first = steps[0]
    card = Card(
        id=new_card_id(),
        action="change_pool_tier",
        cluster_id=found.id,
        cluster_name=found.name,
        organisation=found.organisation,
        principal=planner._principal,
        target=pool,
        method="POST",
        path=first.path,
        body=first.body,
        body_digest=plan_digest(steps),
        diff=tuple(diff),
        capacity_before=rules.capacity(before, catalog),
        capacity_after=rules.capacity(after, catalog),
        capacity_peak=rules.capacity(peak, catalog),
        price_before=round(price_before, 4),
        price_after=round(price_after, 4),
        price_change=round(price_after - price_before, 4),
        price_peak=round(rules.hourly_price(peak, catalog), 4),
        credit_needed=credit if added > 0 else None,
        warnings=tuple(warnings),
        rules=tuple(sorted(all_rules, key=_rule_order)),
        target_snapshot=snapshot,
        target_fingerprint=fingerprint(snapshot),
        created_at=now,
        expires_at=now + planner._ttl,
        steps=tuple(steps),
    )
    return planner.with_policy(card, found)
