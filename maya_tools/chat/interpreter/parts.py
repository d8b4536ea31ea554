"""Where the parts of a request are: the names it gives (clusters, pools, a node, a new pool's name)
and its numbers (a count, a change by some nodes, bounds), found wherever they appear."""

from __future__ import annotations

import re
from collections.abc import Callable

from maya_tools.chat.interpreter.names import World, candidates
from maya_tools.chat.interpreter.sentence import Reading
from maya_tools.chat.interpreter.words import NAME, SIZE, UNITS, VOCABULARY

CREATE = re.compile(r"\b(?:add|create|new|make|provision|spin\s+up|set\s+up|build)\b")
NEW_POOL = re.compile(r"\b(?:new|second|another|extra|additional|separate)\s+(?:node\s*)?pool\b")
_REFER_CLUSTER = re.compile(r"\bthere\b|\b(?:that|this|the\s+same|same)\s+cluster\b")
_REFER_POOL = re.compile(r"\b(?:it|its|that|this|the\s+same|same)\s+(?:node\s+)?pool\b|\bits?\b")


def find_numbers(r: Reading) -> None:
    t = r.text
    for pattern in (
        r"\bbetween\s+(\d+)\s+(?:and|to|-)\s+(\d+)",
        r"\bfrom\s+(\d+)\s+(?:to|-|up\s+to)\s+(\d+)",
        r"(?<![\w.-])(\d+)\s*(?:-|–|\.\.\.?|to)\s*(\d+)(?![\w.])",
    ):
        if m := re.search(pattern, t):
            r.low, r.high = int(m[1]), int(m[2])
            break
    if r.low is None and (m := re.search(r"\b(?:min(?:imum)?|at\s+least|lower\s+bound)\s*(?:of\s+|is\s+)?(\d+)", t)):
        r.low = int(m[1])
    if r.high is None and (
        m := re.search(
            r"\b(?:max(?:imum)?|at\s+most|up\s+to|no\s+more\s+than|upper\s+bound)\s*(?:of\s+|is\s+)?(\d+)", t
        )
    ):
        r.high = int(m[1])
    kind = r"(?:(?:new|fresh|[cmr]\d|dks\.[a-z0-9.]+|big|bigger|small|large)\s+)?"  # "add 2 c5 nodes"
    if m := re.search(rf"\b(\d+)\s+(?:more|extra|additional)\b|\badd\s+(\d+)\s+{kind}{UNITS}|\badd\s+(\d+)\s*$", t):
        r.delta = int(m[1] or m[2] or m[3])  # "ok add 2": to the pool just talked about
    elif m := re.search(
        rf"\b(\d+)\s+(?:fewer|less)\b|\b(?:remove|drop|delete|kill|take(?:\s+(?:away|out|off))?|subtract|lose|get\s+rid\s+of)\s+(\d+)\s+{UNITS}",
        t,
    ):
        r.delta = -int(m[1] or m[2])
    elif m := re.search(r"\bby\s+(\d+)\b", t):
        down = re.search(r"\b(?:down|decrease|shrink|reduce|lower|fewer|less|remove|cut)\b", t)
        r.delta = -int(m[1]) if down else int(m[1])
    for pattern in (
        r"(?:\bto|\bat|->|=>|=|\bbe|\bmake\s+it|\bneed|\bwant|\bkeep\s+it\s+at|\bpin\s+it\s+at)\s+(\d+)\b(?!\s*-)",
        rf"\b(\d+)\s+{kind}{UNITS}\b",
    ):
        if m := re.search(pattern, t):
            r.count = int(m[1])
            break
    else:
        if r.numbers and r.delta is None:
            r.count = r.numbers[-1]


