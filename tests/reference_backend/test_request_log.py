"""The request log: every answer outside the admin plane, in order, for tests that ask "what did Door see?"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import httpx2
import pytest

from reference_backend import seed
from reference_backend.backend import REQUEST_LOG_SIZE, ReferenceBackend, token_digest
from tests.conftest import ADMIN_TOKEN, auth

pytestmark = pytest.mark.anyio

ADMIN = auth(seed.DEMO_ADMIN_TOKEN)
REF = auth(ADMIN_TOKEN)
CLUSTER = f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}"


def _seen(records: Sequence[Mapping[str, object]]) -> list[tuple[object, ...]]:
    return [(r["method"], r["path"], r["status"], r["idempotency_key"]) for r in records]


async def test_every_public_request_is_logged_with_its_status_and_never_its_token(
    door: httpx2.AsyncClient, backend: ReferenceBackend
) -> None:
    """Reads, refusals (R-AUTH-01 401, R-PATCH-02 422) and accepted mutations are logged in order, the
    path without its query; the admin plane is not; no record holds a token."""
    await door.get("/v1/public/clusters?name=payments-prod", headers=ADMIN)
    await door.put("/_reference/organisations/payments", headers=REF, json={"credit": 9000})
    await door.get(CLUSTER, headers=auth("not-a-token"))
    await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN | {"Idempotency-Key": "k"}, json={})
    await door.post(
        f"{CLUSTER}/node-pools", headers=ADMIN | {"Idempotency-Key": "k2"}, json={"name": "b", "size": "dks.c5.large"}
    )
    await door.head("/v1/public/machine-tiers", headers=ADMIN)
    records = backend.requests_since(0)
    assert [r["seq"] for r in records] == [1, 2, 3, 4, 5]
    assert _seen(records) == [
        ("GET", "/v1/public/clusters", 200, False),
        ("GET", CLUSTER, 401, False),
        ("PATCH", f"{CLUSTER}/node-pools/workers", 422, True),
        ("POST", f"{CLUSTER}/node-pools", 202, True),
        ("HEAD", "/v1/public/machine-tiers", 200, False),
    ]
    assert all(set(r) == {"seq", "method", "path", "status", "idempotency_key", "token", "user"} for r in records)
    assert seed.DEMO_ADMIN_TOKEN not in repr(list(backend.request_log))
    assert "not-a-token" not in repr(list(backend.request_log))
    assert backend.requests_since(4) == records[4:]


async def test_each_record_names_whose_token_it_carried_by_digest_and_user_never_the_token(
    door: httpx2.AsyncClient, backend: ReferenceBackend
) -> None:
    """Tests that ask "whose Door token reached Door?" (issue 20: each person's calls carry their own
    token, never the MCP access token) read ``token`` (the first 16 hex of its SHA-256) and ``user``."""
    await door.get("/v1/public/clusters", headers=ADMIN)
    await door.get("/v1/public/clusters", headers=auth(seed.DEMO_MEMBER_TOKEN))
    await door.get("/v1/public/clusters", headers=auth("an-mcp-access-token"))
    await door.get("/v1/public/clusters")
    records = backend.requests_since(0)
    assert [(r["token"], r["user"]) for r in records] == [
        (token_digest(seed.DEMO_ADMIN_TOKEN)[:16], "ada"),
        (token_digest(seed.DEMO_MEMBER_TOKEN)[:16], "mel"),
        (token_digest("an-mcp-access-token")[:16], None),
        (None, None),
    ]


async def test_a_faulted_request_is_logged_with_the_status_it_was_answered(
    door: httpx2.AsyncClient, backend: ReferenceBackend
) -> None:
    """A `before` fault answers instead of the route, an `after` fault replaces the 202 of a change that
    took effect: both are logged with the injected status, not the one the route would have given."""
    route = "PATCH /v1/public/clusters/{cluster_id}/node-pools/{pool_name}"
    await door.post("/_reference/faults", headers=REF, json={"route": route, "status": 503, "when": "before"})
    await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"labels": {"a": "1"}})
    await door.post("/_reference/faults", headers=REF, json={"route": route, "status": 502, "when": "after"})
    await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"labels": {"a": "2"}})
    assert [r["status"] for r in backend.requests_since(0)] == [503, 502]
    pools = (await door.get(f"{CLUSTER}/node-pools", headers=ADMIN)).json()["items"]
    assert pools[0]["labels"] == {"a": "2"}  # the `after` fault's change took effect


async def test_the_admin_plane_serves_the_log_page_by_page(door: httpx2.AsyncClient) -> None:
    """`GET /_reference/requests?since=N` → the records after N and the `next` to pass; reading the
    log is itself not logged."""
    await door.get(CLUSTER, headers=ADMIN)
    first = (await door.get("/_reference/requests", headers=REF)).json()
    assert (_seen(first["items"]), first["next"]) == ([("GET", CLUSTER, 200, False)], 1)
    assert (await door.get("/_reference/requests?since=1", headers=REF)).json() == {"items": [], "next": 1}
    await door.delete(f"{CLUSTER}/nodes/Bad_Name", headers=ADMIN | {"Idempotency-Key": "r1"})
    await door.get(f"{CLUSTER}/state", headers=ADMIN)
    page = (await door.get(f"/_reference/requests?since={first['next']}", headers=REF)).json()
    assert [r["seq"] for r in page["items"]] == [2, 3] and page["next"] == 3
    assert _seen(page["items"]) == [
        ("DELETE", f"{CLUSTER}/nodes/Bad_Name", 400, True),
        ("GET", f"{CLUSTER}/state", 200, False),
    ]


async def test_the_log_needs_the_admin_token_and_a_non_negative_since(door: httpx2.AsyncClient) -> None:
    assert (await door.get("/_reference/requests")).status_code == 401
    assert (await door.get("/_reference/requests", headers=ADMIN)).status_code == 401
    assert (await door.get("/_reference/requests?since=-1", headers=REF)).status_code == 422


def test_the_log_keeps_the_last_ten_thousand_requests(backend: ReferenceBackend) -> None:
    """Bounded: the oldest records go; seqs keep counting and `requests_since` still pages by seq."""
    for _ in range(REQUEST_LOG_SIZE + 5):
        backend.log_request("GET", "/v1/public/clusters", 200, idempotency_key=False)
    assert REQUEST_LOG_SIZE == 10_000 and len(backend.request_log) == REQUEST_LOG_SIZE
    assert backend.requests_since(0)[0]["seq"] == 6
    assert [r["seq"] for r in backend.requests_since(REQUEST_LOG_SIZE + 3)] == [
        REQUEST_LOG_SIZE + 4,
        REQUEST_LOG_SIZE + 5,
    ]
    assert backend.requests_since(REQUEST_LOG_SIZE + 5) == [] and backend.last_request_seq == REQUEST_LOG_SIZE + 5
