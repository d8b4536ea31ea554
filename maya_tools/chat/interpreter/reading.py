"""One request read into its parts, wherever they appear: intent, cluster, pool or node, numbers,
bounds, tier, labels or tags. Nothing here decides what to do with a missing part (``dialogue``)."""

from __future__ import annotations

import re

from maya_tools.chat.interpreter import safety
from maya_tools.chat.interpreter.chatter import trim
from maya_tools.chat.interpreter.commands import commands
from maya_tools.chat.interpreter.names import World
from maya_tools.chat.interpreter.new_pool import colon_pairs, new_name, same_tier
from maya_tools.chat.interpreter.parts import CREATE as _CREATE
from maya_tools.chat.interpreter.parts import NEW_POOL as _NEW_POOL
from maya_tools.chat.interpreter.parts import find_names, find_numbers
from maya_tools.chat.interpreter.quantities import (
    bounds,
    canonical_tiers,
    cluster_ids,
    fix_typos,
    relative,
    tier_by_spec,
)
from maya_tools.chat.interpreter.sentence import Intent, Reading, Refusal
from maya_tools.chat.interpreter.tier_words import FAMILY, KEEP_NAME, RELATIVE_SPEC, tier_for_pool
from maya_tools.chat.interpreter.words import SIZE, UNITS, digits, normalize


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


