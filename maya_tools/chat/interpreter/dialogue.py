"""The conversation: a request's parts become one tool call, or one specific question whose answer
completes the request. Earlier turns give "it", "that pool", "there" and "the same cluster" a meaning."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from maya_tools.chat.interpreter import texts
from maya_tools.chat.interpreter.calls import Reply, ToolCall
from maya_tools.chat.interpreter.guard import safety_guard
from maya_tools.chat.interpreter.names import World
from maya_tools.chat.interpreter.reading import read
from maya_tools.chat.interpreter.sentence import Intent, Reading
from maya_tools.chat.interpreter.words import normalize

MAX_COUNT = 200  # R-ADD-04 / R-PATCH-06
_HELP = re.compile(r"/?help|\?|what\s+can\s+you\s+do|what\s+do\s+you\s+understand|commands|examples", re.IGNORECASE)
_READS: frozenset[Intent] = frozenset({"list_nodes", "list_pools", "get_cluster", "tiers"})
_NO_CLUSTER: frozenset[Intent] = frozenset({"list_clusters", "tiers", "card"})
_POOL_CHANGES: frozenset[Intent] = frozenset({"scale", "autoscale_on", "autoscale_off", "remove", "relabel", "tier"})


@dataclass(frozen=True)
class Frame:
    """A request being completed: its intent, the names chosen so far, and the other parts."""

    intent: Intent
    clusters: tuple[str, ...] = ()
    cluster: str | None = None
    pools: tuple[str, ...] = ()
    pool: str | None = None
    node: str | None = None
    name: str | None = None
    size: str | None = None
    count: int | None = None
    delta: int | None = None
    low: int | None = None
    high: int | None = None
    labels: dict[str, str] | None = None
    tags: dict[str, str] | None = None
    card: str | None = None
    refers_cluster: bool = False
    refers_pool: bool = False
    factor: float | None = None
    start: int | None = None
    auto: bool | None = None
    keep_name: bool = False
    label_mode: str = "set"
    drop_keys: tuple[str, ...] = ()
    label_key: str = "labels"
    bad_name: bool = False
    soft_off: bool = False
    family: str | None = None


class Refusal(Exception):
    """The request breaks a rule whatever its parts: say which and what to do instead."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class Question(Exception):
    """A part is missing or ambiguous: ask this, and keep the frame for the answer."""

    def __init__(self, text: str, frame: Frame) -> None:
        super().__init__(text)
        self.text = text
        self.frame = frame


def _from_reading(intent: Intent, r: Reading, base: Frame | None = None) -> Frame:
    """``base`` with every part ``r`` names put in (a name given again replaces the one chosen)."""
    f = base or Frame(intent)
    f = replace(f, intent=intent, refers_cluster=r.refers_cluster, refers_pool=r.refers_pool)
    if r.clusters or r.cluster_typed:
        f = replace(f, clusters=r.clusters, cluster=r.cluster_typed)
    if r.pools or r.pool_typed:
        f = replace(f, pools=r.pools, pool=r.pool_typed)
    if r.node:
        f = replace(f, node=r.node)
    parts: dict[str, Any] = {
        "name": r.name,
        "size": r.size,
        "count": r.count,
        "delta": r.delta,
        "low": r.low,
        "high": r.high,
        "labels": r.labels,
        "tags": r.tags,
        "card": r.card,
        "factor": r.factor,
        "start": r.start,
        "auto": r.auto,
    }
    if r.name is not None:
        f = replace(f, bad_name=r.bad_name)
    f = replace(f, soft_off=r.soft_off, family=r.family or f.family)
    f = replace(f, keep_name=f.keep_name or r.keep_name)
    if r.labels is not None or r.tags is not None:
        f = replace(f, label_mode=r.label_mode, drop_keys=r.drop_keys, label_key=r.label_key)
    if r.factor is not None:
        f = replace(f, delta=None, count=None)
    elif r.delta is not None or r.count is not None:
        f = replace(f, factor=None)
    return replace(f, **{k: v for k, v in parts.items() if v is not None})


