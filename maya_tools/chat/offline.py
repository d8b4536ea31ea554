"""Offline Maya: the interpreter picks the tool, the server does the work, the answer is plain words.

It drives the same MCP tools, and the same elicitation and approval path, as the model would. The
answer comes from the tool's result only: a change is reported as made only when the result says
``changed: true``; otherwise it says nothing changed and why (declined, expired, stale, failed, or
the rule that refused it and the fix).
"""

from __future__ import annotations

import json
from typing import Any

from mcp import Client
from mcp_types import CallToolResult, TextContent

from maya_tools.chat.interpreter import Interpreter, PoolInfo, Reply, TierInfo, ToolCall, World
from maya_tools.chat.terminal import ProgressLines, Terminal, call_line, short

ACTIONS = {
    "scale_node_pool": "the change to pool {target}",
    "relabel_node_pool": "the new labels/tags of pool {target}",
    "add_node_pool": "the new pool {target}",
    "remove_node_pool": "removing pool {target}",
    "replace_node": "replacing node {target}",
    "change_pool_tier": "moving pool {target} to another tier",
}

# What follows an accepted change, by action: only changes of workers have workers to follow.
_FOLLOW = {
    "scale_node_pool": "The workers follow in the background",
    "add_node_pool": "The workers follow in the background",
    "remove_node_pool": "The workers drain in the background",
    "replace_node": "The workers follow in the background",
    "relabel_node_pool": "Door applies it to the pool in the background (no worker is added or removed)",
    "change_pool_tier": "The new pool's workers follow in the background, then the old pool drains",
}


MAP_SHOWN = 8
ERROR_SHOWN = 2_000


def result_text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def _map(value: Any) -> str:
    """A label or tag map as JSON, at most ``MAP_SHOWN`` entries of short keys and values."""
    if not isinstance(value, dict):
        return short(json.dumps(value))
    kept = {short(k, 40): short(v, 40) for k, v in list(value.items())[:MAP_SHOWN]}
    more = len(value) - len(kept)
    return json.dumps(kept) + (f" (and {more} more)" if more else "")


