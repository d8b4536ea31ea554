"""``maya-tools demo``: the API page's own examples, through the real MCP server over stdio.

It starts ``maya-tools serve`` as a subprocess exactly as an IDE would, with the embedded reference
backend (demo seed, accelerated time), answers each approval request as the demo user, and prints
every card and outcome. Nothing reaches Door.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult, ElicitRequestParams, ElicitResult, TextContent

RULE = "─" * 78


def say(text: str = "") -> None:
    print(text, flush=True)


def heading(text: str) -> None:
    say()
    say(RULE)
    say(text)
    say(RULE)


class DemoUser:
    """Answers approval requests the way the person at the keyboard would, and shows what was asked."""

    def __init__(self, approve: bool = True) -> None:
        self.approve = approve
        self.asked = 0

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        self.asked += 1
        say(textwrap.indent(params.message, "  │ ", lambda line: True))
        say(f"  └─ demo user: {'APPROVE' if self.approve else 'DECLINE'}")
        if self.approve:
            return ElicitResult(action="accept", content={"approve": True})
        return ElicitResult(action="decline")


def _text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
    say(f"→ {tool}({json.dumps(arguments)})")
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        say(textwrap.indent(textwrap.fill(_text(result), 76), "  ✗ "))
        return None
    data: dict[str, Any] | None = result.structured_content
    return data


async def follow(client: Client, cluster: str, target: str) -> None:
    async def progress(progress: float, total: float | None, message: str | None) -> None:
        if message:
            say(f"  … {message}")

    say(f"→ get_cluster_operations(follow={target!r})")
    result = await client.call_tool(
        "get_cluster_operations", {"cluster": cluster, "follow": target}, progress_callback=progress
    )
    if result.is_error:
        say(textwrap.indent(_text(result), "  ✗ "))
        return
    data = result.structured_content or {}
    followed = data.get("followed") or {}
    say(
        f"  ✓ {followed.get('kind')} {followed.get('target')}: {followed.get('status')} {followed.get('message') or ''}"
    )


async def plan(client: Client, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """``change_pool_tier``: one card for the plan's steps, each step said as it runs."""

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        if message:
            say(f"  … {message}")

    say(f"→ change_pool_tier({json.dumps(arguments)})")
    result = await client.call_tool("change_pool_tier", arguments, progress_callback=progress)
    if result.is_error:
        say(textwrap.indent(textwrap.fill(_text(result), 76), "  ✗ "))
        return None
    data: dict[str, Any] | None = result.structured_content
    for step in (data or {}).get("card", {}).get("steps", []):
        say(f"  {step['index']}. {step['title']}: {step['status']}")
    return data


async def show_nodes(client: Client, cluster: str) -> None:
    data = await call(client, "list_nodes", {"cluster": cluster, "wait_for_fresh": True})
    if data is None:
        return
    say(f"  snapshot: {data['freshness']}; {data['total']} workers")
    for node in data["items"]:
        say(f"    {node['name']:<40} {node['pool'] or '-':<20} {node['status']:<12} ready={node['ready']}")


def outcome(data: dict[str, Any] | None) -> None:
    if data is None:
        return
    mark = "✓" if data["changed"] else "·"
    say(f"  {mark} card {data['card']['id']}: {data['status']} — {data['message']}")


async def run(time_scale: float) -> int:
    env = dict(os.environ)
    env.pop("DOOR_API_URL", None)
    env.pop("DOOR_TOKEN", None)
    env.update(
        {
            "MAYA_CARD_STORE": ":memory:",
            "MAYA_REFERENCE_TIME_SCALE": str(time_scale),
            "MAYA_USER": "demo user",
        }
    )
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "maya_tools.cli", "serve", "--log-level", "WARNING"], env=env
    )
    user = DemoUser()
    cluster = "payments-prod"
    async with Client(server, elicitation_callback=user) as client:
        heading("maya-tools demo: the embedded reference backend, as the payments super_admin")
        data = await call(client, "list_clusters", {})
        if data is None:
            return 1
        say(f"  backend: {data['backend']}")
        for c in data["clusters"]:
            say(f"    {c['name']:<20} {c['phase']:<12} pools={c['pools']} vCPU={c['total_vcpu']}")

        heading('1. "Scale the workers pool on payments-prod to 4."  Approve.')
        outcome(await call(client, "scale_node_pool", {"cluster": cluster, "pool": "workers", "count": 4}))
        await follow(client, cluster, "workers")
        await show_nodes(client, cluster)

        heading("2. Refused before any card: count 0 without autoscaling (R-PATCH-04)")
        await call(client, "scale_node_pool", {"cluster": cluster, "pool": "workers", "count": 0})

        heading("3. Refused before any card: removing the last pool (R-DEL-01)")
        await call(client, "remove_node_pool", {"cluster": cluster, "pool": "workers"})

        heading('4. "Add a node pool named batch on payments-prod with one dks.m5.xlarge."  Approve.')
        outcome(
            await call(
                client, "add_node_pool", {"cluster": cluster, "name": "batch", "size": "dks.m5.xlarge", "count": 1}
            )
        )
        await follow(client, cluster, "batch")

        heading('5. "Replace node payments-prod-workers-abc12 on payments-prod."  Approve.')
        outcome(await call(client, "replace_node", {"cluster": cluster, "node_name": "payments-prod-workers-abc12"}))
        await follow(client, cluster, "payments-prod-workers-abc12")
        await show_nodes(client, cluster)

        heading(
            '6. "Move the workers pool on payments-prod to dks.c5.2xlarge."  The page\'s own way to change a tier:\n'
            "   add a new pool, wait until it is up, delete the old one; one plan, approved once."
        )
        outcome(await plan(client, {"cluster": cluster, "pool": "workers", "size": "dks.c5.2xlarge"}))
        await follow(client, cluster, "workers")  # the old pool's workers drain and go
        await show_nodes(client, cluster)

        heading("Done")
        say(f"  {user.asked} cards were shown to the demo user; every change above went through one.")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="maya-tools demo", description=__doc__)
    parser.add_argument(
        "--time-scale", type=float, default=300.0, help="simulated seconds per real second (default 300)"
    )
    args = parser.parse_args(argv)
    return anyio.run(run, args.time_scale)
