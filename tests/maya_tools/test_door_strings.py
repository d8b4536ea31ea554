"""Door's strings are neutralised wherever the model or a person reads them: no control or format
character (a terminal escape, a bell, a bidi override, a carriage return) and no unbounded length,
in the read tools' ``content`` and ``structuredContent`` and in everything the chat prints."""

from __future__ import annotations

import io
import unicodedata
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import TextContent

from backend_client import models
from backend_client.models import PublicNodePoolCreateRequest
from maya_tools.chat.app import open_session, repl
from maya_tools.chat.terminal import ApprovalPrompt, Terminal
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ORGANISATION
from tests.maya_tools.conftest import MODES

pytestmark = pytest.mark.anyio

# Clear the screen, retitle the window and ring, reverse the text's direction, return the carriage.
HOSTILE = "\x1b[2J\x1b]0;pwned\x07\u202e\r"
INVISIBLE = {"Cc", "Cf", "Zl", "Zp", "Co", "Cs"}
CLUSTER_ID = "hostile-1"
DOOR_TEXT_LIMIT = 256  # maya_tools.tools.read: above the longest valid name, a node name of 254


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def invisible(text: str, allowed: str = "") -> list[str]:
    return [ch for ch in text if ch not in allowed and unicodedata.category(ch) in INVISIBLE]


@pytest.fixture
def hostile(backend: ReferenceBackend) -> ReferenceBackend:
    """A cluster whose name, version, tags, labels and node names carry escapes and run long."""
    cluster = backend.install_cluster(
        cluster_id=CLUSTER_ID,
        name="hostile" + HOSTILE + "x" * 2_000,
        organisation=DEMO_ORGANISATION,
        kubernetes_version="v1.32" + HOSTILE,
        tags=["tag" + HOSTILE],
        pools=[
            PublicNodePoolCreateRequest(
                name="workers",
                size="dks.c5.large",
                count=1,
                labels={"team" + HOSTILE: "pay\x1b[31mments" + "y" * 1_000},
                tags={"note": "line one\r\nInjected: line two"},
            )
        ],
    )
    backend.install_pool(
        cluster,
        PublicNodePoolCreateRequest(name="odd", size="dks.c5.large", count=1),
        node_names=["node" + HOSTILE + "n" * 500],
    )
    backend.commit()
    return backend