async def _read(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    return {} if result.is_error else dict(result.structured_content or {})


async def read_world(client: Client) -> World:
    """What the server lists, the names and counts the interpreter reads requests against:
    ``list_clusters`` (names, ids), then per cluster ``list_node_pools`` (counts, bounds, tiers,
    labels) and ``list_nodes``, and ``list_machine_tiers``. A read that fails leaves that part out,
    so a relative count is asked about rather than guessed, and an unlisted node is never replaced."""
    clusters: dict[str, dict[str, PoolInfo]] = {}
    nodes: dict[str, tuple[str, ...]] = {}
    ids: dict[str, str] = {}
    for cluster in (await _read(client, "list_clusters", {})).get("clusters", []):
        name = str(cluster.get("name", ""))
        if cluster.get("id"):
            ids[str(cluster["id"]).lower()] = name
        key = str(cluster.get("id") or name)  # the id: a name Door lists may not read back as one
        pools = (await _read(client, "list_node_pools", {"cluster": key})).get("items", [])
        clusters[name] = {
            str(p["name"]): PoolInfo(
                p.get("count"),
                bool(p.get("auto_scale")),
                p.get("min_nodes"),
                p.get("max_nodes"),
                p.get("size"),
                dict(p.get("labels") or {}),
            )
            for p in pools
            if p.get("lifecycle", "active") == "active"
        }
        listed = (await _read(client, "list_nodes", {"cluster": key})).get("items", [])
        if listed:
            nodes[name] = tuple(str(n["name"]) for n in listed)
    catalog = (await _read(client, "list_machine_tiers", {})).get("items", [])
    tiers = {str(t["id"]): TierInfo(t.get("vcpu"), t.get("memory_gib"), t.get("price_per_hour")) for t in catalog}
    return World(clusters, nodes, ids, tiers)


def said_back(call: ToolCall) -> str | None:
    """A relative change in absolute numbers ("workers: 2 → 5"), said before the card is shown."""
    if call.relative is None:
        return None
    before, after = call.relative
    return f"maya › {short(call.arguments.get('pool'))}: {before} → {after}"


class OfflineChat:
    """One offline conversation: the interpreter keeps what earlier turns named ("it", "that pool")
    and a question it asked, and matches names against what the server lists (read at the first
    turn and again after each change)."""

    def __init__(self, client: Client, terminal: Terminal) -> None:
        self.client = client
        self.terminal = terminal
        self.interpreter = Interpreter()
        self._stale = True

    async def turn(self, text: str) -> None:
        if self._stale:
            self.interpreter.world = await read_world(self.client)
            self._stale = False
        understood = self.interpreter.interpret(text)
        if isinstance(understood, Reply):
            self.terminal.line("maya › " + understood.text)
            return
        if (back := said_back(understood)) is not None:
            self.terminal.line(back)
        self.terminal.line(call_line(understood.tool, understood.arguments))
        self._stale = understood.tool in ACTIONS
        result = await self.client.call_tool(
            understood.tool, understood.arguments, progress_callback=ProgressLines(self.terminal)
        )
        self.terminal.line("maya › " + answer(understood, result))

    def abandon(self) -> None:
        """An abandoned turn may have changed pools: read the names again before the next one."""
        self._stale = True


def answer(call: ToolCall, result: CallToolResult) -> str:
    """What happened, in words, from the tool's result alone."""
    if result.is_error:
        text = short(result_text(result), ERROR_SHOWN)
        prefix = f"Error executing tool {call.tool}: "
        text = text.removeprefix(prefix)
        if call.tool in ACTIONS:
            return f"Nothing was changed. {text}"
        return f"I could not read that: {text}"
    data: dict[str, Any] = result.structured_content or {}
    describe = _DESCRIBE.get(call.tool)
    if call.tool in ACTIONS:
        return change(data)
    if describe is None:
        return result_text(result)
    return describe(data)


def change(data: dict[str, Any]) -> str:
    card = data.get("card") or {}
    what = ACTIONS.get(card.get("action", ""), "this change").format(target=short(card.get("target", "?")))
    where = short(card.get("cluster_name", "the cluster"))
    status = data.get("status")
    message = short(data.get("message", ""), ERROR_SHOWN)
    if data.get("changed"):
        diff = _what_changed(card)
        op = f" (operation {data['operation_id']})" if data.get("operation_id") else ""
        follow = _FOLLOW.get(card.get("action", ""), "Door carries it out in the background")
        if _node_unlisted(card):
            follow = "Door tries it in the background"
        return (
            f"Done: you approved {what} on {where}, and Door accepted it{op}."
            + (f" What changed: {diff}." if diff else "")
            + f" {follow}: say 'show operations on {where}' to watch."
        )
    if status == "declined":
        return f"Nothing was changed: you declined {what} on {where}."
    if status == "expired":
        return f"Nothing was changed: the card for {what} on {where} expired before it was approved. Ask again for a fresh card."
    if status == "stale":
        return f"Nothing was changed: {message}"
    if status == "failed":
        return f"Nothing was changed on {where}. {message}"
    return f"Nothing was changed. {message}".strip()


def _what_changed(card: dict[str, Any]) -> str:
    body = card.get("body") or {}
    if card.get("action") == "add_node_pool":
        return f"a new pool {short(body.get('name'))} of {body.get('count', 1)} × {short(body.get('size'))}"
    if card.get("action") == "replace_node":
        if _node_unlisted(card):
            return (
                f"nothing yet: Door took the request, but no node named {short(card.get('target'))} was listed when the "
                "card was made, so the replacement will most likely fail and no worker changes (R-RNODE-04)"
            )
        return f"node {short(card.get('target'))} is being replaced; the pool keeps its count (R-RNODE-02)"
    if card.get("action") == "remove_node_pool":
        return f"pool {short(card.get('target'))} is being removed"
    return "; ".join(
        f"{short(d['field'])} {_value(d['before'])} → {_value(d['after'])}"
        for d in card.get("diff", [])
        if d["before"] != d["after"]
    )


def _node_unlisted(card: dict[str, Any]) -> bool:
    """A replacement of a node no list showed: Door accepts the name, then the replacement fails (R-RNODE-04)."""
    warnings = card.get("warnings") or []
    return card.get("action") == "replace_node" and any(w.get("code") == "node_unlisted" for w in warnings)


def _value(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, dict):
        return _map(value)
    return short(json.dumps(value) if not isinstance(value, str) else value)


def _clusters(data: dict[str, Any]) -> str:
    rows = [
        f"  {short(c['name']):<20} {short(c['phase']):<12} {c['pools']} pool(s), {c['total_vcpu']} vCPU, {c['total_memory_gib']} GiB"
        for c in data.get("clusters", [])
    ]
    return f"Clusters on the {short(data.get('backend', 'backend'), 200)}:\n" + ("\n".join(rows) or "  (none)")


def _pool_line(p: dict[str, Any]) -> str:
    scaling = f"autoscaling {p['min_nodes']}–{p['max_nodes']}" if p["auto_scale"] else "fixed size"
    extra = "" if p.get("lifecycle") == "active" else f" [{short(p.get('lifecycle'))}]"
    labels = f", labels {_map(p['labels'])}" if p.get("labels") else ""
    tags = f", tags {_map(p['tags'])}" if p.get("tags") else ""
    return f"  {short(p['name']):<12} {short(p['size']):<16} count {p['count']}, {scaling}{labels}{tags}{extra}"


def _pools(data: dict[str, Any]) -> str:
    rows = [_pool_line(p) for p in data.get("items", [])]
    return f"{len(rows)} node pool(s):\n" + ("\n".join(rows) or "  (none)")


def _cluster(data: dict[str, Any]) -> str:
    rows = [_pool_line(p) for p in data.get("node_pools", [])]
    return (
        f"{short(data['name'])} is {short(data['phase'])} (Kubernetes {short(data.get('kubernetes_version'))}); planned capacity "
        f"{data.get('total_vcpu')} vCPU, {data.get('total_memory_gib')} GiB memory, {data.get('total_volume_gib')} GiB disk.\n"
        + "\n".join(rows)
    )


def _nodes(data: dict[str, Any]) -> str:
    if data.get("total", 0) is None:  # a cold snapshot: not known yet, never "0 workers"
        return f"The workers of {short(data.get('cluster_name', ''))} are not known yet; ask again in a few seconds."
    rows = [
        f"  {short(n['name']):<40} {short(n.get('pool') or '-'):<10} {short(n['status']):<12} ready={n['ready']}"
        for n in data.get("items", [])
    ]
    scope = (
        f"pool {short(data['pool'])} of {short(data['cluster_name'])}"
        if data.get("pool")
        else short(data.get("cluster_name", ""))
    )
    more = f"\n  … more: ask for offset {data['next_offset']}" if data.get("next_offset") is not None else ""
    return (
        f"{data.get('total', len(rows))} worker(s) in {scope} (snapshot: {short(data.get('freshness'), 200)}):\n"
        + ("\n".join(rows) or "  (none)")
        + more
    )


def _tiers(data: dict[str, Any]) -> str:
    rows = [
        f"  {short(t['id']):<16} {t['vcpu']} vCPU, {t['memory_gib']} GiB, {t['price_per_hour']}/hour"
        for t in data.get("items", [])
    ]
    return "Machine tiers a pool can use:\n" + "\n".join(rows)


def _operations(data: dict[str, Any]) -> str:
    rows = [
        f"  {short(o['kind']):<14} {short(o['target']):<32} {short(o['status']):<10} "
        f"{short(o.get('message') or o.get('error') or '', 200)}".rstrip()
        for o in data.get("operations", [])
    ]
    return (
        f"{short(data.get('cluster_name'))} is {short(data.get('phase'))}; {data.get('running', 0)} operation(s) running.\n"
        + ("\n".join(rows) or "  (no operations)")
    )


def _card(data: dict[str, Any]) -> str:
    card = data.get("card", {})
    return f"Card {short(card.get('id'))} is {short(card.get('status'))}.\n{short(data.get('rendered', ''), 16_000)}"


_DESCRIBE = {
    "list_clusters": _clusters,
    "list_node_pools": _pools,
    "get_cluster": _cluster,
    "list_nodes": _nodes,
    "list_machine_tiers": _tiers,
    "get_cluster_operations": _operations,
    "get_card": _card,
}
