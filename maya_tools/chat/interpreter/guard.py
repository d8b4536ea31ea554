"""The final guard: every call the interpreter reads passes through here before the chat sends it.

Whatever rule produced a call, a call that breaks a safety property (``safety``) is not sent: a
question becomes the read that answers it, and a change bigger than the words or aimed at a name
the server did not list becomes a reply saying what was understood and what to say instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from maya_tools.chat.interpreter import texts
from maya_tools.chat.interpreter.calls import Reply, ToolCall
from maya_tools.chat.interpreter.names import World
from maya_tools.chat.interpreter.safety import close, violations


def safety_guard(
    text: str, world: World, call: ToolCall, *, earlier: Sequence[str] = (), answering: bool = False
) -> ToolCall | Reply:
    broken = violations(text, world, call.tool, call.arguments, earlier=earlier, answering=answering)
    if not broken:
        return call
    args = call.arguments
    cluster = str(args.get("cluster") or "")
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
