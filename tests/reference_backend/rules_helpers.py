"""Small helpers shared by the black-box rule tests: URLs, tokens, the admin plane and problem checks.

Every test drives the reference backend only through HTTP (`door` fixture) and moves time only
through the `ManualClock` fixture, so nothing here sleeps.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx2

from backend_client.models import Cluster, ClusterState, MachineTier, NodeList, NodePool, Problem
from reference_backend import seed
from reference_backend.clock import ManualClock
from tests.conftest import ADMIN_TOKEN, auth

CID = seed.DEMO_CLUSTER_ID
PENDING_CID = seed.DEMO_PENDING_CLUSTER_ID
ORG = seed.DEMO_ORGANISATION
UNKNOWN_CID = "00000000-0000-4000-8000-00000000dead"

ADMIN = auth(seed.DEMO_ADMIN_TOKEN)
MEMBER = auth(seed.DEMO_MEMBER_TOKEN)
OUTSIDER = auth(seed.DEMO_OUTSIDER_TOKEN)
REF = auth(ADMIN_TOKEN)  # the admin plane (/_reference/…)

API = "/v1/public"

# Simulated durations from docs/contracts.md.
WORKER_RUNNING_S = 10 + 90 + 20
DRAIN_S = 30
LABELS_ONLY_S = 1
UNKNOWN_NODE_FAILS_S = 5
INVENTORY_TTL_S = 30
INVENTORY_REFRESH_S = 2
SETTLE_S = 300  # comfortably after any scale-up, drain or replacement


def cluster_url(cid: str = CID) -> str:
    return f"{API}/clusters/{cid}"


def pools_url(cid: str = CID) -> str:
    return f"{API}/clusters/{cid}/node-pools"


def pool_url(name: str, cid: str = CID) -> str:
    return f"{API}/clusters/{cid}/node-pools/{name}"


def nodes_url(cid: str = CID, pool: str | None = None) -> str:
    if pool is None:
        return f"{API}/clusters/{cid}/nodes"
    return f"{API}/clusters/{cid}/node-pools/{pool}/nodes"


def node_url(node_name: str, cid: str = CID) -> str:
    return f"{API}/clusters/{cid}/nodes/{node_name}"


def state_url(cid: str = CID) -> str:
    return f"{API}/clusters/{cid}/state"


# --- problem+json --------------------------------------------------------------------------------


def problem(
    response: httpx2.Response,
    status: int,
    rule: str | set[str] | None = None,
    *,
    field: str | None = None,
) -> Problem:
    """Assert `response` is an RFC 9457 problem with that status (and rule, and field for 422)."""
    assert response.status_code == status, f"expected {status}, got {response.status_code}: {response.text}"
    content_type = response.headers.get("content-type", "")
    assert content_type.startswith("application/problem+json"), content_type
    body = Problem.model_validate(response.json())
    assert body.status == status, body
    assert body.title, body
    if rule is not None:
        allowed = {rule} if isinstance(rule, str) else rule
        assert body.rule in allowed, f"rule {body.rule!r} not in {sorted(allowed)}: {body}"
    if field is not None:
        assert names_field(body, field), f"errors[] does not name {field!r}: {body.errors}"
    return body


def names_field(body: Problem, field: str) -> bool:
    """True when some errors[] entry names `field` (as `count`, `body.count` or `labels.team`)."""
    return any(field in re.split(r"[./\[\]]", error.field) for error in body.errors)


def texts(body: Problem) -> str:
    """Every human-readable string in a problem, for message checks."""
    return json.dumps(body.model_dump(mode="json"), ensure_ascii=False)


def says(body: Problem, message: str) -> bool:
    """True when the problem's detail or one of its errors[] messages carries `message`."""
    return message in (body.detail or "") or any(message in e.message for e in body.errors)


# --- reads ---------------------------------------------------------------------------------------


async def get_cluster(door: httpx2.AsyncClient, cid: str = CID) -> Cluster:
    r = await door.get(cluster_url(cid), headers=ADMIN)
    assert r.status_code == 200, r.text
    return Cluster.model_validate(r.json())


async def get_pool(door: httpx2.AsyncClient, name: str, cid: str = CID) -> NodePool | None:
    """The pool of that name from the pool list (the active one when a deleting twin exists)."""
    r = await door.get(pools_url(cid), headers=ADMIN)
    assert r.status_code == 200, r.text
    pools = [NodePool.model_validate(item) for item in r.json()["items"] if item["name"] == name]
    pools.sort(key=lambda p: p.lifecycle != "active")
    return pools[0] if pools else None


async def get_state(door: httpx2.AsyncClient, cid: str = CID) -> ClusterState:
    r = await door.get(state_url(cid), headers=ADMIN)
    assert r.status_code == 200, r.text
    return ClusterState.model_validate(r.json())


