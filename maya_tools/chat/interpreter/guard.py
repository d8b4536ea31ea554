"""The final guard: every call the interpreter reads passes through here before the chat sends it.

Whatever rule produced a call, a call that breaks a safety property (``safety``) is not sent: a
question becomes the read that answers it, and a change bigger than the words or aimed at a name
the server did not list becomes a reply saying what was understood and what to say instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from maya_tools.chat.interpreter import texts
from maya_tools.chat.interpreter.calls import Reply, ToolCall
from maya_tools.chat.interpreter.names import World
from maya_tools.chat.interpreter.negation import asks_for_nothing, called_off
from maya_tools.chat.interpreter.safety import close, violations
from maya_tools.chat.interpreter.units import mark, unit_of
from maya_tools.chat.interpreter.words import digits


def safety_guard(
    text: str, world: World, call: ToolCall, *, earlier: Sequence[str] = (), answering: bool = False
) -> ToolCall | Reply:
    broken = violations(text, world, call.tool, call.arguments, earlier=earlier, answering=answering)
    if not broken:
        return _unit_count(text, call)
    args = call.arguments
    cluster = str(args.get("cluster") or "")
    if "bigger" in broken and asks_for_nothing(text):  # a change the words called off (issue 26)
        off = called_off(text)
        return Reply("clarify", texts.called_off(off.dropped, off.everything_before))
    if "unknown" in broken:
        return Reply("clarify", _unknown(world, call))
    if "bigger" in broken:
        what = texts.describe(call)
        return Reply(
            "clarify",
            f"I read that as {what}, which is more than your words say, so I changed nothing. "
            + (
                texts.replace_examples(str(args.get("node_name")), cluster)
                if call.tool == "replace_node"
                else texts.examples_for(cluster, str(args.get("pool") or "workers"))
            ),
        )
    # "question": the read that answers it
    where = {"cluster": cluster}
    if call.tool == "replace_node":
        return ToolCall("list_nodes", where)
    if call.tool == "add_node_pool":
        return ToolCall("list_node_pools", where)
    return ToolCall("list_node_pools", {**where, **({"pool": args["pool"]} if args.get("pool") else {})})


def _unknown(world: World, call: ToolCall) -> str:
    args = call.arguments
    cluster = str(args.get("cluster") or "")
    if cluster not in world.clusters:
        near = texts.one_of(close(cluster, tuple(world.clusters)))
        return f"There is no cluster {cluster}, so I changed nothing. The server lists {near}; which one do you mean?"
    if call.tool == "replace_node":
        node = str(args.get("node_name") or "")
        near = texts.one_of(close(node, world.all_nodes(cluster)))
        return (
            f"There is no node {node} on {cluster} (R-RNODE-04), so I changed nothing. Its nodes include {near}; "
            f"say 'list nodes on {cluster}' to see them all."
        )
    pool = str(args.get("pool") or "")
    near = texts.one_of(close(pool, world.pools(cluster)))
    return f"There is no pool {pool} on {cluster}, so I changed nothing. It has {near}; which one do you mean?"


_COUNTS = ("count", "min_nodes", "max_nodes")


def _unit_count(text: str, call: ToolCall) -> ToolCall | Reply:
    """A count that is a number the words say only with a unit that does not count nodes ("16 GiB",
    "$5", "50%") is not sent: it is no count (issue 26). A count worked out from a relative change
    ("by 50%", "2 more") is the listed count's, not a number said, and passes."""
    if call.relative is not None:
        return call
    said = mark(digits(" ".join(text.lower().split())))
    for key in _COUNTS:
        value = call.arguments.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            alone = re.search(rf"(?<![\w.=_-]){value}(?![\w.])|[=:]\s*{value}\b", said)
            amount = unit_of(said, value)
            if amount is not None and not alone:
                return Reply("clarify", texts.not_a_count(value, amount, texts.describe(call)))
    return call
