"""Read results at scale: a compact text the model reads, the data in ``structuredContent``.

Tokens are counted with the o200k_base tokenizer when ``bpe-openai`` is installed (it ships its
vocabularies, so it works offline), else estimated as bytes / 3, more than JSON-ish text costs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mcp import Client
from mcp_types import TextContent

from backend_client.models import PublicNodePoolCreateRequest
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ORGANISATION

pytestmark = pytest.mark.anyio


def tokens(text: str) -> int:
    try:
        import bpe_openai  # type: ignore[import-not-found]
    except ImportError:
        return len(text.encode()) // 3 + 1
    return len(bpe_openai.get_encoding("o200k_base").encode(text))


def _big(backend: ReferenceBackend) -> None:
    backend.set_credit(DEMO_ORGANISATION, 1e12)
    backend.install_cluster(
        name="big",
        organisation=DEMO_ORGANISATION,
        cluster_id="big",
        pools=[PublicNodePoolCreateRequest(name=f"p{i}", size="dks.c5.large", count=200) for i in range(200)],
    )


def _text(result: Any) -> str:
    assert not result.is_error, result
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def test_list_nodes_on_40000_workers_is_under_2000_tokens_and_counts_every_worker(
    connect: Callable[..., Client], backend: ReferenceBackend, clock: ManualClock
) -> None:
    _big(backend)
    async with connect("legacy") as client:
        await client.call_tool("list_nodes", {"cluster": "big"})  # cold: queues the first snapshot
        clock.advance(5)
        result = await client.call_tool("list_nodes", {"cluster": "big"})
    text = _text(result)
    data = result.structured_content
    assert data is not None and data["total"] == 40_000 and len(data["items"]) == 50
    assert sum(c["count"] for c in data["summary"]) == 40_000 and data["next_offset"] == 50
    assert "big: 40000 workers" in text and "Showing 50 of 40000; ask with offset 50 for more." in text
    assert tokens(text) <= 2000, tokens(text)


async def test_get_cluster_and_list_node_pools_page_200_pools(
    connect: Callable[..., Client], backend: ReferenceBackend
) -> None:
    _big(backend)
    async with connect("legacy") as client:
        cluster = await client.call_tool("get_cluster", {"cluster": "big"})
        pools = await client.call_tool("list_node_pools", {"cluster": "big", "offset": 190, "limit": 25})
        one = await client.call_tool("get_cluster", {"cluster": "big", "pool": "p7", "detail": True})
    assert tokens(_text(cluster)) <= 2000 and tokens(_text(pools)) <= 2000
    data = cluster.structured_content
    assert data is not None and data["pools_total"] == 200 and len(data["node_pools"]) == 25
    assert data["next_offset"] == 25 and data["total_vcpu"] is not None
    listed = pools.structured_content
    assert listed is not None and [p["name"] for p in listed["items"]][:1] == ["p190"]
    assert listed["total"] == 200 and listed["next_offset"] is None
    only = one.structured_content
    assert only is not None and [p["name"] for p in only["node_pools"]] == ["p7"]
