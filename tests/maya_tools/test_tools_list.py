"""The tool surface: a committed snapshot, explicit annotations, read-only mode, no way to approve."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.extension import advertise
from mcp.client.streamable_http import streamable_http_client
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from backend_client.tls import verifying_tls
from maya_tools.server import build_server
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.conftest import MODES, Person
from tests.maya_tools.live import Live
from tests.maya_tools.test_approval_page import Browser, UrlOnlyClient

pytestmark = pytest.mark.anyio

SNAPSHOT = Path(__file__).parent / "snapshots" / "tools.json"
READ_TOOLS = {
    "list_clusters",
    "get_cluster",
    "list_node_pools",
    "list_nodes",
    "list_machine_tiers",
    "get_cluster_operations",
    "get_card",
}
CHANGE_TOOLS = {
    "add_node_pool",
    "scale_node_pool",
    "relabel_node_pool",
    "remove_node_pool",
    "replace_node",
    "change_pool_tier",
    "stop_plan",
}
APP_TOOLS = {"decide_card"}  # app-only (the MCP Apps card view's; it needs the view's one-time secret)
APPS = advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})


async def tools_of(server: Any, mode: str = "legacy") -> list[dict[str, Any]]:
    """Every tool, as an MCP Apps host lists them (the only client that is shown ``decide_card``)."""
    async with Client(server, mode=mode, extensions=[APPS]) as client:
        listing = await client.list_tools()
    return [
        tool.model_dump(
            mode="json",
            by_alias=True,
            exclude_none=True,
            include={"name", "title", "description", "input_schema", "output_schema", "annotations"},
        )
        for tool in sorted(listing.tools, key=lambda t: t.name)
    ]


async def test_tools_list_matches_the_committed_snapshot(server: Any) -> None:
    """Any change to a name, title, schema or annotation shows as a diff. Re-record: MAYA_UPDATE_SNAPSHOTS=1 pytest …"""
    tools = await tools_of(server)
    rendered = json.dumps(tools, indent=2, sort_keys=True) + "\n"
    if os.environ.get("MAYA_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(rendered)
    assert SNAPSHOT.exists(), "no snapshot yet: run with MAYA_UPDATE_SNAPSHOTS=1 once and commit it"
    assert rendered == SNAPSHOT.read_text(), "tools/list changed: if on purpose, re-record the snapshot"


@pytest.mark.parametrize("mode", MODES)
async def test_every_tool_declares_all_four_annotations(server: Any, mode: str) -> None:
    tools = await tools_of(server, mode)
    assert {t["name"] for t in tools} == READ_TOOLS | CHANGE_TOOLS | APP_TOOLS
    for tool in tools:
        hints = tool.get("annotations", {})
        for hint in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"):
            assert hint in hints, f"{tool['name']} does not declare {hint}"
        assert hints["readOnlyHint"] is (tool["name"] in READ_TOOLS)
        assert "outputSchema" in tool, f"{tool['name']} has no structured result"


SMALL_WORDS = {"a", "an", "and", "or", "of", "on", "the", "to"}


@pytest.mark.parametrize("mode", MODES)
async def test_every_tool_has_a_short_title_case_title_of_its_own(server: Any, mode: str) -> None:
    """Clients list a tool by its title ("Scale Node Pool"), not by its snake_case name."""
    tools = await tools_of(server, mode)
    titles = [tool.get("title") for tool in tools]
    assert all(titles), [t["name"] for t in tools if not t.get("title")]
    assert len(set(titles)) == len(titles), titles
    for title in titles:
        assert isinstance(title, str) and len(title) <= 32 and len(title.split()) <= 4, title
        first, *rest = title.split()
        assert first[0].isupper() and all(w[0].isupper() or w in SMALL_WORDS for w in rest), title
        assert "_" not in title, title


async def listed(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


@pytest.mark.parametrize("mode", MODES)
async def test_decide_card_is_listed_only_to_a_client_that_declared_the_apps_extension(server: Any, mode: str) -> None:
    """The card view's tool is for an Apps host's view; a form, URL-only or bare client never sees it."""
    async with Client(server, mode=mode, extensions=[APPS]) as apps:
        assert await listed(apps) == READ_TOOLS | CHANGE_TOOLS | APP_TOOLS
    async with Client(server, mode=mode, elicitation_callback=Person()) as form:
        assert await listed(form) == READ_TOOLS | CHANGE_TOOLS
    async with UrlOnlyClient(server, mode=mode, elicitation_callback=Browser()) as url_only:
        assert await listed(url_only) == READ_TOOLS | CHANGE_TOOLS
    async with Client(server, mode=mode) as bare:
        assert await listed(bare) == READ_TOOLS | CHANGE_TOOLS
    # A MIME type list without the app profile is not the Apps extension (client_supports_apps).
    other = advertise(EXTENSION_ID, {"mimeTypes": ["text/html"]})
    async with Client(server, mode=mode, extensions=[other]) as half:
        assert await listed(half) == READ_TOOLS | CHANGE_TOOLS


@pytest.mark.http
@pytest.mark.parametrize("mode", MODES)
async def test_over_streamable_http_decide_card_is_listed_only_to_an_apps_client(shared_live: Live, mode: str) -> None:
    headers = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
    async with httpx2.AsyncClient(verify=verifying_tls(), headers=headers, timeout=30) as http:
        async with Client(
            streamable_http_client(shared_live.url, http_client=http), mode=mode, extensions=[APPS]
        ) as apps:
            assert await listed(apps) == READ_TOOLS | CHANGE_TOOLS | APP_TOOLS
        async with Client(streamable_http_client(shared_live.url, http_client=http), mode=mode) as bare:
            assert await listed(bare) == READ_TOOLS | CHANGE_TOOLS


async def test_read_only_mode_registers_only_read_tools(backend: ReferenceBackend) -> None:
    server = build_server(Settings(card_store=":memory:", read_only=True), backend=backend)
    tools = await tools_of(server)
    assert {t["name"] for t in tools} == READ_TOOLS
    assert all(t["annotations"]["readOnlyHint"] is True for t in tools)


async def test_no_tool_argument_can_approve_a_card(server: Any) -> None:
    """DESIGN.md property 1: the model never approves. No argument of any tool reads like approval."""
    for tool in await tools_of(server):
        names = set(tool["inputSchema"].get("properties", {}))
        assert not names & {"approve", "approved", "confirm", "confirmed", "card", "answer", "yes"}, tool["name"]
        assert not tool["name"].startswith(("approve", "confirm"))


async def test_the_server_reports_the_packages_version(server: Any) -> None:
    from importlib import metadata

    from mcp import Client

    async with Client(server) as client:
        info = client.server_info if hasattr(client, "server_info") else None
        result = await client.call_tool("list_machine_tiers", {})
    version = metadata.version("maya-tools")
    assert version and result.meta is not None
    assert result.meta["io.modelcontextprotocol/serverInfo"]["version"] == version
    if info is not None:
        assert info.version == version


WIRE_BUDGET_BYTES = 24 * 1024  # issue 21: with change_pool_tier and stop_plan
MODEL_FACING_BUDGET_TOKENS = 2_500


async def test_tools_list_fits_issue_10_s_budget_by_the_benchmark_s_measure(server: Any) -> None:
    """benchmarks/run.py's measure: every tool as sent (compact JSON) ≤ 24 KB; the part a model reads
    (name, description, input schema) ≤ 2,500 o200k_base tokens. Sizes, not timings. The client declares
    no Apps extension, as in benchmarks/run.py, so ``decide_card`` is not listed."""
    import bpe_openai  # type: ignore[import-not-found]  # a dev dependency; ships its vocabularies

    from benchmarks.measures import tools_list_texts

    async with Client(server) as client:
        listing = await client.list_tools()
    wire, facing = tools_list_texts(listing.tools)
    assert len(wire) <= WIRE_BUDGET_BYTES, f"tools/list is {len(wire) / 1024:.2f} KB"
    used = len(bpe_openai.get_encoding("o200k_base").encode(facing))
    assert used <= MODEL_FACING_BUDGET_TOKENS, f"the model-facing part of tools/list is {used} tokens"


async def test_every_argument_stays_typed_and_described(server: Any) -> None:
    """The compacted input schemas (maya_tools/tools/schemas.py) keep a type and a description for each argument."""
    for tool in await tools_of(server):
        for name, prop in tool["inputSchema"].get("properties", {}).items():
            assert prop.get("type"), f"{tool['name']}.{name} has no type"
            assert prop.get("description"), f"{tool['name']}.{name} has no description"
            assert "title" not in prop and "anyOf" not in prop, f"{tool['name']}.{name} is not compact"
