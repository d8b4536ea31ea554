"""The offline interpreter: a small, deterministic reading of the requests on the API page.

``maya-tools chat --offline`` (and the chat without an ``ANTHROPIC_API_KEY``) uses it instead of a
model. It maps one sentence to one maya-tools tool call, or to a reply that says what it needs or
what it understands. It never approves anything: a change it maps still makes a confirmation card
that only the person answers (DESIGN.md "Approval: what must hold", 1).

Forms understood (case does not matter; "please", "can you", quotes and a final full stop are ignored;
counts are digits or words, "one" to "twenty"):

- scale [the] [pool] X [pool] on Y to N [nodes]
- turn on autoscaling for X on Y between A and B  (also "enable", "autoscale X on Y from A to B")
- turn off autoscaling for X on Y [at N]
- add a [node] pool named X on Y with N SIZE [nodes]  (also "with N nodes of SIZE")
- remove [pool] X from Y
- replace node X on Y  (also "recycle", "delete node")
- list pools on Y · list nodes on Y [in pool X] · show clusters · show cluster Y
- show operations on Y · list machine tiers · show card ID
- relabel [pool] X on Y with k=v [k=v …]  (and "tag pool X on Y with k=v" for tags)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

ReplyKind = Literal["help", "clarify", "refuse"]

NUMBER_WORDS = {
    "zero": 0,
    "a": 1,
    "an": 1,
    "a single": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
}
MAX_COUNT = 200  # R-ADD-04 / R-PATCH-06

EXAMPLES = (
    "show clusters",
    "list pools on payments-prod",
    "list nodes on payments-prod (in pool workers)",
    "scale workers on payments-prod to 4",
    "turn on autoscaling for workers on payments-prod between 2 and 6",
    "turn off autoscaling for workers on payments-prod",
    "add a pool named batch on payments-prod with one dks.m5.xlarge",
    "remove pool batch from payments-prod",
    "replace node payments-prod-workers-abc12 on payments-prod",
    "relabel pool workers on payments-prod with team=payments",
)

HELP = (
    "I am Maya's offline interpreter (no model is connected), so I understand only these requests:\n"
    + "\n".join(f"  • {example}" for example in EXAMPLES)
    + "\nAlso: show cluster Y, show operations on Y, list machine tiers, show card ID.\n"
    "Every change shows you a confirmation card first; only your y at its prompt makes it happen."
)


@dataclass(frozen=True)
class ToolCall:
    """One maya-tools tool and its arguments, exactly as the chat sends them."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """No tool: a clarifying question, a refusal with its reason, or the help text."""

    kind: ReplyKind
    text: str


# Building blocks. Names are DNS-ish (clusters may also be ids); sizes are dotted tier ids.
_NAME = r"[a-z0-9][-a-z0-9_.]*"
_SIZE = r"[a-z0-9]+(?:\.[a-z0-9]+)+"
_NUM_WORDS = "|".join(sorted((re.escape(w) for w in NUMBER_WORDS), key=len, reverse=True))
_NUM = rf"(?:\d+|{_NUM_WORDS})"
_UNITS = r"(?:\s+(?:nodes?|workers?|machines?|instances?|replicas?|vms?))?"
_ON = r"\s+(?:on|in|of|for|at)\s+"
_POOL = rf"(?:the\s+)?(?:(?:node\s+)?pool\s+(?P<pool>{_NAME})|(?P<pool2>{_NAME})(?:\s+(?:node\s+)?pool)?)"
_CLUSTER = rf"(?:the\s+)?(?:cluster\s+)?(?P<cluster>{_NAME})(?:\s+cluster)?"
_KV = r"[a-z0-9][-a-z0-9_./]*=[-a-z0-9_.]*"
_PAIRS = rf"(?P<pairs>{_KV}(?:(?:\s*,\s*|\s+and\s+|\s+){_KV})*)"


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_SCALE = [
    _rx(rf"(?:scale|resize|set)(?:\s+(?:up|down))?\s+{_POOL}{_ON}{_CLUSTER}\s+(?:to|at)\s+(?P<n>{_NUM}){_UNITS}"),
    _rx(rf"(?:scale|resize|set)(?:\s+(?:up|down))?\s+{_POOL}\s+(?:to|at)\s+(?P<n>{_NUM}){_UNITS}{_ON}{_CLUSTER}"),
]
_BOUNDS = (
    rf"(?:(?:between|from)\s+(?P<a>{_NUM})\s+(?:and|to|-)\s+(?P<b>{_NUM}){_UNITS}"
    rf"|with\s+(?:a\s+)?min(?:imum)?\s+(?:of\s+)?(?P<a2>{_NUM})\s+and\s+(?:a\s+)?max(?:imum)?\s+(?:of\s+)?(?P<b2>{_NUM}))"
)
_AUTOSCALE_ON = [
    _rx(
        rf"(?:turn\s+on|enable|switch\s+on|start)\s+autoscal(?:e|ing)\s+(?:for|on)\s+{_POOL}{_ON}{_CLUSTER}\s+{_BOUNDS}"
    ),
    _rx(rf"autoscale\s+{_POOL}{_ON}{_CLUSTER}\s+{_BOUNDS}"),
]
_AUTOSCALE_ON_NO_BOUNDS = _rx(
    rf"(?:(?:turn\s+on|enable|switch\s+on|start)\s+autoscal(?:e|ing)\s+(?:for|on)|autoscale)\s+{_POOL}{_ON}{_CLUSTER}"
)
_AUTOSCALE_OFF = _rx(
    rf"(?:turn\s+off|disable|switch\s+off|stop)\s+autoscal(?:e|ing)\s+(?:for|on)\s+{_POOL}{_ON}{_CLUSTER}"
    rf"(?:\s+(?:at|and\s+keep(?:\s+it)?\s+at|and\s+set\s+(?:it\s+)?to|with)\s+(?P<n>{_NUM}){_UNITS})?"
)
_ADD_HEAD = (
    rf"(?:add|create|make)\s+(?:a\s+|another\s+)?(?:new\s+)?(?:node\s+)?pool\s+(?:named\s+|called\s+)?(?P<name>{_NAME})"
    rf"\s+(?:on|to|in)\s+{_CLUSTER}\s+with\s+"
)
_ADD = [
    _rx(rf"{_ADD_HEAD}(?P<n>{_NUM})(?:\s*x)?\s+(?P<size>{_SIZE}){_UNITS}"),  # with 2 dks.m5.xlarge [nodes]
    _rx(rf"{_ADD_HEAD}(?P<n>{_NUM}){_UNITS}\s+(?:of|on|using)\s+(?:(?:type|tier|size)\s+)?(?P<size>{_SIZE})"),
]
_REPLACE = _rx(
    rf"(?:replace|recycle|delete|remove|drain)\s+(?:the\s+)?(?:worker\s+)?node\s+(?P<node>{_NAME})"
    rf"\s+(?:on|in|from|of)\s+{_CLUSTER}"
)
_REMOVE = _rx(rf"(?:remove|delete|drop|destroy)\s+{_POOL}\s+(?:from|on|in|of)\s+{_CLUSTER}")
_RELABEL = _rx(rf"(?:re)?label\s+{_POOL}{_ON}{_CLUSTER}\s+(?:with|as|to)\s+(?:(?:the\s+)?labels?\s+)?{_PAIRS}")
_TAG = _rx(rf"(?:re)?tag\s+{_POOL}{_ON}{_CLUSTER}\s+(?:with|as|to)\s+(?:(?:the\s+)?tags?\s+)?{_PAIRS}")
_LIST_POOLS = [
    _rx(rf"(?:list|show|get|what\s+are)(?:\s+me)?(?:\s+(?:the|all))?\s+(?:node\s+)?pools{_ON}{_CLUSTER}"),
    _rx(rf"(?:which|what)\s+(?:node\s+)?pools\s+(?:does|do|are\s+(?:on|in))\s+{_CLUSTER}(?:\s+have)?"),
]
_LIST_NODES = [
    _rx(
        rf"(?:list|show|get)(?:\s+me)?(?:\s+(?:the|all))?\s+(?:nodes|workers)"
        rf"(?:\s+(?:of|in)\s+(?:the\s+)?(?:pool\s+(?P<pool>{_NAME})|(?P<pool2>{_NAME})\s+pool))?{_ON}{_CLUSTER}"
        rf"(?:\s+in\s+(?:the\s+)?(?:pool\s+(?P<pool3>{_NAME})|(?P<pool4>{_NAME})\s+pool))?"
    ),
]
_CLUSTERS = _rx(
    r"(?:(?:list|show|get)(?:\s+me)?(?:\s+(?:the|all|my|our))?\s+clusters"
    r"|(?:which|what)\s+clusters\s+(?:do\s+(?:i|we)\s+have|are\s+there|can\s+(?:i|you)\s+see)|clusters)"
)
_CLUSTER_ONE = _rx(rf"(?:show|describe|get)(?:\s+me)?\s+(?:the\s+)?cluster\s+(?P<cluster>{_NAME})")
_OPERATIONS = _rx(
    rf"(?:show|list|get)(?:\s+me)?(?:\s+the)?\s+(?:operations|activity|running\s+operations){_ON}{_CLUSTER}"
)
_TIERS = _rx(
    r"(?:(?:list|show|get)(?:\s+me)?(?:\s+the)?\s+(?:machine\s+)?(?:tiers|sizes|machine\s+types)"
    r"|what\s+(?:machine\s+)?(?:tiers|sizes|machine\s+types)\s+(?:are\s+there|can\s+i\s+use|are\s+available))"
)
_CARD = _rx(r"(?:show|get)(?:\s+me)?\s+(?:the\s+)?card\s+(?P<card>card_[A-Za-z0-9_-]+)")

_HELP = _rx(r"/?help|\?|what\s+can\s+you\s+do|what\s+do\s+you\s+understand")
_APPROVE = _rx(r".*\b(?:approve|confirm|accept|sign\s+off)\b.*")
_EVERYTHING = _rx(
    r".*\b(?:delete|remove|destroy|drop|wipe|tear\s+down|nuke)\b.*"
    r"\b(?:everything|all(?:\s+(?:the\s+)?(?:pools|nodes|clusters|workers))?|(?:the\s+)?cluster|clusters)\b.*"
)
_STRAY_ANSWER = _rx(r"(?:y|yes|n|no|yep|yeah|nope|ok|okay|sure)")  # a y/N answer typed with no card asking
_NOT_A_POOL = frozenset({"everything", "all", "anything", "every", "them", "it"})  # "remove everything from Y"
_NEW_CLUSTER = _rx(r".*\b(?:create|make|add|provision|spin\s+up)\b.*\bcluster\b.*")
_TIER_CHANGE = _rx(
    rf"(?:change|switch|move|convert|resize|upgrade|migrate|set)\s+(?P<what>.+?)\s+(?:to|into|onto)\s+(?P<size>{_SIZE})"
)
_CHANGE_VERB = _rx(
    r"(?:scale|resize|set|add|create|make|remove|delete|drop|replace|recycle|drain|relabel|label|tag|"
    r"turn\s+(?:on|off)|enable|disable|autoscale)\b.*"
)

_POLITE = _rx(
    r"^(?:(?:hey|hi|ok|okay)[,!]?\s+)?(?:maya[,:]?\s+)?"
    r"(?:(?:please|kindly|can\s+you|could\s+you|would\s+you|will\s+you|i\s+want\s+to|i'd\s+like\s+to|"
    r"i\s+would\s+like\s+to|let's|lets|go\s+ahead\s+and)\s+)*"
)


def normalize(text: str) -> str:
    """The sentence without quotes, politeness, a final stop or extra spaces."""
    text = re.sub(r"[“”\"`‘’]", "", text)
    text = " ".join(text.split())
    text = re.sub(r"[.!?]+$", "", text).strip()
    text = re.sub(r"[,\s]+please$", "", text, flags=re.IGNORECASE)
    return _POLITE.sub("", text, count=1).strip()


def number(word: str) -> int:
    """A count given as digits or as an English word ("one" to "twenty")."""
    word = " ".join(word.lower().split())
    return int(word) if word.isdigit() else NUMBER_WORDS[word]


def _pool(match: re.Match[str]) -> str | None:
    found = match.groupdict()
    for key in ("pool", "pool2", "pool3", "pool4"):
        if found.get(key):
            return str(found[key]).lower()
    return None


def _name(match: re.Match[str], group: str) -> str:
    """Cluster, pool and node names are lowercase DNS names (R-ADD-01, R-RNODE-03)."""
    return match[group].lower()


def _pairs(text: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in re.findall(_KV, text, flags=re.IGNORECASE))


def _count_problem(*counts: int) -> Reply | None:
    if any(n > MAX_COUNT for n in counts):
        return Reply(
            "refuse",
            f"A pool holds 0–{MAX_COUNT} workers (R-PATCH-06, R-ADD-04), so I cannot ask for "
            f"{max(counts)}. Nothing was changed; ask again with a count up to {MAX_COUNT}.",
        )
    return None


def interpret(text: str) -> ToolCall | Reply:
    """Map one request to a tool call, or say what is missing, why not, or what is understood."""
    said = normalize(text)
    if not said or _HELP.fullmatch(said):
        return Reply("help", HELP)
    for reader in (_read_change, _read_query):
        found = reader(said)
        if found is not None:
            return found
    return _not_understood(said)


def _read_change(said: str) -> ToolCall | Reply | None:
    for rx in _SCALE:
        if m := rx.fullmatch(said):
            count = number(m["n"])
            return _count_problem(count) or ToolCall(
                "scale_node_pool", {"cluster": _name(m, "cluster"), "pool": _pool(m), "count": count}
            )
    for rx in _AUTOSCALE_ON:
        if m := rx.fullmatch(said):
            low, high = number(m["a"] or m["a2"]), number(m["b"] or m["b2"])
            return _count_problem(low, high) or ToolCall(
                "scale_node_pool",
                {
                    "cluster": _name(m, "cluster"),
                    "pool": _pool(m),
                    "auto_scale": True,
                    "min_nodes": low,
                    "max_nodes": high,
                },
            )
    if m := _AUTOSCALE_ON_NO_BOUNDS.fullmatch(said):
        return Reply(
            "clarify",
            f"Between how many workers should {_pool(m)} on {_name(m, 'cluster')} autoscale? Door needs an upper bound "
            f"(R-PATCH-05). Say, for example: turn on autoscaling for {_pool(m)} on {_name(m, 'cluster')} between 2 and 6.",
        )
    if m := _AUTOSCALE_OFF.fullmatch(said):
        arguments: dict[str, Any] = {"cluster": _name(m, "cluster"), "pool": _pool(m), "auto_scale": False}
        if m["n"]:
            arguments["count"] = number(m["n"])
            return _count_problem(arguments["count"]) or ToolCall("scale_node_pool", arguments)
        return ToolCall("scale_node_pool", arguments)
    for rx in _ADD:
        if m := rx.fullmatch(said):
            count = number(m["n"])
            return _count_problem(count) or ToolCall(
                "add_node_pool",
                {"cluster": _name(m, "cluster"), "name": _name(m, "name"), "size": m["size"].lower(), "count": count},
            )
    if m := _REPLACE.fullmatch(said):
        return ToolCall("replace_node", {"cluster": _name(m, "cluster"), "node_name": _name(m, "node")})
    if (m := _REMOVE.fullmatch(said)) and _pool(m) not in _NOT_A_POOL:
        return ToolCall("remove_node_pool", {"cluster": _name(m, "cluster"), "pool": _pool(m)})
    if m := _RELABEL.fullmatch(said):
        return ToolCall(
            "relabel_node_pool", {"cluster": _name(m, "cluster"), "pool": _pool(m), "labels": _pairs(m["pairs"])}
        )
    if m := _TAG.fullmatch(said):
        return ToolCall(
            "relabel_node_pool", {"cluster": _name(m, "cluster"), "pool": _pool(m), "tags": _pairs(m["pairs"])}
        )
    return None


def _read_query(said: str) -> ToolCall | Reply | None:
    for rx in _LIST_POOLS:
        if m := rx.fullmatch(said):
            return ToolCall("list_node_pools", {"cluster": _name(m, "cluster")})
    for rx in _LIST_NODES:
        if m := rx.fullmatch(said):
            pool = _pool(m)
            return ToolCall("list_nodes", {"cluster": _name(m, "cluster"), **({"pool": pool} if pool else {})})
    if _CLUSTERS.fullmatch(said):
        return ToolCall("list_clusters", {})
    if m := _CLUSTER_ONE.fullmatch(said):
        return ToolCall("get_cluster", {"cluster": _name(m, "cluster")})
    if m := _OPERATIONS.fullmatch(said):
        return ToolCall("get_cluster_operations", {"cluster": _name(m, "cluster")})
    if _TIERS.fullmatch(said):
        return ToolCall("list_machine_tiers", {})
    if m := _CARD.fullmatch(said):
        return ToolCall("get_card", {"card_id": m["card"]})
    return None


def _not_understood(said: str) -> Reply:
    """Requests no tool should serve get a reason; half-understood changes get a question."""
    if _STRAY_ANSWER.fullmatch(said):
        return Reply(
            "clarify",
            "No card is waiting for an answer, so that changed nothing. A card asks its own [y/N] question "
            "right below it when it is shown; to make a change, ask for it (for example: scale workers on "
            "payments-prod to 4) and answer the card's question.",
        )
    if _APPROVE.fullmatch(said):
        return Reply(
            "refuse",
            "I cannot approve a card, and nothing you or I type in this conversation can: a card is approved "
            "only by you, answering y at the card's own prompt when it is shown. Ask for the change again "
            "and answer that prompt.",
        )
    if _EVERYTHING.fullmatch(said):
        return Reply(
            "refuse",
            "I will not do that: I change one node pool or one node at a time, each after you approve its own "
            "card, and I cannot delete clusters. Nothing was changed. To remove a pool, say: remove pool X from Y "
            "(a cluster keeps at least one pool, R-DEL-01).",
        )
    if _NEW_CLUSTER.fullmatch(said):
        return Reply(
            "refuse",
            "Creating or deleting clusters is not something maya-tools does: it changes node pools and nodes "
            "of existing clusters. Use the Door console for clusters.",
        )
    if m := _TIER_CHANGE.fullmatch(said):
        return Reply(
            "refuse",
            f"A pool's machine tier cannot be changed (R-PATCH-10), so I cannot move {m['what']} to "
            f"{m['size'].lower()}. Instead: add a new pool with {m['size'].lower()} (add a pool named X on Y with "
            f"N {m['size'].lower()}), wait until it is up, then remove the old pool.",
        )
    if _CHANGE_VERB.fullmatch(said):
        return Reply(
            "clarify",
            "I could not read every detail of that change: I need the pool (or node), the cluster and the exact "
            "numbers or names. Say it like one of these:\n" + "\n".join(f"  • {e}" for e in EXAMPLES[3:]),
        )
    return Reply("help", "That is outside what I can help with here.\n" + HELP)