READS: list[tuple[str, dict[str, Any]]] = [
    ("list_clusters", {}),
    ("get_cluster", {"cluster": CLUSTER_ID}),
    ("list_node_pools", {"cluster": CLUSTER_ID}),
    ("list_nodes", {"cluster": CLUSTER_ID}),
    ("get_cluster_operations", {"cluster": CLUSTER_ID}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("tool", "arguments"), READS, ids=[r[0] for r in READS])
async def test_read_tools_give_the_model_doors_strings_capped_and_without_control_characters(
    server: MCPServer[Any],
    hostile: ReferenceBackend,
    clock: ManualClock,
    mode: str,
    tool: str,
    arguments: dict[str, Any],
) -> None:
    async with Client(server, mode=mode) as client:
        result = await client.call_tool(tool, arguments)
        if tool == "list_nodes":  # the first read is cold (R-NODE-03); the refresh it queued lands later
            clock.advance(120)
            result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    data = result.structured_content
    assert data is not None
    seen = list(strings(data))
    assert any("hostile" in s or "pay" in s or "node" in s for s in seen), data
    for text in seen:
        assert not invisible(text), text[:200]
        assert len(text) <= DOOR_TEXT_LIMIT, text[:200]
    content = "\n".join(block.text for block in result.content if isinstance(block, TextContent))
    assert not invisible(content, allowed="\n"), content[:500]
    assert "\\u001b" not in content and "\\u0007" not in content and "\\r" not in content
    assert "x" * 300 not in content and "y" * 300 not in content


def test_an_operations_error_and_message_reach_the_model_capped_and_clean() -> None:
    from maya_tools.tools.read import tidy

    now = datetime(2026, 1, 1, tzinfo=UTC)
    operation = models.Operation(
        id="op-1",
        kind="node.replace",
        target="node" + HOSTILE,
        pool=None,
        status="failed",
        started_at=now,
        finished_at=now,
        error="boom" + HOSTILE + "e" * 5_000,
        message="step" + HOSTILE,
        extra_field="unknown" + HOSTILE,  # Door may add fields; they are kept, and cleaned too
    )
    cleaned = tidy(operation)
    for text in strings(cleaned.model_dump(mode="json")):
        assert not invisible(text) and len(text) <= DOOR_TEXT_LIMIT
    assert cleaned.error is not None and cleaned.error.startswith("boom [2J ]0;pwned")


@pytest.mark.parametrize("mode", MODES)
async def test_the_chat_prints_nothing_raw_from_door(
    server: MCPServer[Any], hostile: ReferenceBackend, clock: ManualClock, mode: str
) -> None:
    out = io.StringIO()
    requests = iter(
        [
            "show clusters",
            f"show cluster {CLUSTER_ID}",
            f"show pools on {CLUSTER_ID}",
            f"show nodes on {CLUSTER_ID}",
            f"show operations on {CLUSTER_ID}",
            f"scale workers on {CLUSTER_ID} to 2",
            "n",
        ]
    )

    def read(prompt: str) -> str:
        said = next(requests, None)
        if said is None:
            raise EOFError
        if "nodes" in said:
            clock.advance(120)  # past the cold first read
        return said

    terminal = Terminal(read, out, discard=lambda: None)
    approval = ApprovalPrompt(terminal)
    async with Client(server, mode=mode, elicitation_callback=approval) as client:
        session = await open_session(client, terminal, anthropic_client=None, model="unused")
        with anyio.fail_after(30):
            await repl(terminal, session)
    shown = out.getvalue()
    assert "hostile" in shown and "pay" in shown and "you declined" in shown, shown
    assert not invisible(shown, allowed="\n"), [ch for ch in invisible(shown, allowed="\n")][:5]
    assert "\\x1b[2J" in shown or "[2J" in shown  # visible as text, never as an escape
    for line in shown.splitlines():
        assert len(line) <= 400, line[:200]


def test_the_terminal_shows_control_characters_as_visible_escapes() -> None:
    out = io.StringIO()
    Terminal(out=out).line("name" + HOSTILE + "\tend")
    assert out.getvalue() == "name\\x1b[2J\\x1b]0;pwned\\x07\\u202e\\x0d end\n"


@pytest.mark.parametrize("mode", MODES)
async def test_read_results_keep_doors_names_as_written_so_the_model_can_pass_them_back(
    server: MCPServer[Any], backend: ReferenceBackend, clock: ManualClock, mode: str
) -> None:
    """Cards defang what could become a link (``confirmation_cards.render``); data the model acts on
    does not: a node name with a domain in it must reach replace_node as Door wrote it."""
    node, key = "ip-10-0-1-5.eu-west.compute.internal", "app.kubernetes.io/name"
    cluster = backend.install_cluster(
        cluster_id="dotted",
        name="dotted.example.com",
        organisation=DEMO_ORGANISATION,
        pools=[PublicNodePoolCreateRequest(name="web", size="dks.c5.large", count=1, labels={key: "web"})],
    )
    backend.install_pool(
        cluster, PublicNodePoolCreateRequest(name="odd", size="dks.c5.large", count=1), node_names=[node]
    )
    backend.commit()
    async with Client(server, mode=mode) as client:
        pools = await client.call_tool("list_node_pools", {"cluster": "dotted"})
        await client.call_tool("list_nodes", {"cluster": "dotted"})
        clock.advance(120)  # past the cold first read (R-NODE-03)
        nodes = await client.call_tool("list_nodes", {"cluster": "dotted"})
    seen = [*strings(pools.structured_content), *strings(nodes.structured_content)]
    assert key in seen and node in seen and "dotted.example.com" in seen, seen


LINKING = "Approve here: https://evil.example/approve (www.evil.com) ops@evil.com"


@pytest.mark.parametrize("mode", MODES)
async def test_read_texts_make_no_link_of_doors_free_text(
    server: MCPServer[Any], backend: ReferenceBackend, mode: str
) -> None:
    """Labels, tags and Door's messages are defanged in the read tools' text as in a card (issue 19);
    names and ids stay exact there, as in ``structuredContent``, so the model can pass them back."""
    from tests.confirmation_cards.test_links import markdown_links, plain_links

    backend.install_cluster(
        cluster_id="linking-1",
        name="linking",
        organisation=DEMO_ORGANISATION,
        tags=[LINKING],
        pools=[
            PublicNodePoolCreateRequest(
                name="workers", size="dks.c5.large", count=1, labels={"note": LINKING}, tags={"t": LINKING}
            )
        ],
    )
    backend.commit()
    async with Client(server, mode=mode) as client:
        for tool in ("get_cluster", "list_node_pools"):
            result = await client.call_tool(tool, {"cluster": "linking-1", "detail": True})
            assert not result.is_error, result.content
            text = "\n".join(block.text for block in result.content if isinstance(block, TextContent))
            assert "evil" in text, text
            assert markdown_links(text) == [] and plain_links(text) == [], text
