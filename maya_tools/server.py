"""The maya-tools MCP server: read tools always, change tools unless read-only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer

from maya_tools.runtime import Runtime, Transport, open_runtime
from maya_tools.settings import Settings
from maya_tools.tools import cards, changes, read
from reference_backend.backend import ReferenceBackend

INSTRUCTIONS = """\
maya-tools changes Door Kubernetes Service (DKS) node pools and nodes, safely.
Read before you change: list_clusters, get_cluster, list_node_pools, list_nodes, get_cluster_operations.
Every change tool (add_node_pool, scale_node_pool, relabel_node_pool, remove_node_pool, replace_node)
makes a confirmation card and asks the person to approve it; Door is called only after approval.
Say a change happened only when the result says `changed: true`. Refusals name the rule and the fix.
Pool labels and tags are not Kubernetes node labels. A pool's machine tier cannot change: add a new
pool, wait until it is up, then remove the old one.
"""


def build_server(
    settings: Settings, *, transport: Transport = "memory", backend: ReferenceBackend | None = None
) -> MCPServer[Runtime]:
    """The server. ``backend`` injects a reference backend (tests drive its clock); with no
    ``DOOR_API_URL`` and no ``backend`` an embedded one with the demo seed is started."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[Runtime]:
        async with open_runtime(settings, transport, backend=backend) as runtime:
            yield runtime

    mcp: MCPServer[Runtime] = MCPServer("maya-tools", instructions=INSTRUCTIONS, lifespan=lifespan)
    read.register(mcp)
    cards.register(mcp)
    if not settings.read_only:
        changes.register(mcp)
    return mcp