class Interpreter:
    """One offline conversation. ``world`` is what the server lists (the chat refreshes it)."""

    def __init__(self, world: World | None = None) -> None:
        self.world = world or World()
        self.last: Frame | None = None
        self.pending: Frame | None = None
        self.said: list[str] = []
        self.tiers_asked = ""  # the last question about tiers: "the cheapest of those" reads it  # the sentences so far: a follow-up's verbs may be in an earlier one

    def interpret(self, text: str) -> ToolCall | Reply:
        """Map one request to a tool call or a reply; every call passes the safety guard last."""
        answering = self.pending is not None
        understood = self._interpret(text)
        if isinstance(understood, ToolCall):
            understood = safety_guard(text, self.world, understood, earlier=self.said[-3:], answering=answering)
            if isinstance(understood, Reply):
                self.last = None
        self.said.append(text)
        return understood

    def _interpret(self, text: str) -> ToolCall | Reply:
        """Map one request to a tool call, or say what is missing, why not, or what is understood."""
        said = normalize(text)
        if not said or _HELP.fullmatch(said):
            return Reply("help", texts.HELP)
        r = read(text, self.world, self.tiers_asked)
        if r.intent == "tiers":
            self.tiers_asked = r.text
        refusal = self._refusal(r)
        if refusal is not None:
            return refusal
        frame = self._frame(r)
        if frame is None:
            self.pending = None
            return Reply("help", texts.not_understood(self._understood(r)) + texts.HELP)
        try:
            call = self._call(self._resolve(frame))
        except Refusal as refused:
            self.pending = None
            return Reply("refuse", refused.text)
        except Question as question:
            self.pending = question.frame
            example = texts.EXAMPLE_OF.get(question.frame.intent)
            return Reply("clarify", question.text + (f" (for example: {example})" if example else ""))
        self.pending = None
        return call

    def _refusal(self, r: Reading) -> Reply | None:
        if r.refusal == "stray_answer":
            return Reply("clarify", texts.STRAY_ANSWER)
        if r.refusal is not None:
            self.pending = None
        if r.refusal == "approve":
            return Reply("refuse", texts.APPROVE)
        if r.refusal in ("everything", "cluster_delete"):
            return Reply("refuse", texts.EVERYTHING)
        if r.refusal == "new_cluster":
            return Reply("refuse", texts.NEW_CLUSTER)
        if (
            r.intent == "replace"
            and re.search(r"\b(?:reboot|restart)\b", r.text)
            and not re.search(r"\b(?:replace|recycle)\b", r.text)
        ):
            return Reply("clarify", texts.REBOOT)
        numbers = [n for n in (r.count, r.low, r.high) if n is not None]
        if r.intent in {"scale", "autoscale_on", "autoscale_off", "add"} and any(n > MAX_COUNT for n in numbers):
            return Reply("refuse", texts.too_many(max(numbers), MAX_COUNT))
        return None

    def _frame(self, r: Reading) -> Frame | None:
        pending = self.pending
        # "m5 large, 2 nodes" answers "which tier?": a read word with no name of its own is an answer
        answer_only = r.intent in _READS and not (r.clusters or r.pools or r.node) and bool(r.size or r.numbers)
        if pending is not None and r.has_parts and (r.intent in (None, pending.intent) or r.weak or answer_only):
            return _from_reading(pending.intent, r, pending)
        if (follow := self._follow_up(r)) is not None:
            return follow
        if r.intent is not None:
            return _from_reading(r.intent, r)
        if r.elsewhere or not r.has_parts:
            return None
        guessed = (r.cluster_typed or r.pool_typed) and not (r.clusters or r.pools or r.numbers or r.node or r.size)
        if guessed and self.world.clusters:
            return None  # a word the server does not list, found only by its place in the sentence
        if self.last is not None:  # "and on staging?", "now the same for payments-staging"
            base = replace(self.last, count=None, delta=None, low=None, high=None)
            return _from_reading(self.last.intent, r, base)
        if r.clusters or (r.cluster_typed and not r.pools):  # a listed pool before a guessed cluster ("at night")
            return _from_reading("get_cluster", r)
        if r.pools:  # "we don't really use batch anymore": show it, change nothing
            r.cluster_typed = None  # "at night" was only a guess; the pool names its cluster
            return _from_reading("list_pools", r)
        return None

    def _understood(self, r: Reading) -> tuple[str, str, str | None, list[str]]:
        """What a request it cannot map did name: a cluster, a pool, and the parts, for the examples."""
        cluster = (r.clusters or tuple(self.world.clusters) or ("payments-prod",))[0]
        pool = (r.pools or self.world.pools(cluster) or ("workers",))[0]
        parts = [f"cluster {c}" for c in r.clusters] + [f"pool {p}" for p in r.pools]
        parts += [f"node {r.node}"] if r.node else []
        parts += [f"the number {n}" for n in r.numbers[:2]]
        parts += [f"tier {r.size}"] if r.size else []
        return cluster, pool, r.node, parts

    def _follow_up(self, r: Reading) -> Frame | None:
        """A turn that changes the last request rather than making a new one: "make it r5 xlarge
        instead", "make the max 8 instead", "sorry, I meant general", "ok add one more", "replace it"."""
        last = self.last
        if last is None or r.question:
            return None
        names = replace(last, clusters=(), pools=(), pool=None, cluster=None) if (r.pools or r.clusters) else last
        if last.intent == "relabel" and r.pairs and r.intent in (None, "relabel", "add") and not r.pools:
            tags = last.label_key == "tags"  # "oh and env=prod too": added to the labels that card proposed
            merged = {**((last.tags if tags else last.labels) or {}), **r.pairs}
            if tags:
                return replace(last, label_mode="set", drop_keys=(), tags=merged)
            return replace(last, label_mode="set", drop_keys=(), labels=merged)
        if r.intent == "replace" and r.node is None and last.node:
            return _from_reading("replace", r, replace(Frame("replace"), node=last.node, cluster=last.cluster))
        if last.intent == "add" and r.correction and r.intent in (None, "tier", "scale", "autoscale_on", "add"):
            return _from_reading("add", r, last)
        bounds_only = (r.low is not None or r.high is not None) and not r.pools
        if last.intent == "autoscale_on" and bounds_only and r.intent in (None, "scale", "autoscale_on"):
            return _from_reading("autoscale_on", replace(r, count=None), last)
        same = re.search(r"\b(?:same|too|as\s+well|likewise)\b", r.text)
        if last.intent in _POOL_CHANGES and r.intent is None and (r.correction or same) and (r.pools or r.clusters):
            return _from_reading(last.intent, r, names)
        if r.follow_up and last.delta is not None and r.count is not None and r.delta is None and r.factor is None:
            return _from_reading(last.intent, replace(r, delta=r.count, count=None), names)  # "and one to general"
        if r.intent in (None, "list_nodes", "list_pools") and r.delta is not None and last.pool and not r.pools:
            return _from_reading("scale", r, replace(last, intent="scale", count=None, factor=None))
        return None

    # --- names ----------------------------------------------------------------------------------

    def _resolve(self, f: Frame) -> Frame:
        if f.intent in _NO_CLUSTER:
            return f
        f = self._cluster(f)
        named = f.pools or f.pool or f.refers_pool
        if f.intent in _POOL_CHANGES or (f.intent in ("list_nodes", "list_pools") and named):
            f = self._pool(f)
        return f

    def _cluster(self, f: Frame) -> Frame:
        w, last = self.world, self.last
        if f.cluster is not None and not f.clusters:
            return f
        choices = f.clusters
        if len(choices) > 1:
            narrowed = tuple(c for c in choices if any(p in w.pools(c) for p in f.pools) or f.pool in w.pools(c))
            choices = narrowed if len(narrowed) == 1 else choices
        if len(choices) > 1:
            raise Question(f"Which cluster do you mean: {texts.one_of(choices)}?", replace(f, clusters=choices))
        if choices:
            return replace(f, cluster=choices[0], clusters=())
        if f.node and (owner := w.node_cluster(f.node)):
            return replace(f, cluster=owner)
        if (f.refers_cluster or f.refers_pool) and last is not None and last.cluster:
            return replace(f, cluster=last.cluster)
        pool_names = f.pools or ((f.pool,) if f.pool else ())
        holders = tuple(dict.fromkeys(c for p in pool_names for c in w.clusters_with(p)))
        if len(holders) == 1:
            return replace(f, cluster=holders[0])
        if last is not None and last.cluster and (not holders or last.cluster in holders):
            return replace(f, cluster=last.cluster)
        if len(w.clusters) == 1:
            return replace(f, cluster=next(iter(w.clusters)))
        options = holders or tuple(w.clusters)
        what = f" is pool {pool_names[0]} on" if len(pool_names) == 1 else " do you mean"
        listed = f" I can see {texts.one_of(options)}." if options else ""
        raise Question(f"Which cluster{what}? Name the cluster.{listed}", f)

    def _pool(self, f: Frame) -> Frame:
        w, last = self.world, self.last
        assert f.cluster is not None
        here = w.pools(f.cluster)
        if f.pools:
            choices = tuple(p for p in f.pools if p in here) or f.pools
            if len(choices) > 1:
                raise Question(f"Which pool on {f.cluster} do you mean: {texts.one_of(choices)}?", f)
            return replace(f, pool=choices[0], pools=())
        if f.pool is not None:
            return f
        if last is not None and last.pool and last.cluster == f.cluster and (f.refers_pool or f.intent != "list_nodes"):
            return replace(f, pool=last.pool)
        if f.intent == "list_nodes":
            return f
        if len(here) == 1 and f.intent != "remove":
            return replace(f, pool=here[0])
        listed = f" It has {texts.one_of(here)}." if here else ""
        raise Question(f"Which pool on {f.cluster}?{listed}", f)

    # --- the call -------------------------------------------------------------------------------

    def _call(self, f: Frame) -> ToolCall:
        call = self._build(f)
        self.last = replace(f, clusters=(), pools=())
        return call

    def _build(self, f: Frame) -> ToolCall:
        c, p = f.cluster, f.pool
        where = {"cluster": c}
        if f.intent == "scale" and f.low is not None and f.high is not None and f.count in (None, f.low, f.high):
            f = replace(f, intent="autoscale_on")  # "scale batch 2-5": bounds, not a count
        if f.intent == "scale":
            count = f.count
            info = self.world.pool(c or "", p or "")
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
                now = self.world.pool(c or "", p or "")
                has = f" (it has {now.count} now)" if now is not None and now.count is not None else ""
                raise Question(
                    f"How many nodes should pool {p} on {c} have{has}? Say a number from 0 to {MAX_COUNT}.", f
                )
            if count > MAX_COUNT:
                raise Refusal(texts.too_many(count, MAX_COUNT))
            if count == 0 and info is not None and info.count is not None and not info.auto_scale:
                raise Refusal(texts.zero_fixed(p or "", c or ""))  # "scale general to zero": no card, as Door would
            if not relative and info is not None and info.auto_scale:
                raise Question(texts.fixed_or_bounds(p or "", c or "", info.min_nodes, info.max_nodes, count), f)
            before = (info.count, count) if relative and info is not None and info.count is not None else None
            return ToolCall("scale_node_pool", {**where, "pool": p, "count": count}, relative=before)
        if f.intent == "autoscale_on":
            info = self.world.pool(c or "", p or "")
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
            bounds = {"min_nodes": f.low} if f.low is not None else {}
            return ToolCall("scale_node_pool", {**where, "pool": p, "auto_scale": True, **bounds, "max_nodes": f.high})
        if f.intent == "autoscale_off":
            keep = {"count": f.count} if f.count is not None else {}
            info = self.world.pool(c or "", p or "")
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
                nodes = {
                    **nodes,
                    "auto_scale": True,
                    "min_nodes": f.low if f.low is not None else 1,
                    "max_nodes": f.high,
                }
            if nodes.get("count") == 0 and not nodes.get("auto_scale"):
                raise Question(texts.zero_new(f.name), replace(f, count=None))
            labels = {"labels": f.labels} if f.labels else {}
            if self.world.tiers and f.size not in self.world.tiers:
                raise Question(texts.unknown_tier(f.size, tuple(self.world.tiers)), replace(f, size=None))
            if f.bad_name:
                raise Question(texts.bad_name(f.name), replace(f, name=None, bad_name=False))
            if f.name in self.world.pools(c):
                raise Question(
                    f"Pool {f.name} already exists on {c} (R-ADD-02): what should the new pool be called?",
                    replace(f, name=None),
                )
            return ToolCall("add_node_pool", {**where, "name": f.name, "size": f.size, **nodes, **labels})
        if f.intent == "remove":
            if p in self.world.pools(c) and len(self.world.pools(c)) == 1:
                raise Refusal(texts.last_pool(p or "", c or ""))
            return ToolCall("remove_node_pool", {**where, "pool": p})
        if f.intent == "tier":
            if f.size is not None and self.world.tiers and f.size not in self.world.tiers:
                raise Question(texts.unknown_tier(f.size, tuple(self.world.tiers)), replace(f, size=None))
            if f.size is None:
                tiers = texts.one_of(tuple(self.world.tiers)) if self.world.tiers else "one of 'list machine tiers'"
                raise Question(f"Which machine tier should pool {p} on {c} move to: {tiers}?", f)
            if (now := self.world.pool(c or "", p or "")) is not None and now.size == f.size:
                tiers = texts.one_of(tuple(t for t in self.world.tiers if t != f.size))
                raise Question(f"Pool {p} on {c} already runs {f.size}: which tier should it move to: {tiers}?", f)
            keep = {"keep_name": True} if f.keep_name else {}
            return ToolCall("change_pool_tier", {**where, "pool": p, "size": f.size, **keep})
        if f.intent == "replace":
            if f.node is None:
                raise Question(f"Which node on {c}? Give its full name, as 'list nodes on {c}' shows it.", f)
            return ToolCall("replace_node", {**where, "node_name": f.node})
        if f.intent == "relabel":
            pool_info = self.world.pool(c or "", p or "")
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
        return self._read(f)

    def _read(self, f: Frame) -> ToolCall:
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
            return ToolCall("get_cluster_operations", where)
        return ToolCall("get_cluster", where)


def _other_tier(f: Frame, size: str) -> str | None:
    """A tier said with a count that is not the pool's own ("add 2 r5 nodes to workers"): a pool has one tier."""
    if f.size and f.size != size:
        return f.size
    if f.family and f.family not in size.split("."):
        return f.family
    return None


def interpret(text: str) -> ToolCall | Reply:
    """One request on its own, with no names listed and no earlier turn."""
    return Interpreter().interpret(text)