def find_names(r: Reading, world: World) -> None:
    """Clusters, pools, a node and a new pool's name: explicit forms first, then any word the server lists."""
    t = r.text
    if m := re.search(rf"\b(?:named|called|call\s+it|name\s+it|name)\s+({NAME})\b(?!\s*=)", t):
        r.name = m[1] if m[1] not in VOCABULARY else None
    for m in re.finditer(rf"\b(?:node\s*)?pool\s*:?\s+(?:named\s+|called\s+)?({NAME})", t):
        if (
            (CREATE.search(t) or NEW_POOL.search(t))
            and m[1] not in VOCABULARY
            and not m[1].isdigit()
            and (m[1] not in world.pools() or NEW_POOL.search(t) or re.search(r"\bnew\b", t))
            and not re.fullmatch(SIZE, m[1])
        ):
            r.name = r.name or m[1]
            break
    # "not prod", "instead of batch", "rather than staging": a name said only to be ruled out
    t_meant = re.sub(
        r"\b(?:not|except|excluding|instead\s+of|rather\s+than)\s+(?:on\s+|the\s+|in\s+)?[a-z0-9][a-z0-9_.\-]*", " ", t
    )
    words = [w.strip(".-_") for w in re.findall(r"[a-z0-9][a-z0-9_.\-]*", t_meant)]
    words = [
        re.sub(r"-(?:pool|np|nodepool)$", "", w) if re.sub(r"-(?:pool|np|nodepool)$", "", w) in world.pools() else w
        for w in words
    ]
    words = [w for w in words if w and not re.fullmatch(SIZE, w) and not w.startswith("card_")]
    # "payments prod" for payments-prod
    joined: list[str] = []
    i = 0
    while i < len(words):
        if i + 1 < len(words) and f"{words[i]}-{words[i + 1]}" in world.clusters:
            joined.append(f"{words[i]}-{words[i + 1]}")
            i += 2
        else:
            joined.append(words[i])
            i += 1
    clusters: list[str] = []
    pools: list[str] = []
    explicit_pools: list[str] = []
    units: list[str] = []
    for i, w in enumerate(joined):
        before = joined[i - 1] if i else ""
        after = joined[i + 1] if i + 1 < len(joined) else ""
        if w == r.name and CREATE.search(t):
            continue
        node_cluster = world.node_cluster(w)
        if node_cluster is not None:
            r.node = w
            clusters.append(node_cluster)
            continue
        found = candidates(w, world.clusters)
        if found:  # "1 node, payments-staging": a listed cluster after "node" is still the cluster
            r.one_word_clusters = r.one_word_clusters or len(found) > 1  # "payments": which one is asked
            clusters.extend(c for c in found if c not in clusters)
            continue
        if before in {"node", "nodes"} and w not in VOCABULARY and not w.isdigit() and "-" in w and _nodelike(w, world):
            r.node = w
            continue
        found = candidates(w, world.pools())
        if found:
            is_unit = (
                w in {"workers", "nodes", "machines"} and (before.isdigit() or before in _COUNTING) and after != "pool"
            )
            if is_unit:
                units.extend(found)
            else:
                (explicit_pools if after == "pool" or before == "pool" else pools).extend(found)
        elif (
            f"{w}s" in world.pools() and (before.isdigit() or before in _COUNTING) and after not in {"pool", "nodepool"}
        ):
            units.append(f"{w}s")  # "one fewer worker": the workers pool, when no other is named
        elif after in {"pool", "nodepool", "group"} and f"{w}s" in world.pools():
            explicit_pools.append(f"{w}s")  # "the worker pool", "the worker group"
        elif (node := _node_by_suffix(w, world)) is not None:
            r.node = node
            clusters.append(world.node_cluster(node) or "")
    r.clusters = tuple(c for c in dict.fromkeys(clusters) if c)
    r.pools = tuple(dict.fromkeys(explicit_pools or pools or units))  # "+2 workers": the pool, when no other

    def free(word: str) -> bool:
        return (
            word not in VOCABULARY
            and not word.isdigit()
            and word != r.name
            and not re.fullmatch(SIZE, word)
            and not re.fullmatch(r"[a-z]\d", word)  # a tier family ("instead of c5"), never a name
            and not re.fullmatch(
                r"\d+(?:gb|gib|tb|mb|gigs?|xl|x|cpus?|vcpus?|h|hrs?|mins?|s|mib|tib|vcpu|ghz|usd|eur|gbp|pct|ms|sec|min|hour|day|rate)",
                word,
            )  # "16gb": a quantity
            and word not in r.pools
            and word not in world.pools()
            and not candidates(word, world.clusters)  # "staging's pool" names the cluster
        )

    if not r.clusters:
        r.cluster_typed = _first(
            t,
            free,
            rf"\bcluster\s+({NAME})",
            rf"\b({NAME})\s+cluster\b",
            rf"^({NAME})\s*:",
            rf"\b(?:{NAME})\s+(?:on|in|from|of|at)\s+(?:the\s+)?({NAME})",
            rf"\b(?:on|in|from|of|at)\s+(?:the\s+)?({NAME})\b(?!\s+(?:node\s*)?pool)",
            # after "for" a word is more often a purpose ("for black friday") than a cluster: only a dashed name
            r"\bfor\s+(?:the\s+)?([a-z0-9]+(?:-[a-z0-9]+)+)\b(?!\s+(?:node\s*)?pool)",
            # after "to" a word is more often a value ("to billing") than a cluster: only a dashed name
            r"\bto\s+(?:the\s+)?(?!\d+-\d+\b)([a-z0-9]+(?:-[a-z0-9]+)+)\b(?!\s+(?:node\s*)?pool|\s+tier|\s+dks\.)",
            rf"\b(?:does|do|has|is)\s+({NAME})\s+have\b",
        )
    if not r.pools:
        r.pool_typed = _first(
            t,
            lambda w: free(w) and w != r.cluster_typed and w not in r.clusters,
            rf"\b(?:node\s*)?pool\s+({NAME})",
            rf"\b({NAME})\s+(?:node\s*)?pool\b",
            rf"\b({NAME})\s+(?:on|in|from|of|at)\s+(?:the\s+)?(?:cluster\s+)?(?:{NAME})",
            r"\b(?:scale|resize|bump|grow|shrink|remove|delete|drop|destroy|relabel|label|tag)\s+(?:up\s+|down\s+)?"
            rf"(?:the\s+)?({NAME})\s+(?:on|in|from|of|at|to)\b",
        )
    m = None if r.node else re.search(rf"\bnodes?\s+({NAME})", t)
    # "another node asap" names no node; "replace node nosuchnode" does (and is then told there is none)
    # a node's name has a digit or its cluster's name in it ("double-checked" after "nodes?" is not one)
    looks_like_node = m is not None and bool(
        (_nodelike(m[1], world) and bool(re.search(r"[-\d]", m[1]))) or re.search(r"\b(?:replace|recycle)\b", t)
    )
    if m and looks_like_node and m[1] not in VOCABULARY and not m[1].isdigit() and m[1] not in (r.pools + r.clusters):
        r.node = m[1]
    r.refers_cluster = bool(_REFER_CLUSTER.search(t))
    r.refers_pool = bool(_REFER_POOL.search(t))


def _nodelike(word: str, world: World) -> bool:
    """A word that may be a node's name: it has a digit or its cluster's name in it ("double-checked" has neither)."""
    return not world.clusters or bool(re.search(r"\d", word)) or any(word.startswith(f"{c}-") for c in world.clusters)


def _node_by_suffix(word: str, world: World) -> str | None:
    """The one listed node whose last part is ``word`` ("k7m2p")."""
    if len(word) < 4 or word in VOCABULARY:
        return None
    found = [n for n in world.all_nodes() if n.rsplit("-", 1)[-1] == word]
    return found[0] if len(found) == 1 else None


_COUNTING = frozenset({"many", "more", "fewer", "few", "extra", "additional", "much", "another", "less"})


def _first(text: str, ok: Callable[[str], bool], *patterns: str) -> str | None:
    """The first word any of ``patterns`` captures (in the order given) that ``ok`` accepts."""
    for pattern in patterns:
        for m in re.finditer(pattern, text):
            if ok(m[1]) and not re.match(r"\.\w|=", text[m.end(1) :]):  # not dks.m5.xlarge's start, nor a key
                return m[1]
    return None
