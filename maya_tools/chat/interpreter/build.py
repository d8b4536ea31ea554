"""A complete frame's tool call: the count a relative change comes to, the bounds that stay, the
new pool's parts, the labels that are kept, and the Question or Refusal where Door's rules say no."""

from __future__ import annotations

from dataclasses import replace

from maya_tools.chat.interpreter import texts
from maya_tools.chat.interpreter.calls import ToolCall
from maya_tools.chat.interpreter.frame import MAX_COUNT, Frame, Question, Refusal
from maya_tools.chat.interpreter.names import World


def build(world: World, f: Frame) -> ToolCall:
    """The tool call a complete frame makes, or the Question or Refusal its parts call for."""
    c, p = f.cluster, f.pool
    where = {"cluster": c}
    if f.intent == "scale" and f.low is not None and f.high is not None and f.count in (None, f.low, f.high):
        f = replace(f, intent="autoscale_on")  # "scale batch 2-5": bounds, not a count
    if f.intent == "scale":
        count = f.count
        info = world.pool(c or "", p or "")
        if f.spec is not None and info is not None and info.size and info.size not in f.spec and count is not None:
            said = texts.amount_with_count(p or "", c or "", info.size, f.spec_said, f.spec, count)
            raise Question(said, replace(f, spec=None))  # "4 nodes with 16 GiB each": a count of another tier
        if info is not None and info.size and (other := _other_tier(f, info.size)):
            raise Question(texts.other_tier(p or "", c or "", info.size, other), replace(f, size=None, family=None))
        relative = f.factor is not None or (f.delta is not None and (count is None or f.count == abs(f.delta)))
        if relative:
            if info is None or info.count is None or info.auto_scale:
                why = (
                    f" It autoscales between {info.min_nodes} and {info.max_nodes}, so it has no fixed count to change."
                    if info and info.auto_scale
                    else ""
                )
                raise Question(
                    f"How many nodes should pool {p} on {c} have in all?{why} Or give new bounds (for example: let {p} autoscale between 2 and 6).",
                    replace(f, delta=None, factor=None),
                )
            count = round(info.count * f.factor) if f.factor is not None else info.count + (f.delta or 0)
            if count < 0 or (count == 0 and not info.auto_scale):
                raise Refusal(texts.below_one(p or "", c or "", info.count, count))
        if count is None:
            now = world.pool(c or "", p or "")
            has = f" (it has {now.count} now)" if now is not None and now.count is not None else ""
            raise Question(f"How many nodes should pool {p} on {c} have{has}? Say a number from 0 to {MAX_COUNT}.", f)
        if count > MAX_COUNT:
            raise Refusal(texts.too_many(count, MAX_COUNT))
        if count == 0 and info is not None and info.count is not None and not info.auto_scale:
            raise Refusal(texts.zero_fixed(p or "", c or ""))  # "scale general to zero": no card, as Door would
        if not relative and info is not None and info.auto_scale:
            raise Question(texts.fixed_or_bounds(p or "", c or "", info.min_nodes, info.max_nodes, count), f)
        before = (info.count, count) if relative and info is not None and info.count is not None else None
        return ToolCall("scale_node_pool", {**where, "pool": p, "count": count}, relative=before)
    if f.intent == "autoscale_on":
        info = world.pool(c or "", p or "")
        if info is not None and info.auto_scale:  # "raise the floor to 2": the other bound stays
            f = replace(
                f,
                low=f.low if f.low is not None else info.min_nodes,
                high=f.high if f.high is not None else info.max_nodes,
            )
        if f.low is not None and f.high is not None and f.low > f.high:
            raise Question(
                f"The lower bound {f.low} is above the upper bound {f.high} (R-PATCH-04): which bounds do you mean, for example between {f.high} and {f.low}?",
                replace(f, low=None, high=None),
            )
        if f.low is None and f.high is not None and info is not None and not info.auto_scale:
            raise Question(
                f"From how many nodes should {p} on {c} autoscale up to {f.high}? It has {info.count} now; Door "
                "would start the floor at 1 (R-PATCH-05). Say, for example: between 2 and 10.",
                f,
            )
        if f.high is None:
            raise Question(
                f"Between how many nodes should {p} on {c} autoscale? Door needs an upper bound (R-PATCH-05): "
                "say, for example, between 2 and 6.",
                f,
            )
        bounds: dict[str, int] = {"min_nodes": f.low} if f.low is not None else {}
        if f.start is not None and (f.low is None or f.low <= f.start) and f.start <= f.high:
            bounds["count"] = f.start  # "start at 3": the count to start from, within the bounds (R-PATCH-04)
        return ToolCall("scale_node_pool", {**where, "pool": p, "auto_scale": True, **bounds, "max_nodes": f.high})
    if f.intent == "autoscale_off":
        keep = {"count": f.count} if f.count is not None else {}
        info = world.pool(c or "", p or "")
        if f.soft_off and info is not None and not info.auto_scale and f.count is not None:
            return ToolCall("scale_node_pool", {**where, "pool": p, "count": f.count})
        if info is not None and not info.auto_scale and f.count is None and info.count is not None:
            raise Question(texts.already_fixed(p or "", c or "", info.count), f)  # a card that changes nothing
        if info is not None and info.auto_scale and f.count is None and info.count is not None:
            keep = {"count": info.count}  # R-PATCH-06: turning autoscaling off keeps the count
        return ToolCall("scale_node_pool", {**where, "pool": p, "auto_scale": False, **keep})
    if f.intent == "add":
        if f.name is None:
            raise Question(f"What should the new pool on {c} be called?", f)
        if f.size is None:
            raise Question(
                f"Which machine tier should pool {f.name} use, and how many nodes? Say 'list machine tiers' "
                "to see them.",
                f,
            )
        nodes = {"count": f.count} if f.count is not None else {}
        if f.start is not None:
            nodes = {"count": f.start}
        if f.auto or (f.auto is None and f.high is not None and f.count is None):
            if f.high is None:
                raise Question(
                    f"Between how many nodes should the new pool {f.name} autoscale (for example: between 1 and 4)?",
                    f,
                )
            if f.low is None and f.start is None and f.count is None:  # "autoscale up to 8": the floor is asked
                raise Question(
                    f"From how many nodes should the new pool {f.name} autoscale up to {f.high}? Door would start the "
                    f"floor at 1 (R-ADD-06). Say, for example: between 1 and {f.high}.",
                    f,
                )
            nodes = {
                **nodes,
                "auto_scale": True,
                "min_nodes": f.low if f.low is not None else 1,
                "max_nodes": f.high,
            }
        if nodes.get("count") == 0 and not nodes.get("auto_scale"):
            raise Question(texts.zero_new(f.name), replace(f, count=None))
        labels = {"labels": f.labels} if f.labels else {}
        if world.tiers and f.size not in world.tiers:
            raise Question(texts.unknown_tier(f.size, tuple(world.tiers)), replace(f, size=None))
        if f.bad_name:
            raise Question(texts.bad_name(f.name), replace(f, name=None, bad_name=False))
        if f.name in world.pools(c):
            raise Question(
                f"Pool {f.name} already exists on {c} (R-ADD-02): what should the new pool be called?",
                replace(f, name=None),
            )
        return ToolCall("add_node_pool", {**where, "name": f.name, "size": f.size, **nodes, **labels})
    if f.intent == "remove":
        if p in world.pools(c) and len(world.pools(c)) == 1:
            raise Refusal(texts.last_pool(p or "", c or ""))
        return ToolCall("remove_node_pool", {**where, "pool": p})
    if f.intent == "tier":
        if f.size is not None and world.tiers and f.size not in world.tiers:
            raise Question(texts.unknown_tier(f.size, tuple(world.tiers)), replace(f, size=None))
        if f.size is None and f.spec is not None:  # "16 GiB per node": the tiers that have it, or that none does
            now = world.pool(c or "", p or "")
            amount = texts.Amount(f.spec_said, f.spec, tuple(world.tiers))
            asked = texts.tier_for_amount(p or "", c or "", now.size if now else None, amount)
            raise Question(asked, replace(f, spec=None))
        if f.size is None:
            tiers = texts.one_of(tuple(world.tiers)) if world.tiers else "one of 'list machine tiers'"
            raise Question(f"Which machine tier should pool {p} on {c} move to: {tiers}?", f)
        if (now := world.pool(c or "", p or "")) is not None and now.size == f.size:
            tiers = texts.one_of(tuple(t for t in world.tiers if t != f.size))
            raise Question(f"Pool {p} on {c} already runs {f.size}: which tier should it move to: {tiers}?", f)
        keep = {"keep_name": True} if f.keep_name else {}
        return ToolCall("change_pool_tier", {**where, "pool": p, "size": f.size, **keep})
    if f.intent == "replace":
        if f.node is None:
            raise Question(f"Which node on {c}? Give its full name, as 'list nodes on {c}' shows it.", f)
        return ToolCall("replace_node", {**where, "node_name": f.node})
    if f.intent == "relabel":
        pool_info = world.pool(c or "", p or "")
        current = dict(pool_info.labels or {}) if pool_info else {}
        if f.label_mode in ("clear", "drop"):
            kept = {k: v for k, v in current.items() if k not in f.drop_keys} if f.label_mode == "drop" else {}
            kept |= f.labels or {}  # "drop the team label but add owner=sre"
            if f.label_key == "tags" and f.label_mode == "clear":
                return ToolCall("relabel_node_pool", {**where, "pool": p, "tags": {}})
            return ToolCall("relabel_node_pool", {**where, "pool": p, "labels": kept})
        if not f.labels and not f.tags:
            raise Question(f"Which labels (or tags) should pool {p} on {c} get? Write them as key=value.", f)
        if f.labels:
            merged = {**current, **f.labels} if f.label_mode == "add" else f.labels
            return ToolCall("relabel_node_pool", {**where, "pool": p, "labels": merged})
        return ToolCall("relabel_node_pool", {**where, "pool": p, "tags": f.tags})
    return _read(f)


def _read(f: Frame) -> ToolCall:
    where = {"cluster": f.cluster}
    if f.intent == "list_clusters":
        return ToolCall("list_clusters", {})
    if f.intent == "tiers":
        return ToolCall("list_machine_tiers", {})
    if f.intent == "card":
        return ToolCall("get_card", {"card_id": f.card})
    if f.intent == "list_pools":
        return ToolCall("list_node_pools", {**where, **({"pool": f.pool} if f.pool else {})})
    if f.intent == "list_nodes":
        return ToolCall("list_nodes", {**where, **({"pool": f.pool} if f.pool else {})})
    if f.intent == "operations":
        return ToolCall("get_cluster_operations", {**where, **({"follow": f.follow} if f.follow else {})})
    return ToolCall("get_cluster", where)


def _other_tier(f: Frame, size: str) -> str | None:
    """A tier said with a count that is not the pool's own ("add 2 r5 nodes to workers"): a pool has one tier."""
    if f.size and f.size != size:
        return f.size
    if f.family and f.family not in size.split("."):
        return f.family
    return None
