"""One request read into its parts, wherever they appear: intent, cluster, pool or node, numbers,
bounds, tier, labels or tags. Nothing here decides what to do with a missing part (``dialogue``)."""

from __future__ import annotations

import re

from maya_tools.chat.interpreter import safety
from maya_tools.chat.interpreter.chatter import trim
from maya_tools.chat.interpreter.commands import commands
from maya_tools.chat.interpreter.intent import (
    APPROVE,
    AUTOSCALE,
    BYPASS,
    CLUSTER_KILL,
    DESTROY,
    ELSEWHERE,
    LABEL,
    POOLS,
    STRAY,
    TAG,
    TIER_VERB,
)
from maya_tools.chat.interpreter.intent import intent as _intent
from maya_tools.chat.interpreter.names import World
from maya_tools.chat.interpreter.negation import called_off
from maya_tools.chat.interpreter.new_pool import colon_pairs, new_name, same_tier
from maya_tools.chat.interpreter.parts import CREATE as _CREATE
from maya_tools.chat.interpreter.parts import find_names, find_numbers
from maya_tools.chat.interpreter.quantities import (
    bounds,
    canonical_tiers,
    cluster_ids,
    fix_typos,
    relative,
    tier_by_spec,
)
from maya_tools.chat.interpreter.sentence import Reading, Refusal
from maya_tools.chat.interpreter.tier_words import FAMILY, KEEP_NAME, RELATIVE_SPEC, tier_for_pool
from maya_tools.chat.interpreter.units import mark, said_amounts, spec_tiers
from maya_tools.chat.interpreter.words import SIZE, UNITS, digits, normalize

_PAIR = re.compile(r"(?<![\w./-])([A-Za-z0-9][-A-Za-z0-9_./]*)\s*=\s*((?:[-A-Za-z0-9_./]*[-A-Za-z0-9_/])?)")
_BOUND_KEYS = re.compile(r"\b(min|max|minimum|maximum|min_nodes|max_nodes|count|nodes)\s*[=:]\s*(\d+)", re.IGNORECASE)
_CARD = re.compile(r"\bcard_[A-Za-z0-9_-]+")
_JSON_LABELS = re.compile(r"(?:labels?|tags?)?\s*:?\s*\{([^{}]*)\}")
_JSON_PAIR = re.compile(r"[\"']?([A-Za-z0-9_./-]+)[\"']?\s*:\s*[\"']?([A-Za-z0-9_./-]*)[\"']?")


