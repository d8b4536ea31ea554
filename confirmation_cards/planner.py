"""One planner per action: read the target, preflight with ``backend_client.rules``, build a card.

A planner never changes anything. It refuses (``PreflightError``) a request Door would refuse, in
Door's documented order of checks (docs/contracts.md), so the person hears the same rule Door would
name, without a card to approve. Every rule comes from ``backend_client.rules``; none is
re-implemented here.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import JsonValue, ValidationError

from backend_client import rules
from backend_client.errors import DoorStatusError
from backend_client.models import (
    PATCHABLE_FIELDS,
    Cluster,
    MachineTier,
    NodeList,
    NodePool,
    PublicNodePoolCreateRequest,
    PublicNodePoolPatchRequest,
)
from backend_client.rules import Violation
from confirmation_cards.actions import request_line
from confirmation_cards.door import DoorApi
from confirmation_cards.errors import NOT_A_BACKEND_REFUSAL, PreflightError, refusal_from
from confirmation_cards.models import (
    Action,
    Card,
    CardWarning,
    FieldChange,
    request_digest,
)
from confirmation_cards.roles import RoleMemory
from confirmation_cards.targets import DRAINING, fingerprint, node_snapshot, pool_snapshot
from confirmation_cards.warnings import (
    autoscale_warning,
    credit_warning,
    drain_warning,
    labels_warning,
    last_ready_warning,
    node_drained_warning,
    role_warning,
    scale_down_warning,
    unlisted_node_warning,
)

if TYPE_CHECKING:
    from confirmation_cards.policy import Policy

T = TypeVar("T")

DEFAULT_TTL = timedelta(minutes=10)  # DESIGN.md property 4
# A card about nodes should show them as they are: wait this long (Door's time) for a fresh node
# list (R-NODE-03/04) before planning on a cold or stale one, which the card then says.
NODES_FRESH_TIMEOUT = 5.0

SCALE_FIELDS = frozenset({"count", "auto_scale", "min_nodes", "max_nodes"})
LABEL_FIELDS = frozenset({"labels", "tags"})


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_card_id() -> str:
    """An unguessable id: knowing one card's id tells nothing about another's."""
    return "card_" + secrets.token_urlsafe(12)


def _refuse(violations: Iterable[Violation | None]) -> None:
    for violation in violations:
        if violation is not None:
            raise PreflightError(violation)


def _pool_view(pool: NodePool | None, names: Iterable[str]) -> dict[str, JsonValue]:
    if pool is None:
        return dict.fromkeys(names)
    data = pool.model_dump(mode="json")
    return {name: data[name] for name in names}


def _diff(before: NodePool | None, after: NodePool | None, names: Iterable[str]) -> tuple[FieldChange, ...]:
    names = tuple(names)
    old, new = _pool_view(before, names), _pool_view(after, names)
    return tuple(FieldChange(field=n, before=old[n], after=new[n]) for n in names if old[n] != new[n])


def _replace(pools: list[NodePool], name: str, new: NodePool | None) -> list[NodePool]:
    """The alive pools with ``name`` swapped for ``new`` (or removed when ``new`` is None)."""
    kept = [p for p in pools if not (p.name == name and p.lifecycle == "active")]
    return [*kept, new] if new is not None else kept


class Planner:
    """Builds unsaved cards through one DoorClient (the requester's token), with GETs only.

    ``principal`` (the token's fingerprint) is written on every card, which binds it to that
    principal; ``roles`` holds what Door's 403s taught about it.

    Every method raises ``PreflightError`` when Door would refuse the request (or it would change
    nothing) and lets the client's connection errors (``DoorConnectionError``) through.
    """

    def __init__(
        self,
        door: DoorApi,
        *,
        clock: Callable[[], datetime] = utc_now,
        ttl: timedelta = DEFAULT_TTL,
        principal: str | None = None,
        roles: RoleMemory | None = None,
        policy: Policy | None = None,
        client: str | None = None,
    ) -> None:
        self._door = door
        self._policy = policy
        self._client = client
        self._clock = clock
        self._ttl = ttl
        self._principal = principal
        self._roles = roles

    # --- actions -----------------------------------------------------------------------------

    async def add_node_pool(self, cluster: str, request: PublicNodePoolCreateRequest) -> Card:
        """A card for ``POST …/node-pools`` (R-ADD-*)."""
        found = await self._cluster(cluster)
        self._require_super_admin(found)
        _refuse(rules.create_shape_violations(request))
        catalog = await self._catalog(request.size)
        _refuse([rules.tier_violation(request.size, catalog), rules.phase_violation(found.phase)])
        new = rules.pool_from_create(request, catalog[request.size], pool_id="(new)")
        _refuse(rules.pool_violations(new, add=True))
        _refuse([rules.name_clash_violation(request.name, found.name, _alive_names(found))])
        after = [*found.node_pools, new]
        warnings: list[CardWarning] = []
        if new.labels or new.tags:
            warnings.append(labels_warning())
        if new.auto_scale and new.min_nodes is not None and new.min_nodes < new.count:
            warnings.append(autoscale_warning(new))
        fields = ("size", "count", "auto_scale", "min_nodes", "max_nodes", "labels", "tags", "root_volume_size_gib")
        rule_ids = ["R-AUTH-03", "R-PHASE-01", "R-ADD-01", "R-ADD-02", "R-ADD-03", "R-ADD-09", "R-ADD-10"]
        if new.auto_scale or new.count == 0:
            rule_ids += ["R-ADD-05", "R-ADD-06"]
        return self._card(
            action="add_node_pool",
            cluster=found,
            target=request.name,
            body=request.body(),
            diff=_diff(None, new, fields),
            before=found.node_pools,
            after=after,
            catalog=catalog,
            warnings=warnings,
            rule_ids=rule_ids,
            snapshot=pool_snapshot(found, request.name),
        )

    async def scale_node_pool(
        self, cluster: str, pool: str, patch: PublicNodePoolPatchRequest | Mapping[str, Any]
    ) -> Card:
        """A card for ``PATCH …/node-pools/{pool}`` changing count and autoscaling (R-PATCH-*)."""
        return await self._patch_card("scale_node_pool", cluster, pool, patch, SCALE_FIELDS)

    async def relabel_node_pool(
        self, cluster: str, pool: str, patch: PublicNodePoolPatchRequest | Mapping[str, Any]
    ) -> Card:
        """A card for ``PATCH …/node-pools/{pool}`` changing labels and tags only (R-PATCH-03, R-POOL-05)."""
        return await self._patch_card("relabel_node_pool", cluster, pool, patch, LABEL_FIELDS)

    async def remove_node_pool(self, cluster: str, pool: str) -> Card:
        """A card for ``DELETE …/node-pools/{pool}`` (R-DEL-*)."""
        found = await self._cluster(cluster)
        self._require_super_admin(found)
        _refuse([rules.phase_violation(found.phase)])
        current = self._alive_pool(found, pool, rule="R-DEL-03")
        await self._require_pool_idle(found, pool)
        _refuse([rules.last_pool_violation(pool, found.name, len(_alive_names(found)))])
        catalog = await self._catalog()
        warnings = [await self._drain_warning(found, current)]
        return self._card(
            action="remove_node_pool",
            cluster=found,
            target=pool,
            body={},
            diff=(
                *_diff(current, None, ("size", "count", "auto_scale", "min_nodes", "max_nodes")),
                FieldChange(field="lifecycle", before="active", after="deleting"),
            ),
            before=found.node_pools,
            after=_replace(found.node_pools, pool, None),
            catalog=catalog,
            warnings=warnings,
            rule_ids=["R-AUTH-03", "R-PHASE-01", "R-OP-01", "R-DEL-01", "R-DEL-02", "R-DEL-03"],
            snapshot=pool_snapshot(found, pool),
        )

    async def replace_node(self, cluster: str, node_name: str) -> Card:
        """A card for ``DELETE …/nodes/{node_name}``: the worker is replaced, the pool keeps its count (R-RNODE-*)."""
        found = await self._cluster(cluster)
        self._require_super_admin(found)
        _refuse([rules.node_name_violation(node_name), rules.phase_violation(found.phase)])
        state = await self._read(self._door.get_cluster_state(found.id))
        in_flight = any(
            op.status == "running" and op.kind == "node.replace" and op.target == node_name for op in state.operations
        )
        nodes = await self._read(self._door.list_nodes(found.id, fresh=True, fresh_timeout=NODES_FRESH_TIMEOUT))
        node = next((n for n in nodes.items if n.name == node_name), None)
        _refuse([rules.node_busy_violation(node_name, in_flight or (node is not None and node.status == "Deleting"))])
        warnings: list[CardWarning] = []
        pool_name = node.pool if node is not None else None
        if node is None:
            warnings.append(unlisted_node_warning(nodes))
        else:
            warnings.append(node_drained_warning(node_name))
            ready = [
                n
                for n in nodes.items
                if n.pool == pool_name and n.pool is not None and n.ready and n.status not in DRAINING
            ]
            if node.ready and [n.name for n in ready] == [node_name]:
                warnings.append(last_ready_warning())
        catalog = await self._catalog()
        diff = (
            FieldChange(
                field="node",
                before={"name": node_name, "status": node.status if node is not None else "unlisted"},
                after={"name": node_name, "status": "Deleting"},
            ),
        )
        return self._card(
            action="replace_node",
            cluster=found,
            target=node_name,
            body={},
            diff=diff,
            before=found.node_pools,
            after=found.node_pools,
            catalog=catalog,
            warnings=warnings,
            rule_ids=["R-AUTH-03", "R-PHASE-01", "R-RNODE-02", "R-RNODE-03", "R-RNODE-04", "R-RNODE-05"],
            snapshot=node_snapshot(found, state, nodes, node_name),
        )

    # --- the PATCH planners ------------------------------------------------------------------

    async def _patch_card(
        self,
        action: Action,
        cluster: str,
        pool: str,
        patch: PublicNodePoolPatchRequest | Mapping[str, Any],
        allowed: frozenset[str],
    ) -> Card:
        found = await self._cluster(cluster)
        self._require_super_admin(found)
        parsed = _parse_patch(patch)
        stray = sorted(parsed.sent() - allowed)
        other = "relabel_node_pool" if action == "scale_node_pool" else "scale_node_pool"
        _refuse([rules.patch_field_violation(field, allowed=allowed, tool=action, other_tool=other) for field in stray])
        _refuse(rules.patch_shape_violations(parsed))
        _refuse([rules.phase_violation(found.phase)])
        current = self._alive_pool(found, pool, rule="R-PATCH-07")
        await self._require_pool_idle(found, pool)
        merged = rules.merge_patch(current, parsed)
        _refuse(rules.pool_violations(merged, add=False))
        diff = _diff(current, merged, PATCHABLE_FIELDS)
        if not diff:
            _refuse(
                [
                    Violation(
                        "R-PATCH-03",
                        NOT_A_BACKEND_REFUSAL,
                        sorted(parsed.sent())[0],
                        f"nothing would change: pool {pool!r} already has "
                        + ", ".join(f"{k}={parsed.body()[k]!r}" for k in sorted(parsed.sent())),
                        "Ask for a value different from the current one.",
                    )
                ]
            )
        catalog = await self._catalog()
        warnings: list[CardWarning] = []
        rule_ids = ["R-AUTH-03", "R-PHASE-01", "R-OP-01", "R-PATCH-03", "R-PATCH-07", "R-PATCH-09"]
        if action == "scale_node_pool":
            rule_ids += ["R-PATCH-04", "R-CAP-01"]
            if parsed.auto_scale and current.auto_scale is False:
                rule_ids.append("R-PATCH-05")
            if merged.auto_scale is False and current.auto_scale:
                rule_ids.append("R-PATCH-06")
            removed = current.count - merged.count
            if removed > 0:
                warnings.append(scale_down_warning(current.count, merged.count))
            if merged.auto_scale and merged.min_nodes is not None and merged.min_nodes < current.count:
                warnings.append(autoscale_warning(merged))
        else:
            rule_ids.append("R-POOL-05")
            if merged.labels or merged.tags:
                warnings.append(labels_warning())
        return self._card(
            action=action,
            cluster=found,
            target=pool,
            body=parsed.body(),
            diff=diff,
            before=found.node_pools,
            after=_replace(found.node_pools, pool, merged),
            catalog=catalog,
            warnings=warnings,
            rule_ids=rule_ids,
            snapshot=pool_snapshot(found, pool),
        )

    # --- reads and checks --------------------------------------------------------------------

    async def _read(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except DoorStatusError as error:
            raise refusal_from(error) from error

    async def _cluster(self, name_or_id: str) -> Cluster:
        return await self._read(self._door.resolve_cluster(name_or_id))

    async def _catalog(self, size: str | None = None) -> dict[str, MachineTier]:
        """The catalog, as the client caches it; read again once when it lacks ``size`` (a new tier)."""
        tiers = await self._read(self._door.list_machine_tiers())
        if size is not None and all(tier.id != size for tier in tiers.items):
            tiers = await self._read(self._door.list_machine_tiers(max_age=0))
        return {tier.id: tier for tier in tiers.items}

    def _require_super_admin(self, cluster: Cluster) -> None:
        """R-AUTH-03 without a "who am I" route and without probing: Door sees only reads before approval.

        The role is learned from Door's own answer to an approved change: after a 403 for this token
        in this organisation, later plans there are refused up front (DESIGN.md property 10).
        """
        denied = self._roles is not None and self._roles.denied(self._principal, cluster.organisation)
        _refuse([rules.role_violation(not denied, cluster.organisation)])

    def role_warnings(self, cluster: Cluster) -> list[CardWarning]:
        """R-AUTH-03 said on the card unless Door already took a change from this caller in this organisation."""
        known = self._roles is not None and self._roles.allowed(self._principal, cluster.organisation)
        return [] if known else [role_warning()]

    def _alive_pool(self, cluster: Cluster, name: str, *, rule: str) -> NodePool:
        """R-PATCH-07 / R-DEL-03: the pool must exist and not be deleting (404 otherwise)."""
        pool = cluster.pool(name)
        if pool is not None:
            return pool
        deleting = [p.name for p in cluster.node_pools if p.lifecycle != "active"]
        _refuse([rules.missing_pool_violation(name, cluster.name, _alive_names(cluster), deleting, rule=rule)])
        raise AssertionError("unreachable: a missing pool is always a violation")

    async def _require_pool_idle(self, cluster: Cluster, pool: str) -> None:
        """R-OP-01: one pool operation at a time per pool."""
        state = await self._read(self._door.get_cluster_state(cluster.id))
        busy = next(
            (
                op
                for op in state.operations
                if op.status == "running" and op.kind.startswith("pool.") and (op.target == pool or op.pool == pool)
            ),
            None,
        )
        running = None if busy is None else (busy.id, busy.kind, f"{busy.started_at:%H:%M:%S}")
        _refuse([rules.busy_pool_violation(pool, running)])

    async def _drain_warning(self, cluster: Cluster, pool: NodePool) -> CardWarning:
        """How many workers a pool delete drains: the node list when it knows, else the declared count."""
        nodes: NodeList | None
        try:
            nodes = await self._door.list_nodes(cluster.id, pool.name, fresh=True, fresh_timeout=NODES_FRESH_TIMEOUT)
        except DoorStatusError:
            nodes = None
        if nodes is None or nodes.cold:
            reason = "the node list is not loaded yet" if nodes is not None else "the node list is unavailable"
            return drain_warning(pool.count, None, reason)
        running = [n for n in nodes.items if n.pool == pool.name and n.status not in DRAINING]
        return drain_warning(pool.count, len(running))

    # --- the card ----------------------------------------------------------------------------

    def _card(
        self,
        *,
        action: Action,
        cluster: Cluster,
        target: str,
        body: dict[str, Any],
        diff: tuple[FieldChange, ...],
        before: list[NodePool],
        after: list[NodePool],
        catalog: Mapping[str, MachineTier],
        warnings: list[CardWarning],
        rule_ids: list[str],
        snapshot: dict[str, JsonValue],
    ) -> Card:
        price_before = rules.hourly_price(before, catalog)
        price_after = rules.hourly_price(after, catalog)
        added = rules.added_hourly_price(before, after, catalog)
        credit_needed: float | None = None
        if added > 0:
            credit_needed = round(added * rules.CREDIT_HOURS, 2)
            warnings.append(credit_warning(added, credit_needed))
        warnings += self.role_warnings(cluster)
        method, path = request_line(action, cluster.id, target)
        now = self._clock()
        all_rules = {*rule_ids, *(w.rule for w in warnings if w.rule)}
        card = Card(
            id=new_card_id(),
            action=action,
            cluster_id=cluster.id,
            cluster_name=cluster.name,
            organisation=cluster.organisation,
            principal=self._principal,
            target=target,
            method=method,
            path=path,
            body=body,
            body_digest=request_digest(method, path, body),
            diff=diff,
            capacity_before=rules.capacity(before, catalog),
            capacity_after=rules.capacity(after, catalog),
            price_before=round(price_before, 4),
            price_after=round(price_after, 4),
            price_change=round(price_after - price_before, 4),
            credit_needed=credit_needed,
            warnings=tuple(warnings),
            rules=tuple(sorted(all_rules, key=_rule_order)),
            target_snapshot=snapshot,
            target_fingerprint=fingerprint(snapshot),
            created_at=now,
            expires_at=now + self._ttl,
        )
        return self.with_policy(card, cluster)

    def with_policy(self, card: Card, cluster: Cluster) -> Card:
        """The team's policy applied to a planned card (``confirmation_cards.policy``): a deny or a broken
        limit raises ``PreflightError`` before the card exists; else the card carries the rules that applied."""
        if self._policy is None:
            return card
        from confirmation_cards.policy import apply  # the policy file's models load with MAYA_POLICY only

        return apply(self._policy, card, cluster.tags, self._client)


def _alive_names(cluster: Cluster) -> list[str]:
    return [p.name for p in cluster.node_pools if p.lifecycle == "active"]


def _rule_order(rule: str) -> tuple[str, int]:
    head, _, number = rule.rpartition("-")
    return (head, int(number) if number.isdigit() else 0)


def _parse_patch(patch: PublicNodePoolPatchRequest | Mapping[str, Any]) -> PublicNodePoolPatchRequest:
    """A patch model from a model or a raw body; ``size`` and other fields Door refuses are named (R-PATCH-01)."""
    if isinstance(patch, PublicNodePoolPatchRequest):
        return patch
    _refuse(rules.patch_field_violations(patch))
    try:
        return PublicNodePoolPatchRequest.model_validate(dict(patch))
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "body"
        _refuse([rules.patch_field_violation(field.partition(".")[0], problem=first["msg"])])
        raise