_APPROVE = _rx(
    # "confirm" asks for an approval when its object is the card or the change, never "confirm X exists"
    r"\b(?:approve[sd]?|approving|approval|confirm(?:s|ing)?\s+(?:it|that|this|(?:the\s+)?(?:\w+\s+)?(?:card|change|request)s?|for\s+me)|"
    r"^confirm$|confirmed|sign(?:ed)?\s+off|rubber[\s-]?stamp|"
    r"auto[\s-]?approv\w*|(?:say|said|answer)\s+yes\s+for\s+me)\b"
)
_BYPASS = _rx(
    r"\bwithout\s+(?:asking|a\s+card|the\s+card|any\s+card|confirmation|approval|checking|a\s+prompt|me)\b"
    r"|\bskip(?:s|ping)?\s+(?:the\s+|a\s+)?(?:card|confirmation|approval|prompt|check|question)s?\b"
    r"|\b(?:confirm(?:ation|ed)?|approved?|skip_card|auto_approve)\s*="
    r"|\bdon'?t\s+(?:ask|bother\s+asking|show\s+(?:me\s+)?(?:a|the)\s+card)\b|\bno\s+need\s+to\s+(?:ask|confirm)\b|\bbypass\b"
)
_STRAY = _rx(r"(?:y|yes|yep|yeah|yup|n|no|nope|nah|ok|okay|sure|go|do\s+it|go\s+ahead)")
_DESTROY = _rx(r"\b(?:remove|delete|destroy|drop|wipe|tear\s+(?:it\s+)?down|nuke|kill|decommission|get\s+rid\s+of)\b")
_CLUSTER_KILL = _rx(r"\b(?:nuke|wipe|tear\s+(?:it\s+)?down|destroy|decommission)\b")
_ELSEWHERE = _rx(
    r"\b(?:kubectl|helm|deployments?|dockerfile|docker|pods?|namespaces?|ingress|kubernetes\s+version|"
    r"upgrade\s+(?:the\s+)?(?:cluster|kubernetes|k8s|version)|weather|joke|poem|time\s+is\s+it|bill|invoices?|billing\s+(?:history|statement|report)|"
    r"deploy|rollout|roll\s+out|kubernetes\s+v?\d[\d.]*|k8s\s+v?\d[\d.]*|kube\s*config|kubeconfig|credentials?|ssh|"
    r"secrets?|configmaps?|cron\s*jobs?|statefulsets?|daemonsets?|logs?|metrics|grafana|prometheus|dashboards?|alerts?|"
    r"certificates?|certs?|dns|terraform|iam|rbac|passwords?|api\s+keys?|vpc|subnets?|firewall|load\s+balancers?)\b"
    r"|\b(?:cost|costs|spend|spent|bill|billed|charged|pay|paid)\b[^.?!]*\b(?:last|previous|past|in)\s+"
    r"(?:month|week|quarter|year|january|february|march|april|may|june|july|august|september|october|november|december)\b"
)
_TIER_VERB = _rx(r"\b(?:change|switch|swap|move|convert|migrate|upgrade|resize|set|turn|put|make|give|use)\b|->|=>|→")
_AUTOSCALE = _rx(r"\bauto(?:matic(?:ally)?)?[\s-]?scal\w*")
_OFF = _rx(
    r"\b(?:off|disable[ds]?|stop|deactivate|no\s+more|without|fixed\s+size|pin)\b"
    r"|\b(?:no|not|non|don'?t|do\s+not|never)[\s-]+(?:\w+\s+)?auto"  # "no autoscaling", "don't autoscale it"
    r"|\b(?:kill|remove|drop|ditch|scrap|lose|get\s+rid\s+of)\s+(?:the\s+)?auto[\s-]?scal"
)
_LABEL = _rx(r"\b(?:re)?label(?:s|ed|led)?\b")
_TAG = _rx(r"\b(?:re)?tag(?:s|ged)?\b")
_REPLACE = _rx(r"\b(?:replace|recycle|reboot|restart|drain|reprovision|recreate|re-create|cycle|swap|kill|broken)\b")
_ADD_MORE = _rx(
    rf"\badd\s+(?:\d+\s+)?(?:more|extra|another|additional|\d+)\s*(?:more\s+)?(?:[cmr]\d\s+)?{UNITS}\b(?!\s+pool)"
)
_SCALE = _rx(
    r"\b(?:scale[sd]?|scaling|resize|bump|grow|shrink|set|increase|decrease|raise|lower|reduce|change|make|bring|"
    r"go|expand|up|down|need|want|should|be|count)\b|->|=>"
)
_OPS = _rx(
    r"\b(?:operations?|ops?|activity|activities|progress|running|happening|going\s+on|"
    r"in\s+flight|underway|history|happened|(?:last|latest|recent)\s+changes?|go(?:ne)?\s+(?:thru|through)|"
    r"went\s+(?:thru|through)|keep\s+an\s+eye|watch|monitor|track)\b"
)
_TIERS = _rx(r"\b(?:tiers?|sizes?|machine\s+types?|instance\s+types?|flavou?rs?|per\s+hour|hourly)\b")
_PRICE = _rx(r"\b(?:how\s+much|price|cost|costs)\b")
_NODES = _rx(
    rf"\bnodes?\b(?!\s+pools?)|\b(?:machines?|vms?|instances?)\b|\bhow\s+many\s+{UNITS}\b|\b(?:list|show)\s+(?:me\s+)?(?:the\s+|all\s+)?workers\b"
)
_POOLS = _rx(r"\bpools?\b")
_INFO = _rx(
    r"\b(?:status|state|capacity|cost|costs|price|spend|how\s+big|describe|details?|info|information|overview|"
    r"about|health|healthy|summary|look\s+like|show|get)\b"
)
_CLUSTERS = _rx(r"\bclusters\b|\bany\s+cluster\b")
_QUESTION = _rx(r"^(?:is|are|was|were|did|does|do|has|have|any|what|what's|whats|which|how|when|where|why)\b")
_PAIR = re.compile(r"(?<![\w./-])([A-Za-z0-9][-A-Za-z0-9_./]*)\s*=\s*((?:[-A-Za-z0-9_./]*[-A-Za-z0-9_/])?)")
_BOUND_KEYS = re.compile(r"\b(min|max|minimum|maximum|min_nodes|max_nodes|count|nodes)\s*[=:]\s*(\d+)", re.IGNORECASE)
_CARD = re.compile(r"\bcard_[A-Za-z0-9_-]+")
_JSON_LABELS = re.compile(r"(?:labels?|tags?)?\s*:?\s*\{([^{}]*)\}")
_JSON_PAIR = re.compile(r"[\"']?([A-Za-z0-9_./-]+)[\"']?\s*:\s*[\"']?([A-Za-z0-9_./-]*)[\"']?")