def read(request: str, world: World, context: str = "") -> Reading:
    """Every part of ``request`` that can be found, with names matched against ``world``."""
    as_typed, off = request, called_off(request)  # what the message calls off is not read as asked (issue 26)
    request = trim(off.kept, world) if off.any else trim(request, world)
    said = normalize(commands(request))  # "scale_node_pool pool=workers count=5", "--keep-name", JSON bits
    said = _BOUND_KEYS.sub(r"\1 \2", said)
    pools = "|".join(re.escape(p) for p in world.pools())
    if pools:  # "set workers=4": a count for a listed pool, never a label named after it
        said = re.sub(rf"\b({pools})\s*=\s*(\d+)\b", r"\1 to \2", said, flags=re.IGNORECASE)
    said = _JSON_LABELS.sub(lambda m: " " + " ".join(f"{k}={v}" for k, v in _JSON_PAIR.findall(m[1])) + " ", said)
    said = colon_pairs(canonical_tiers(said, world), world)  # "owner: alice", "Name: canary. Machine: c5 xlarge"
    said = re.sub(r"[,;]\s*(?=[A-Za-z0-9_.-]+=)", " ", said)
    pairs = {k.lower(): v for k, v in _PAIR.findall(said)}
    card = _CARD.search(said)
    masked = _PAIR.sub(lambda m: f"{m[1]}=", said)  # a value never reads as a request (label smuggling)
    text = cluster_ids(masked.lower(), world)
    text = canonical_tiers(text, world)
    text = fix_typos(text, [*world.clusters, *world.pools(), *world.all_nodes()])
    text = mark(digits(text))  # "16 gib", "$5", "50%": an amount, never a count (issue 26)
    for key, slot in (("name", "name"), ("size", "size"), ("count", "count")):
        if pairs.get(key):
            value = pairs.pop(key).lower()
            text += f" {slot}:{canonical_tiers(value, world) if slot == 'size' else value}"
    if pairs.get("cluster"):  # "cluster=payments-prod"
        text += f" on {pairs.pop('cluster').lower()}"
    pool_pair = pairs.pop("pool", None)  # "pool=workers": the pool, never a label
    if pool_pair and re.fullmatch(r"[a-z0-9][a-z0-9-]*", pool_pair.lower()):
        text += f" pool {pool_pair.lower()}"
    quoted = re.search(r"[\"'`‘’“”]([a-z0-9][a-z0-9-]*)[\"'`‘’“”]", request.lower())
    r = Reading(text=text, card=card[0] if card else None, said=request.lower())
    r.pairs = dict(pairs)
    r.called_off, r.called_off_before = off.dropped, off.everything_before
    if m := re.search(r"\bfollow\s+([a-z0-9][a-z0-9_.-]*)", text):
        r.follow = m[1]
    r.question = safety.asks(as_typed) and not safety.imperative(as_typed)  # on the words as typed
    r.follow_up = bool(re.match(r"\s*(?:and|what\s+about|how\s+about|same\s+for)\b", request.lower()))
    r.blind = not world.clusters
    r.correction = bool(
        re.search(
            r"\b(?:i\s+meant|meant|i\s+mean|instead|rather|actually|make\s+(?:it|that|this)|no\s+wait|sorry|oops|my\s+bad)\b"
            r"|\bnot\s+(?:on\s+)?[a-z0-9-]+\s*$",
            request.lower(),
        )
    )
    r.numbers = [int(n) for n in re.findall(r"(?<![\w.=-])(\d+)(?![\w.-]*[a-z])", text)]
    size = re.search(rf"(?<![\w.-])({SIZE})(?![\w-]|\.\w)", text)  # "r5 xlarge. 2": the stop ends it
    r.size = size[1] if size else None
    if m := re.search(r"\bname:(\S+)", text):
        r.name = m[1]
    if m := re.search(r"\bsize:(\S+)", text):
        r.size = r.size or canonical_tiers(m[1], world)
    find_names(r, world)
    if _CREATE.search(text) or re.search(r"\b(?:called|named|name)\b|[\"'`‘“]", request.lower()):
        if r.name is None and (named := new_name(text, request, world, r.clusters, r.pools)) is not None:
            r.name, r.pools = named, tuple(p for p in r.pools if p != named)
        r.size = r.size or same_tier(text, world, r.clusters[0] if len(r.clusters) == 1 else None)
    find_numbers(r)
    the_node = re.search(r"\bthe\s+(?:only\s+|one\s+|single\s+)?(?:node|machine|server|vm|instance)\b(?!\s*s)", text)
    if r.node is None and the_node and len(r.clusters) == 1 and not re.search(r"\b(?:every|all|each|both)\b", text):
        only = [n for n in world.all_nodes(r.clusters[0]) if not r.pools or f"-{r.pools[0]}-" in n]
        r.node = only[0] if len(only) == 1 else None  # "the node in staging keeps crashing": its only node
    rel = relative(text)
    r.factor = rel.factor
    if rel.delta is not None:
        r.delta = rel.delta
        if r.count == abs(rel.delta):
            r.count = None
    b = bounds(text)
    r.low = b.low if b.low is not None else r.low
    r.high = b.high if b.high is not None else r.high
    r.start = b.start
    shifted = [i for c in world.clusters for p, i in world.clusters[c].items() if p in r.pools and i.auto_scale]
    if (b.shift or b.scale) and len(shifted) == 1 and not (r.clusters and len(r.clusters) > 1):
        bound = (b.shift or b.scale or ("", 0))[0]  # resolved against the pool's listed bounds, as a relative count is
        listed = shifted[0].min_nodes if bound == "low" else shifted[0].max_nodes
        if listed is not None:
            moved = listed + b.shift[1] if b.shift else round(listed * (b.scale[1] if b.scale else 1))
            r.low, r.high = (moved, None) if bound == "low" else (None, moved)
            r.delta = r.count = None
            r.factor = None
    if r.start is not None and r.count == r.start:
        r.count = None
    ranged = re.search(r"\bfrom\s+(\d+)\s+to\s+(\d+)\b", text)
    now = {i.count for c in world.clusters for p, i in world.clusters[c].items() if p in r.pools}
    if ranged and not AUTOSCALE.search(text) and r.low == int(ranged[1]) in now and r.high == int(ranged[2]):
        r.count, r.low, r.high = int(ranged[2]), None, None  # "take workers from 2 to 3": a count
    if m := re.search(r"\bcount:(\d+)", text):
        r.count = int(m[1])
    r.keep_name = bool(KEEP_NAME.search(text))
    r.refusal = _refusal(r, text)
    if r.refusal is None and off.any and _bypass(as_typed):
        r.refusal = "approve"  # "no need to ask me, ...": asking to skip approval is refused wherever it is said
    r.spec = spec_tiers(text, world)
    r.spec_said = said_amounts(text)
    names_re = "|".join(re.escape(n) for n in sorted({*world.clusters, *world.pools()}, key=len, reverse=True))
    unlisted = (
        re.sub(rf"(?<![\w-])(?:{names_re})(?![\w-])", " ", text) if names_re else text
    )  # a pool named "logs" is ours
    r.elsewhere = bool(ELSEWHERE.search(unlisted))
    of_those = re.search(r"\b(?:of|on|to|onto)\s+(?:those|them|these)\b", text)  # the tiers an earlier question listed
    that_one = re.search(r"\b(?:to|onto)\s+(?:that|this|the\s+same)\s+(?:one|1|tier|size)\b", text) and context
    r.size = r.size or tier_by_spec(f"{text} {context}" if of_those or that_one else text, world)
    if r.size is None and len(r.pools) == 1 and (TIER_VERB.search(text) or RELATIVE_SPEC.search(text)):
        holders = r.clusters or world.clusters_with(r.pools[0])
        info = world.pool(holders[0], r.pools[0]) if len(holders) == 1 else None
        r.size = tier_for_pool(text, world, info.size) if info else None
    families = set(re.findall(f"({FAMILY})", text))
    r.family = families.pop() if len(families) == 1 else None
    r.intent = _intent(r, text, pairs)
    if r.question and not r.blind:  # a question reads what the server lists, never a word it does not
        r.pool_typed = None
        if r.cluster_typed is not None and r.cluster_typed in world.ids:  # a listed id: the chat passes it on
            r.clusters = (r.cluster_typed,)
        r.cluster_typed = None
    if r.intent == "list_nodes" and r.pool_typed in {"workers", "nodes", "machines"} and "pool" not in text:
        r.pool_typed = None  # "show workers in payments-prod": workers are nodes here
    if r.intent == "add":
        r.name = r.name or pool_pair or (quoted[1] if quoted and quoted[1] not in world.clusters else None)
        typed = re.search(re.escape(r.name or "-"), request, re.IGNORECASE) if r.name else None
        r.bad_name = bool(typed and not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", typed[0]))
        r.labels = {k: v for k, v in pairs.items() if k not in ("name", "size", "count", "pool")} or None
        no_ranges = re.sub(r"\d+\s*(?:-|–|to|and)\s*\d+", " ", text)  # "1-5 nodes" is the bounds
        if r.auto and r.count in (r.low, r.high) and not re.search(rf"\b{r.count}\s+{UNITS}", no_ranges):
            r.count = None
    if r.intent == "relabel":
        _label_mode(r, text, pairs)
        r.label_key = "tags" if TAG.search(text) and not LABEL.search(text) else "labels"
        if TAG.search(text) and not LABEL.search(text):
            r.tags = pairs
        else:
            r.labels = pairs
    return r


def _bypass(as_typed: str) -> bool:
    """The whole message as typed asks to approve or to skip approval (a label's value never does)."""
    text = _PAIR.sub(lambda m: f"{m[1]}=", normalize(as_typed)).lower()
    return bool(APPROVE.search(text) or BYPASS.search(text))


def _label_mode(r: Reading, text: str, pairs: dict[str, str]) -> None:
    """Whether labels replace the map (the default), join it ("add label"), or leave it ("drop", "clear")."""
    if (
        re.search(
            r"\b(?:remove|drop|delete|clear|strip|wipe)\s+(?:all\s+)?(?:the\s+|of\s+the\s+)?(?:labels|tags)\b", text
        )
        and not pairs
    ):
        r.label_mode = "clear"
    elif m := re.search(r"\b(?:remove|drop|delete|strip)\s+(?:the\s+)?([a-z0-9_./-]+)\s+(?:label|tag)\b", text):
        r.label_mode, r.drop_keys = "drop", (m[1],)
    elif m := re.search(
        r"\b(?:remove|drop|delete|strip|unset)\s+(?:the\s+)?(?:label|tag)\s+(?:key\s+)?([a-z0-9_./-]+)\b", text
    ):
        r.label_mode, r.drop_keys = "drop", (m[1],)  # "remove label team from workers"
    elif re.search(r"\b(?:add|also|plus|another|extra|too|as\s+well|keep)\b|\+\s*(?:label|tag)", r.said) and pairs:
        r.label_mode = "add"
    elif m := re.search(
        r"\b(?:change|set|update|switch)\s+(?:the\s+)?(?:[a-z0-9_-]+\s+)??([a-z0-9_./-]+)\s+(?:label|tag)\b.*?\bto\s+([a-z0-9_./-]+)",
        text,
    ):
        r.label_mode = "add"
        pairs[m[1]] = m[2]


def _refusal(r: Reading, text: str) -> Refusal | None:
    if STRAY.fullmatch(text):
        return "stray_answer"
    if APPROVE.search(text) or BYPASS.search(text):
        return "approve"
    words = set(re.findall(r"[a-z0-9][-a-z0-9_.]*", text))
    new_cluster = re.search(
        r"\b(?:create|make|provision|spin\s+up|set\s+up|build|add|stand\s+up)\s+(?:me\s+|us\s+)?(?:a\s+|an\s+|the\s+)?"
        r"(?:new\s+|another\s+|second\s+|fresh\s+)?(?:dks\s+|k8s\s+|kubernetes\s+)?cluster\b|\bnew\s+cluster\b",
        text,
    )
    if new_cluster and not POOLS.search(text):
        return "new_cluster"
    if DESTROY.search(text):
        every = re.search(r"\b(?:every|each)\s+(?:node\s*)?pools?\b", text)
        if (words & {"everything", "all", "clusters", "anything"} or every) and not (
            LABEL.search(text) or TAG.search(text)
        ):
            return "everything"
        target = r.pools or r.pool_typed or r.node
        if not target and (re.search(r"\bcluster\b", text) or (CLUSTER_KILL.search(text) and r.clusters)):
            return "cluster_delete"
    return None
