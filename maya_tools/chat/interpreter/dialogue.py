"""The conversation: a request's parts become one tool call, or one specific question whose answer
completes the request. Earlier turns give "it", "that pool", "there" and "the same cluster" a meaning."""

from __future__ import annotations

import re
from dataclasses import replace

from maya_tools.chat.interpreter import texts
from maya_tools.chat.interpreter.build import build
from maya_tools.chat.interpreter.calls import Reply, ToolCall
from maya_tools.chat.interpreter.chatter import two_requests
from maya_tools.chat.interpreter.frame import MAX_COUNT, Frame, Question, Refusal, from_reading
from maya_tools.chat.interpreter.guard import safety_guard
from maya_tools.chat.interpreter.names import World
from maya_tools.chat.interpreter.reading import read
from maya_tools.chat.interpreter.sentence import Intent, Reading
from maya_tools.chat.interpreter.words import normalize

_HELP = re.compile(r"/?help|\?|what\s+can\s+you\s+do|what\s+do\s+you\s+understand|commands|examples", re.IGNORECASE)
_READS: frozenset[Intent] = frozenset({"list_nodes", "list_pools", "get_cluster", "tiers"})
_NO_CLUSTER: frozenset[Intent] = frozenset({"list_clusters", "tiers", "card"})
_POOL_CHANGES: frozenset[Intent] = frozenset({"scale", "autoscale_on", "autoscale_off", "remove", "relabel", "tier"})


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
        if (r.called_off or r.called_off_before) and r.refusal is None and (r.intent is None or not r.has_parts):
            self.pending = None  # "forget about replacing k7m2p, it recovered": nothing is asked for (issue 26)
            return Reply("clarify", texts.called_off(r.called_off, r.called_off_before))
        one_change = (
            r.intent in _READS or r.intent in _NO_CLUSTER or r.intent == "add"
        )  # a new pool's parts join with "and"
        if not one_change and (both := two_requests(r.said, self.world)):
            self.pending = None
            return Reply("clarify", texts.one_at_a_time(*both))
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
            return Reply("out_of_scope", texts.NEW_CLUSTER)  # clusters are Door's console's, not a rule broken
        if (
            r.intent == "replace"
            and re.search(r"\b(?:reboot|restart)\b", r.text)
            and not re.search(r"\b(?:replace|recycle)\b", r.text)
        ):
            return Reply("clarify", texts.REBOOT)
        numbers = [n for n in (r.count, r.low, r.high) if n is not None]
        counting = r.intent in {"scale", "autoscale_on", "autoscale_off", "add"}
        fraction = re.search(
            r"(?<![\w.])(\d+)[.,](\d+)(?![\w.])(?!\s*(?:%|percent|gb|gib|ghz|vcpu|cpu|\$|usd|/h))", r.said
        )
        if counting and fraction and int(fraction[2]) != 0:  # "2.5 nodes": a pool counts whole nodes
            self.pending = None
            return Reply("clarify", texts.fraction(fraction[0], int(fraction[1])))
        if counting and any(n > MAX_COUNT for n in numbers):
            return Reply("refuse", texts.too_many(max(numbers), MAX_COUNT))
        return None

    def _frame(self, r: Reading) -> Frame | None:
        pending = self.pending
        if (again := self._same_pool(r)) is not None:
            return again
        # "m5 large, 2 nodes" answers "which tier?": a read word with no name of its own is an answer
        answer_only = r.intent in _READS and not (r.clusters or r.pools or r.node) and bool(r.size or r.numbers)
        if pending is not None and r.has_parts and (r.intent in (None, pending.intent) or r.weak or answer_only):
            return from_reading(pending.intent, r, pending)
        if (follow := self._follow_up(r)) is not None:
            return follow
        if r.intent is not None:  # a read the words ask for reads every pool they name at once
            return replace(from_reading(r.intent, r), asked_read=r.intent in ("list_pools", "list_nodes"))
        if r.elsewhere or not r.has_parts:
            return None
        guessed = (r.cluster_typed or r.pool_typed) and not (r.clusters or r.pools or r.numbers or r.node or r.size)
        if guessed and self.world.clusters:
            return None  # a word the server does not list, found only by its place in the sentence
        if self.last is not None:  # "and on staging?", "now the same for payments-staging"
            base = replace(self.last, count=None, delta=None, low=None, high=None) if r.numbers else self.last
            return from_reading(self.last.intent, r, base)
        if r.clusters or (r.cluster_typed and not r.pools):  # a listed pool before a guessed cluster ("at night")
            return from_reading("get_cluster", r)
        if r.pools:  # "we don't really use batch anymore": show it, change nothing
            r.cluster_typed = None  # "at night" was only a guess; the pool names its cluster
            return from_reading("list_pools", r)
        return None

    def _same_pool(self, r: Reading) -> Frame | None:
        """A turn about the pool the last request or question was about, naming none itself: "I meant
        the max" (the count said was a bound), "I mean fixed at 3, without autoscaling"."""
        ctx = self.pending or self.last
        if ctx is None or ctx.pool is None or r.pools or r.clusters or r.node or r.question:
            return None
        bound = re.search(r"\b(max(?:imum)?|ceiling|cap|upper\s+bound|min(?:imum)?|floor|lower\s+bound)\b", r.text)
        if bound and ctx.count is not None and not r.numbers and ctx.intent in ("scale", "autoscale_off"):
            floor = bound[1].startswith(("min", "floor", "lower"))
            low, high = (ctx.count, None) if floor else (None, ctx.count)
            return replace(ctx, intent="autoscale_on", count=None, delta=None, factor=None, low=low, high=high)
        if (
            r.intent in ("autoscale_on", "autoscale_off")
            and (self.pending is not None or r.correction)
            and r.intent != ctx.intent
        ):
            fresh = replace(ctx, intent=r.intent, count=None, delta=None, low=None, high=None, factor=None)
            return from_reading(r.intent, r, fresh)
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
        names = last
        if r.pools:
            names = replace(last, clusters=(), pools=(), pool=None, cluster=None)
        elif r.clusters:  # "do it on staging instead": the same pool there, or the question that it has none
            same_there = re.search(r"\b(?:same|too|as\s+well|likewise)\b", r.text)  # "same for staging": its pool
            names = replace(last, clusters=(), pools=(), cluster=None, pool=None if same_there else last.pool)
        if last.intent == "relabel" and r.pairs and r.intent in (None, "relabel", "add", "tiers") and not r.pools:
            tags = last.label_key == "tags"  # "oh and env=prod too": added to the labels that card proposed
            merged = {**((last.tags if tags else last.labels) or {}), **r.pairs}
            if tags:
                return replace(last, label_mode="set", drop_keys=(), tags=merged)
            return replace(last, label_mode="set", drop_keys=(), labels=merged)
        if r.intent == "replace" and r.node is None and last.intent == "list_nodes" and last.cluster:
            shown = [n for n in self.world.all_nodes(last.cluster) if not last.pool or f"-{last.pool}-" in n]
            if len(shown) == 1:  # "replace that one" after a list of one node
                return replace(Frame("replace"), node=shown[0], cluster=last.cluster)
        if (
            last.intent == "replace"
            and last.node
            and last.cluster
            and re.search(r"\b(?:the\s+)?other(?:\s+(?:one|1|node))?\b", r.text)
        ):
            group = last.node.rsplit("-", 1)[0]
            others = [n for n in self.world.all_nodes(last.cluster) if n != last.node and n.rsplit("-", 1)[0] == group]
            if len(others) == 1:  # "and the other one too" after replacing one of a pool's two nodes
                return replace(Frame("replace"), node=others[0], cluster=last.cluster)
        if r.intent == "replace" and r.node is None and last.node:
            return from_reading("replace", r, replace(Frame("replace"), node=last.node, cluster=last.cluster))
        if last.intent == "add" and r.correction and r.intent in (None, "tier", "scale", "autoscale_on", "add"):
            if r.intent == "autoscale_on" or (
                r.low is not None and r.high is not None
            ):  # "make that autoscale 1-5 instead"
                start = last.start if r.start is None else r.start
                return from_reading("add", replace(r, auto=True, count=None), replace(last, count=None, start=start))
            return from_reading("add", r, last)
        if (
            r.factor is not None
            and not r.pools
            and last.pool
            and last.intent == "scale"
            and r.intent in (None, "scale")
        ):
            return from_reading("scale", r, replace(last, count=None, delta=None))  # "no, triple": of the listed count
        bounds_only = (r.low is not None or r.high is not None) and not r.pools
        if last.intent == "autoscale_on" and bounds_only and r.intent in (None, "scale", "autoscale_on"):
            return from_reading("autoscale_on", replace(r, count=None), last)
        same = re.search(r"\b(?:same|too|as\s+well|likewise)\b", r.text)
        if last.intent in _POOL_CHANGES and r.intent is None and (r.correction or same) and (r.pools or r.clusters):
            return from_reading(last.intent, r, names)
        if r.follow_up and last.delta is not None and r.count is not None and r.delta is None and r.factor is None:
            return from_reading(last.intent, replace(r, delta=r.count, count=None), names)  # "and one to general"
        if r.intent in (None, "list_nodes", "list_pools") and r.delta is not None and last.pool and not r.pools:
            return from_reading("scale", r, replace(last, intent="scale", count=None, factor=None))
        return None

    # --- names ----------------------------------------------------------------------------------

    def _resolve(self, f: Frame) -> Frame:
        if f.intent in _NO_CLUSTER:
            return f
        if f.intent in ("get_cluster", "list_pools", "list_nodes") and len(f.clusters) > 1 and not f.one_word_clusters:
            if not f.pools:  # "compare prod and staging": every cluster at once
                return replace(f, intent="list_clusters", clusters=())
            f = replace(
                f, intent="list_pools", cluster=f.clusters[0], clusters=(), pools=()
            )  # a read answers, no question
        f = self._cluster(f)
        if f.intent in ("list_pools", "list_nodes") and len(set(f.pools)) > 1 and f.asked_read:
            f = replace(f, pools=(), pool=None)  # "the difference between workers and batch": the cluster's pools
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
        call = build(self.world, f)
        self.last = replace(f, clusters=(), pools=())
        return call


def interpret(text: str) -> ToolCall | Reply:
    """One request on its own, with no names listed and no earlier turn."""
    return Interpreter().interpret(text)