def read(request: str, world: World, context: str = "") -> Reading:
    """Every part of ``request`` that can be found, with names matched against ``world``."""
    as_typed, request = request, trim(request, world)
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
    text = digits(text)
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
    if ranged and not _AUTOSCALE.search(text) and r.low == int(ranged[1]) in now and r.high == int(ranged[2]):
        r.count, r.low, r.high = int(ranged[2]), None, None  # "take workers from 2 to 3": a count
    if m := re.search(r"\bcount:(\d+)", text):
        r.count = int(m[1])
    r.keep_name = bool(KEEP_NAME.search(text))
    r.refusal = _refusal(r, text)
    names_re = "|".join(re.escape(n) for n in sorted({*world.clusters, *world.pools()}, key=len, reverse=True))
    unlisted = (
        re.sub(rf"(?<![\w-])(?:{names_re})(?![\w-])", " ", text) if names_re else text
    )  # a pool named "logs" is ours
    r.elsewhere = bool(_ELSEWHERE.search(unlisted))
    of_those = re.search(r"\bof\s+(?:those|them|these)\b", text)  # the tiers an earlier question listed
    that_one = re.search(r"\b(?:to|onto)\s+(?:that|this|the\s+same)\s+(?:one|1|tier|size)\b", text) and context
    r.size = r.size or tier_by_spec(f"{text} {context}" if of_those or that_one else text, world)
    if r.size is None and len(r.pools) == 1 and (_TIER_VERB.search(text) or RELATIVE_SPEC.search(text)):
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
        r.label_key = "tags" if _TAG.search(text) and not _LABEL.search(text) else "labels"
        if _TAG.search(text) and not _LABEL.search(text):
            r.tags = pairs
        else:
            r.labels = pairs
    return r


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
    if _STRAY.fullmatch(text):
        return "stray_answer"
    if _APPROVE.search(text) or _BYPASS.search(text):
        return "approve"
    words = set(re.findall(r"[a-z0-9][-a-z0-9_.]*", text))
    if _CREATE.search(text) and re.search(r"\bcluster\b", text) and not _POOLS.search(text):
        return "new_cluster"
    if _DESTROY.search(text):
        every = re.search(r"\b(?:every|each)\s+(?:node\s*)?pools?\b", text)
        if (words & {"everything", "all", "clusters", "anything"} or every) and not (
            _LABEL.search(text) or _TAG.search(text)
        ):
            return "everything"
        target = r.pools or r.pool_typed or r.node
        if not target and (re.search(r"\bcluster\b", text) or (_CLUSTER_KILL.search(text) and r.clusters)):
            return "cluster_delete"
    return None


