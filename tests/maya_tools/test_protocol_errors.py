"""Protocol errors carry the code each protocol version names (``MayaServer``): an unknown tool, an
unknown prompt or a missing prompt argument is -32602 (Invalid params) on both; an unknown resource is -32002 on
2025-11-25 and -32602 on 2026-07-28, which retired -32002. Each message says what exists."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from mcp_types import INVALID_PARAMS

from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.conftest import MODES
from tests.maya_tools.live import Live
from tests.maya_tools.wire import Wire

pytestmark = pytest.mark.anyio

RESOURCE_NOT_FOUND = {"legacy": -32002, "auto": INVALID_PARAMS}
UNKNOWN_URI = "ui://maya-tools/nothing.html"


async def refusals(client: Client) -> dict[str, MCPError]:
    refused: dict[str, MCPError] = {}
    calls = {
        "unknown tool": lambda: client.call_tool("scale_everything", {}),
        "unknown prompt": lambda: client.get_prompt("scale_everything", {}),
        "missing argument": lambda: client.get_prompt("scale_pool", {"cluster": "payments-prod"}),
        "unknown resource": lambda: client.read_resource(UNKNOWN_URI),
    }
    for what, call in calls.items():
        with pytest.raises(MCPError) as raised:
            await call()
        refused[what] = raised.value
    return refused


def check(refused: dict[str, MCPError], mode: str) -> None:
    tool = refused["unknown tool"]
    assert tool.code == INVALID_PARAMS
    assert "scale_everything" in tool.message and "scale_node_pool" in tool.message and "tools/list" in tool.message
    assert "decide_card" not in tool.message  # the card view's, listed to an Apps host only
    prompt, missing, resource = refused["unknown prompt"], refused["missing argument"], refused["unknown resource"]
    assert prompt.code == INVALID_PARAMS
    assert "scale_everything" in prompt.message and "scale_pool" in prompt.message and "prompts/list" in prompt.message
    assert missing.code == INVALID_PARAMS and "`pool`" in missing.message and "`count`" in missing.message
    assert resource.code == RESOURCE_NOT_FOUND[mode] and resource.data == {"uri": UNKNOWN_URI}
    assert "ui://maya-tools/card.html" in resource.message and "get_card" in resource.message


@pytest.mark.parametrize("mode", MODES)
async def test_each_version_s_codes_in_memory(server: MCPServer[Any], mode: str) -> None:
    async with Client(server, mode=mode) as client:
        check(await refusals(client), mode)


@pytest.mark.http
@pytest.mark.parametrize("mode", MODES)
async def test_each_version_s_codes_on_the_wire(shared_live: Live, mode: str) -> None:
    wire = Wire()
    bearer = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
    async with (
        httpx2.AsyncClient(transport=wire, headers=bearer, timeout=30) as http,
        Client(streamable_http_client(shared_live.url, http_client=http), mode=mode) as client,
    ):
        assert client.session.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        check(await refusals(client), mode)
    assert wire.error_codes() == [INVALID_PARAMS, INVALID_PARAMS, INVALID_PARAMS, RESOURCE_NOT_FOUND[mode]]
