"""Contract replay: the flows recorded from the reference backend, parsed again by today's client.

No server runs here (``record_mode="none"``): a request the cassette does not hold fails the test.
Re-record with ``.venv/bin/python scripts/record_cassettes.py`` (see docs/client.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import vcr

from backend_client import DoorClient
from scripts.cassette_flows import (
    CLUSTER_ID,
    FLOWS,
    FORBIDDEN_IN_CASSETTES,
    NODE_NAME,
    REPLAY_BASE_URL,
    Flow,
    vcr_options,
)
from tests.conftest import ADMIN_TOKEN

CASSETTES = Path(__file__).resolve().parent.parent / "cassettes"
SECRETS = (*FORBIDDEN_IN_CASSETTES, ADMIN_TOKEN)

pytestmark = pytest.mark.anyio


async def _no_wait(seconds: float) -> None:
    return None


async def _replay(flow: Flow) -> dict[str, Any]:
    path = CASSETTES / flow.cassette
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/record_cassettes.py")

    def client_for(token: str) -> DoorClient:
        return DoorClient(REPLAY_BASE_URL, token, sleep=_no_wait)

    with vcr.use_cassette(str(path), record_mode="none", allow_playback_repeats=False, **vcr_options()) as cassette:
        result = await flow.run(client_for)
        assert cassette.all_played, f"{flow.cassette}: the client made fewer requests than were recorded"
    return result


FLOW = {flow.name: flow for flow in FLOWS}


def test_every_flow_has_a_cassette_and_no_cassette_holds_a_token() -> None:
    files = sorted(CASSETTES.glob("*.yaml"))
    assert {p.name for p in files} >= {flow.cassette for flow in FLOWS}
    for path in files:
        text = path.read_text()
        for secret in SECRETS:
            assert secret not in text, f"{path.name} contains {secret!r}"
        assert "127.0.0.1" not in text, f"{path.name} names the recording server; every cassette says door.test"


async def test_list_everything() -> None:
    result = await _replay(FLOW["list_everything"])
    assert any(tier.id == "dks.c5.xlarge" and tier.spec.disk_gib == 80 for tier in result["tiers"].items)
    assert CLUSTER_ID in {c.id for c in result["clusters"].items}
    assert result["resolved"].id == CLUSTER_ID
    cluster = result["cluster"]
    assert cluster.phase == "Provisioned"
    workers = cluster.pool("workers")
    assert workers is not None and workers.count == 2 and workers.root_volume_size_gib == 80
    assert result["pools"].total == 1 and result["pools"].items[0].name == "workers"
    assert result["state"].cluster_id == CLUSTER_ID
    assert result["first_nodes"].cold is True  # R-NODE-03
    fresh = result["fresh_nodes"]
    assert fresh.fresh and fresh.total == 2
    assert NODE_NAME in {node.name for node in fresh.items}
    assert {node.pool for node in result["workers_nodes"].items} == {"workers"}


async def test_add_pool() -> None:
    result = await _replay(FLOW["add_pool"])
    batch = result["cluster"].pool("batch")
    assert batch is not None and batch.size == "dks.m5.xlarge" and batch.count == 1
    assert result["operation"].kind == "pool.create" and result["operation"].status == "succeeded"
    nodes = result["nodes"]
    assert nodes.fresh and nodes.total == 1
    assert nodes.items[0].status == "Running" and nodes.items[0].ready


async def test_scale_pool() -> None:
    result = await _replay(FLOW["scale_pool"])
    assert result["cluster"].pool("workers").count == 4
    assert result["operation"].kind == "pool.update" and result["operation"].status == "succeeded"
    assert result["nodes"].total == 4
    assert all(node.status == "Running" for node in result["nodes"].items)


async def test_autoscale_pool() -> None:
    workers = (await _replay(FLOW["autoscale_pool"]))["cluster"].pool("workers")
    assert (workers.auto_scale, workers.min_nodes, workers.max_nodes, workers.count) == (True, 2, 6, 2)


async def test_remove_pool() -> None:
    result = await _replay(FLOW["remove_pool"])
    assert result["removed"].pool("batch") is None
    assert any(p.name == "batch" and p.lifecycle == "deleting" for p in result["removed"].node_pools)
    assert result["operation"].kind == "pool.delete" and result["operation"].status == "succeeded"
    assert [p.name for p in result["pools"].items] == ["workers"]


async def test_replace_node() -> None:
    result = await _replay(FLOW["replace_node"])
    assert result["pending"].node_name == NODE_NAME
    assert result["operation"].kind == "node.replace" and result["operation"].status == "succeeded"
    names = {node.name for node in result["nodes"].items}
    assert NODE_NAME not in names and result["nodes"].total == 2


@pytest.mark.parametrize(
    ("flow", "error", "status", "rule"),
    [
        ("error_400_unknown_tier", "BadRequest", 400, "R-ADD-03"),
        ("error_401_unknown_token", "Unauthorized", 401, "R-AUTH-01"),
        ("error_402_credit", "PaymentRequired", 402, "R-CREDIT-01"),
        ("error_403_member_mutating", "Forbidden", 403, "R-AUTH-03"),
        ("error_404_unknown_cluster", "NotFound", 404, "R-AUTH-04"),
        ("error_409_last_pool", "Conflict", 409, "R-DEL-01"),
        ("error_422_empty_patch", "UnprocessableEntity", 422, "R-PATCH-02"),
        ("error_503_inventory_down", "ServiceUnavailable", 503, "R-NODE-05"),
    ],
)
async def test_documented_error(flow: str, error: str, status: int, rule: str) -> None:
    result = await _replay(FLOW[flow])
    assert (result["error"], result["status"], result["rule"]) == (error, status, rule)
    assert result["request_id"]
    assert str(status) in result["message"] and rule in result["message"]
    if status == 503:
        assert result["retry_after"] == 5.0