def _intent(r: Reading, text: str, pairs: dict[str, str]) -> Intent | None:
    has_pool = bool(r.pools or r.pool_typed or r.refers_pool)
    if r.card:
        return "card"
    if r.follow is not None or re.search(r"\b(?:show|list|get)\s+operations\b", text):
        return "operations"  # "get_cluster_operations payments-prod follow=<node>" follows, never replaces
    if re.search(r"\b(?:kubectl|helm|deployments?|dockerfile|pods?|deploy|bill|invoices?)\b", text):
        return None
    if r.question:
        return None if r.elsewhere else _question(r, text)
    unlisted = (
        bool(r.name)
        and r.name not in r.pools
        and bool(re.search(r"\b(?:node\s*)?pools?\b|\bnodepool\b", text) or r.size)
    )
    new_pool = (
        _NEW_POOL.search(text)
        or (unlisted and bool(r.size or r.count is not None or r.high is not None))
        or (
            _CREATE.search(text)
            and (
                re.search(r"\b(?:new|another|second|extra)\s+(?:node\s*)?pool|\bnodepool\b|\bpool\b", text)
                or re.search(r"\b(?:call\s+it|named|called)\b", text)
                or r.name
            )
        )
    )
    every = re.search(r"\b(?:every|each|all(?:\s+the)?)\s+(?:node\s*)?pools?\b", text)  # "make every pool 2 nodes"
    labels_only = bool(every) or (
        bool(pairs) and bool(_LABEL.search(text) or _TAG.search(text)) and not (r.name or r.size)
    )
    if (
        (new_pool or re.search(r"\bcall\s+it\b", text))
        and not labels_only
        and not _ADD_MORE.search(text)
        and not (r.pools and not r.name and not re.search(r"\bnew\b", text))
    ):
        r.auto = True if _AUTOSCALE.search(text) and not _OFF.search(text) else None
        if r.auto is None and (r.low is not None and r.high is not None) and r.name:
            r.auto = True
        return "add"
    on_pool = has_pool or r.pools or (r.clusters and _POOLS.search(text))  # "staging's pool"
    if r.size and on_pool and (_TIER_VERB.search(text) or re.search(r"\b(?:on|onto|to)\s+dks\.", text)):
        return "tier"
    if has_pool and _TIER_VERB.search(text) and re.search(r"\b(?:onto|to)\s+(?:the\s+|a\s+)?[\w-]+\s+tier\b", text):
        return "tier"  # "move batch onto the memory-optimised tier": a tier, which one is asked
    if r.size and has_pool and RELATIVE_SPEC.search(text):
        return "tier"  # "more memory for batch, same cpu"
    if has_pool and _TIER_VERB.search(text) and re.search(rf"\b(?:to|onto)\s+(?:the\s+)?{FAMILY}\b", text):
        return "tier"  # "move workers to m5": which m5 is asked
    if (
        re.search(
            r"\b(?:bigger|smaller|larger|beefier|more\s+powerful)\s+(?:machines?|nodes?|instances?|tiers?|vms?|box(?:es)?|types?)\b",
            text,
        )
        and has_pool
    ):
        return "tier"
    if _AUTOSCALE.search(text) or re.search(r"\bfixed\b", text):
        off = _OFF.search(text) or re.search(r"\b(?:don'?t|do\s+not|never|no)\s+(?:\w+\s+)?auto", text)
        if re.search(r"\bfixed\b", text) and not _AUTOSCALE.search(text):
            r.soft_off = True  # "fixed at 3": autoscaling off if the pool autoscales, else just the count
            return "autoscale_off" if r.count is not None else None
        return "autoscale_off" if off else "autoscale_on"
    if (
        (r.low is not None or r.high is not None)
        and has_pool
        and re.search(
            r"\b(?:below|above|floor|ceiling|cap|min|max|minimum|maximum|between|at\s+least|at\s+most|up\s+to|never)\b",
            text,
        )
        and (
            (r.low is not None and r.high is not None)
            or re.search(r"\b(?:floor|ceiling|cap|min|max|minimum|maximum|never|at\s+least|at\s+most)\b", text)
        )
    ):  # one bound alone ("batch should never drop below 2") keeps the other, or asks for it
        return "autoscale_on"
    if r.factor is not None and (has_pool or r.clusters):
        return "scale"
    if pairs and (_LABEL.search(text) or _TAG.search(text) or has_pool):
        return "relabel"
    if (_LABEL.search(text) or _TAG.search(text)) and has_pool and not _CREATE.search(text):
        return "relabel"  # "drop the team label from workers" changes labels, never the pool
    if r.node and (_REPLACE.search(text) or _DESTROY.search(text) or not _CREATE.search(text)):
        return "replace"
    if _ADD_MORE.search(text):
        return "scale"
    if (
        _CREATE.search(text)
        and not every
        and (_POOLS.search(text) or r.size or r.name)
        and not r.elsewhere
        and not (r.pools and not r.name)  # "make the general pool 3 nodes" is that pool
    ):
        return "add"
    if r.delta is not None and re.search(rf"\b\d+\s+(?:more\s+)?{UNITS}\b(?!\s*-?pools?)", text):
        return "scale"  # "drop one node from the workers pool": a count, never the pool (property 2)
    if _DESTROY.search(text) and has_pool and r.count is not None and re.search(r"\bto\s+\d+\b", text):
        return "scale"  # "drop workers to 1": a count, never the pool (property 2)
    if _DESTROY.search(text) and (has_pool or _POOLS.search(text)):
        return "remove"
    if re.search(r"\bnodes?\b", text) and (_REPLACE.search(text) or _DESTROY.search(text)):
        return "replace"
    if re.search(r"\b(?:replace|recycle)\b", text):
        return "replace"  # "replace it", "replace the second one": which node is asked or known
    if r.elsewhere:
        return None
    question = bool(_QUESTION.search(text)) or text.endswith("?") or r.question
    if (_OPS.search(text) or (question and re.search(r"\b(?:finished|done|complete[d]?)\b", text))) and (
        question or not r.numbers
    ):
        return "operations"  # "is it done?" asks about operations; "we're done with batch" does not
    if r.size and (_PRICE.search(text) or _TIERS.search(text)):
        return "tiers"
    scale_word = re.search(r"\b(?:scale|resize|bump|grow|shrink|bigger|smaller)\b", text)
    if _SCALE.search(text) and not (question and not r.numbers) and (r.numbers or r.delta is not None or scale_word):
        return "scale"
    if (r.count is not None or r.delta is not None) and (has_pool or r.clusters or r.cluster_typed):
        r.weak = True
        return "scale"
    if re.search(r"\b(?:bigger|smaller|larger)\b", text):
        return "scale"
    if _TIERS.search(text) and not has_pool:
        return "tiers"
    if _NODES.search(text):
        return "list_nodes"
    if _POOLS.search(text):
        return "list_pools"
    if _CLUSTERS.search(text) and not (r.clusters or r.cluster_typed):
        return "list_clusters"
    if _INFO.search(text) and (r.clusters or r.cluster_typed or r.refers_cluster or re.search(r"\bit\b", text)):
        return "get_cluster"
    if re.search(r"\b(?:overview|everything|summary|all\s+clusters)\b", text) and not (
        r.numbers or r.pools or r.clusters
    ):
        return "list_clusters"  # "give me an overview of everything"
    return None