async def catalog(door: httpx2.AsyncClient) -> dict[str, MachineTier]:
    r = await door.get(f"{API}/machine-tiers", headers=ADMIN)
    assert r.status_code == 200, r.text
    return {tier["id"]: MachineTier.model_validate(tier) for tier in r.json()["items"]}


async def settled_nodes(
    door: httpx2.AsyncClient, clock: ManualClock, cid: str = CID, pool: str | None = None
) -> NodeList:
    """A node snapshot taken now: lets any earlier snapshot go stale, then waits for the refresh.

    Moves the clock by TTL + 1 + refresh (33 s).
    """
    clock.advance(INVENTORY_TTL_S + 1)
    r = await door.get(nodes_url(cid, pool), headers=ADMIN)
    assert r.status_code == 200, r.text
    first = NodeList.model_validate(r.json())
    if first.fresh:
        return first
    clock.advance(INVENTORY_REFRESH_S)
    r = await door.get(nodes_url(cid, pool), headers=ADMIN)
    assert r.status_code == 200, r.text
    fresh = NodeList.model_validate(r.json())
    assert fresh.fresh, f"the queued refresh did not land after {INVENTORY_REFRESH_S} s: {fresh}"
    return fresh


# --- the admin plane -----------------------------------------------------------------------------


async def set_credit(door: httpx2.AsyncClient, credit: float, organisation: str = ORG) -> None:
    r = await door.put(f"/_reference/organisations/{organisation}", json={"credit": credit}, headers=REF)
    assert r.status_code == 200, r.text


async def fund(door: httpx2.AsyncClient) -> None:
    """Give the demo organisation more credit than any test can spend (R-CREDIT-01 out of the way)."""
    await set_credit(door, 10_000_000.0)


async def set_phase(door: httpx2.AsyncClient, phase: str, cid: str = CID) -> None:
    r = await door.put(f"/_reference/clusters/{cid}/phase", json={"phase": phase}, headers=REF)
    assert r.status_code == 200, r.text


async def set_token(door: httpx2.AsyncClient, token: str, organisation: str, role: str, user: str) -> dict[str, str]:
    r = await door.put(
        f"/_reference/tokens/{token}",
        json={"organisation": organisation, "role": role, "user": user},
        headers=REF,
    )
    assert r.status_code == 200, r.text
    return auth(token)


async def set_inventory(door: httpx2.AsyncClient, available: bool) -> None:
    r = await door.put("/_reference/inventory", json={"available": available}, headers=REF)
    assert r.status_code == 200, r.text


async def make_cluster(
    door: httpx2.AsyncClient,
    name: str,
    pools: list[dict[str, Any]],
    *,
    organisation: str = ORG,
    phase: str = "Provisioned",
) -> Cluster:
    """A cluster whose workers are born Running, so no operation is in flight."""
    r = await door.post(
        "/_reference/clusters",
        json={"name": name, "organisation": organisation, "phase": phase, "node_pools": pools},
        headers=REF,
    )
    assert r.status_code == 201, r.text
    return Cluster.model_validate(r.json())


# --- mutations -----------------------------------------------------------------------------------


async def add_pool(
    door: httpx2.AsyncClient, body: dict[str, Any], cid: str = CID, headers: dict[str, str] | None = None
) -> httpx2.Response:
    return await door.post(pools_url(cid), json=body, headers=headers or ADMIN)


async def patch_pool(
    door: httpx2.AsyncClient,
    name: str,
    body: Any,
    cid: str = CID,
    headers: dict[str, str] | None = None,
) -> httpx2.Response:
    return await door.patch(pool_url(name, cid), json=body, headers=headers or ADMIN)


async def delete_pool(
    door: httpx2.AsyncClient, name: str, cid: str = CID, headers: dict[str, str] | None = None
) -> httpx2.Response:
    return await door.delete(pool_url(name, cid), headers=headers or ADMIN)


async def replace_node(
    door: httpx2.AsyncClient, node_name: str, cid: str = CID, headers: dict[str, str] | None = None
) -> httpx2.Response:
    return await door.delete(node_url(node_name, cid), headers=headers or ADMIN)


def accepted_cluster(response: httpx2.Response) -> Cluster:
    """Assert a 202 carrying the full cluster body, and parse it."""
    assert response.status_code == 202, response.text
    return Cluster.model_validate(response.json())


async def add_running_pool(
    door: httpx2.AsyncClient, clock: ManualClock, name: str, size: str = "dks.c5.xlarge", count: int = 1
) -> None:
    """Add a pool on the demo cluster and move the clock until its workers run and its operation ends."""
    await fund(door)
    accepted_cluster(await add_pool(door, {"name": name, "size": size, "count": count}))
    clock.advance(SETTLE_S)
    state = await get_state(door)
    assert not [op for op in state.running() if op.target == name], state
