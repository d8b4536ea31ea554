"""The MCP prompts: each entry of ``prompts.MCP_PROMPTS`` becomes one prompt of the server.

Prompts only render text, so they are registered in read-only mode too. ``prompts/get`` answers
one user message, the rendered template; a bad argument is an ``INVALID_PARAMS`` error that says
which argument and why (the SDK would otherwise hide the reason behind "Error rendering prompt").
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Message, Prompt, PromptArgument, UserMessage
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

import prompts


def _renderer(name: str) -> Any:
    async def render(**arguments: str) -> list[Message]:
        try:
            text = prompts.render_mcp_prompt(name, arguments)
        except prompts.PromptArgumentError as error:
            raise MCPError(code=INVALID_PARAMS, message=str(error)) from error
        return [UserMessage(text)]

    render.__name__ = render.__qualname__ = f"render_{name}"
    return render


def register(mcp: MCPServer[Any]) -> None:
    for spec in prompts.MCP_PROMPTS:
        mcp.add_prompt(
            Prompt(
                name=spec.name,
                title=spec.title,
                description=spec.description,
                arguments=[
                    PromptArgument(name=a.name, description=a.description, required=a.required) for a in spec.arguments
                ],
                fn=_renderer(spec.name),
            )
        )