def _question(r: Reading, text: str) -> Intent | None:
    """A sentence that asks and holds no imperative change gets a read, never a change (property 1).
    A name the server does not list is not read as one here: "the meaning of life" names nothing."""
    if r.follow_up and not re.search(r"\b(?:nodes?|pools?|tiers?)\b", text):
        return None  # "and on staging?": the earlier request, somewhere else
    tiers = re.search(
        r"\b(?:gb|gib|ram|memory|vcpus?|cpus?|cores?|cheapest|cheaper|priciest|expensive|tiers?|sizes|"
        r"machine\s+types?|instance\s+types?|flavou?rs?|biggest|largest|smallest|beefiest|fastest)\b|\d+\s*gb\b",
        text,
    )
    per_hour = _PRICE.search(text) and re.search(r"\b(?:per\s+hour|hourly|an\s+hour|/h(?:r|our)?)\b", text)
    if (tiers and not r.pools) or (r.size and _PRICE.search(text)) or per_hour:  # "what would workers cost on c5 2xl"
        return "tiers"
    if re.search(
        r"\b(?:finish(?:ed)?|done|complete[d]?|progress|operations?|ops?|(?:last|latest|recent)\s+changes?|still\s+running|"
        r"happening|happened|history|go(?:ne)?\s+(?:thru|through)|went\s+(?:thru|through)|in\s+flight|underway|pending)\b"
        r"|\bhow\b.*\bgoing\b",
        text,
    ):
        return "operations"
    if re.search(r"\b(?:overview|everything|summary|all\s+clusters)\b", text) and not (r.pools or r.clusters):
        return "list_clusters"  # "show me everything we've got"
    if re.search(r"\bclusters?\s+(?:called|named)\b", text):
        return "list_clusters"  # "do we have a cluster called payments-dev?": the list answers it
    clusters = r.clusters or (r.cluster_typed if r.blind else None)
    if (r.pools or clusters) and re.search(r"\b(?:size|tier|type|kind|flavou?r)\b", text):
        return "list_pools"  # "what size machines is workers on", "what size machines does staging use"
    if re.search(r"\bwhich\s+cluster\b|\b(?:a|an|the)\s+[a-z0-9-]+\s+cluster\b", text) and not r.clusters:
        return "list_clusters"  # "which cluster has the general pool", "do we have a payments-dev cluster"
    if (r.pools and re.search(r"^why\b", text)) or re.search(r"\bper\s+(?:node\s*)?pool\b", text):
        return "list_pools"  # "why is batch sitting at 2 nodes?": its bounds answer it
    if re.search(r"\bhow\s+many\s+(?:node\s*)?pools\b|\bis\s+there\s+a\s+(?:node\s*)?pool\b", text):
        return "list_pools"
    if r.node or _NODES.search(text) or re.search(r"\bhow\s+many\b", text):
        return "list_nodes"
    if r.pools or _AUTOSCALE.search(text) or _POOLS.search(text):
        return "list_pools"
    if _CLUSTERS.search(text) and not clusters:
        return "list_clusters"
    if clusters or (re.search(r"\bcluster\b", text) and r.cluster_typed):
        return "get_cluster"
    if _INFO.search(text) and (r.refers_cluster or re.search(r"\bit\b", text)):
        return "get_cluster"
    return None
