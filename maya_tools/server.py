"""The maya-tools MCP server: read tools always, change tools unless read-only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer

import prompts
from maya_tools import prompts as mcp_prompts
from maya_tools.runtime import Runtime, Transport, open_runtime
from maya_tools.settings import Settings
from maya_tools.tools import cards, changes, read
from reference_backend.backend import ReferenceBackend

INSTRUCTIONS = prompts.render("instructions.md.j2")


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
    mcp_prompts.register(mcp)
    if not settings.read_only:
        changes.register(mcp)
    return mcp
