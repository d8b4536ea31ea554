"""``DoorClient.node_page``: every worker counted, only the page parsed, Door's freshness kept (R-NODE-01..04)."""

from __future__ import annotations

import json

import httpx2
import pytest
from fastapi import FastAPI

from backend_client import DoorClient, DoorResponseError
from backend_client.models import PublicNodePoolCreateRequest
from backend_client.nodes import freshness_of, node_page
from reference_backend import seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.conftest import BASE_URL

pytestmark = pytest.mark.anyio


async def test_a_page_of_a_big_cluster_counts_every_worker_and_parses_only_the_page(
    app: FastAPI, backend: ReferenceBackend, clock: ManualClock
) -> None:
    backend.set_credit(seed.DEMO_ORGANISATION, 1e9)
    backend.install_cluster(
        name="big",
        organisation=seed.DEMO_ORGANISATION,
        cluster_id="big",
        pools=[PublicNodePoolCreateRequest(name=f"p{i}", size="dks.c5.large", count=50) for i in range(20)],
    )
    async with DoorClient(BASE_URL, seed.DEMO_ADMIN_TOKEN, transport=httpx2.ASGITransport(app=app)) as door:
        cold = await door.node_page("big", limit=10)
        assert cold.cold and cold.total == 0 and cold.next_offset is None
        clock.advance(5)
        page = await door.node_page("big", offset=995, limit=10)
        full = await door.list_nodes("big")
    assert page.fresh and page.total == 1000 == full.total
    assert page.items == full.items[995:] and page.next_offset is None
    assert sum(c.count for c in page.counts) == 1000
    assert {(c.pool, c.status) for c in page.counts} == {(f"p{i}", "Running") for i in range(20)}


def test_a_body_that_is_not_a_node_list_is_refused() -> None:
    with pytest.raises(ValueError, match="no items"):
        node_page(b'{"cluster_id": "c"}')
    with pytest.raises(ValueError):
        node_page(b'{"cluster_id": "c", "items": [{"name": 1}], "total": 1, "cold": false, "stale": false}', limit=1)


async def test_a_wrong_body_from_door_is_a_response_error() -> None:
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={"items": "no"})

    async with DoorClient(BASE_URL, "t", transport=httpx2.MockTransport(answer)) as door:
        with pytest.raises(DoorResponseError, match="not a NodeList"):
            await door.node_page("c")


def body(*items: dict[str, object], **envelope: object) -> bytes:
    fields: dict[str, object] = {
        "schema_version": "node.public.v1",
        "cluster_id": "c",
        "total": len(items),
        "cold": False,
        "stale": False,
        "next_refresh_at": None,
        **envelope,
    }
    return json.dumps({**fields, "items": list(items)}).encode()


def worker(name: str, pool: str | None = "p", status: object = "Running", **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "pool": pool,
        "status": status,
        "kubernetes_version": "v1.32.4",
        "ready": status == "Running",
        "created_at": "2026-10-01T12:00:00Z",
        "deleted_at": None,
        **extra,
    }


def test_a_status_door_adds_is_counted_not_refused() -> None:
    """Responses tolerate what Door adds: an unknown status is counted under its own name."""
    page = node_page(body(worker("a"), worker("b", status="Hibernating"), worker("c", pool=None)), limit=1)
    assert [(c.pool, c.status, c.count) for c in page.counts] == [
        (None, "Running", 1),
        ("p", "Hibernating", 1),
        ("p", "Running", 1),
    ]
    assert page.total == 3 and [n.name for n in page.items] == ["a"]


def test_the_page_keeps_fields_door_added_to_a_worker_and_to_the_envelope() -> None:
    page = node_page(body(worker("a", zone="eu-1"), worker("b"), region="eu"), offset=0, limit=1)
    assert page.items[0].model_dump()["zone"] == "eu-1"
    assert page.cluster_id == "c" and page.fresh and page.next_offset == 1


def test_a_worker_without_a_string_status_or_that_is_not_an_object_is_not_a_node_list() -> None:
    with pytest.raises(ValueError, match="not a worker"):
        node_page(body(worker("a", status=5)))
    with pytest.raises(ValueError, match="not a worker"):
        node_page(b'{"cluster_id": "c", "items": [1], "total": 1, "cold": false, "stale": false}')
    with pytest.raises(ValueError, match="not JSON"):
        node_page(b'{"cluster_id": "c", "items": [')


def test_a_changed_envelope_fails_as_the_contract_model_does() -> None:
    with pytest.raises(ValueError, match="cold"):
        node_page(body(worker("a"), cold="sometimes"))
    with pytest.raises(ValueError, match="next_refresh_at"):
        freshness_of(json.dumps({"cluster_id": "c", "items": [], "total": 0, "cold": True, "stale": False}).encode())
    assert freshness_of(body(next_refresh_at="2026-10-01T12:00:05Z", stale=True))[0] is False


def test_naming_the_pools_counts_the_same_and_a_worker_of_another_pool_is_counted_too() -> None:
    """``pools`` only makes counting faster: a worker of a pool the caller did not name (a pool added
    since the cluster was read) is counted like the others."""
    content = body(worker("a"), worker("b", pool="q"), worker("c", pool="new", status="Hibernating"))
    expected = [(c.pool, c.status, c.count) for c in node_page(content, limit=1).counts]
    assert expected == [("new", "Hibernating", 1), ("p", "Running", 1), ("q", "Running", 1)]
    for named in (["p", "q", "new"], ["p", "q"], ["p"]):
        assert [(c.pool, c.status, c.count) for c in node_page(content, limit=1, pools=named).counts] == expected
