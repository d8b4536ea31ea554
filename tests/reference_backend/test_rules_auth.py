"""Who may do what: R-AUTH-01..04, against the reference backend over ASGI."""

from __future__ import annotations

import httpx2
import pytest

from reference_backend import seed
from tests.conftest import auth
from tests.reference_backend.rules_helpers import (
    ADMIN,
    API,
    CID,
    MEMBER,
    OUTSIDER,
    REF,
    UNKNOWN_CID,
    add_pool,
    cluster_url,
    delete_pool,
    fund,
    get_pool,
    nodes_url,
    patch_pool,
    pools_url,
    problem,
    replace_node,
    set_phase,
    set_token,
    state_url,
)

pytestmark = pytest.mark.anyio

READS = [
    cluster_url(),
    state_url(),
    pools_url(),
    nodes_url(),
    nodes_url(pool="workers"),
]


# --- R-AUTH-01 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("url", READS)
async def test_r_auth_01_read_without_token_is_401(door: httpx2.AsyncClient, url: str) -> None:
    """R-AUTH-01: a request without a bearer token names nobody → 401, not 403."""
    problem(await door.get(url), 401, "R-AUTH-01")


async def test_r_auth_01_unknown_token_is_401(door: httpx2.AsyncClient) -> None:
    """R-AUTH-01: an unknown bearer token → 401."""
    problem(await door.get(pools_url(), headers=auth("nobody-knows-this-token")), 401, "R-AUTH-01")


async def test_r_auth_01_mutation_without_token_is_401_and_changes_nothing(door: httpx2.AsyncClient) -> None:
    """R-AUTH-01: a PATCH without a token → 401; the pool keeps its count."""
    problem(await door.patch(f"{pools_url()}/workers", json={"count": 3}), 401, "R-AUTH-01")
    problem(await door.delete(f"{API}/clusters/{CID}/nodes/{seed.DEMO_NODE_NAME}"), 401, "R-AUTH-01")
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.count == 2


async def test_r_auth_01_malformed_authorization_header_is_401(door: httpx2.AsyncClient) -> None:
    """R-AUTH-01: a header that is not `Bearer <token>` names nobody → 401."""
    problem(await door.get(pools_url(), headers={"Authorization": f"Basic {seed.DEMO_ADMIN_TOKEN}"}), 401, "R-AUTH-01")


async def test_r_auth_01_revoked_token_is_401(door: httpx2.AsyncClient) -> None:
    """R-AUTH-01: a token removed through the admin plane is unknown from then on → 401."""
    headers = await set_token(door, "short-lived-token", seed.DEMO_ORGANISATION, "member", "temp")
    assert (await door.get(pools_url(), headers=headers)).status_code == 200
    r = await door.delete("/_reference/tokens/short-lived-token", headers=REF)
    assert r.status_code == 204, r.text
    problem(await door.get(pools_url(), headers=headers), 401, "R-AUTH-01")


async def test_r_auth_01_no_token_for_unknown_cluster_is_401_not_404(door: httpx2.AsyncClient) -> None:
    """R-AUTH-01 before R-AUTH-04: the token is checked before the cluster is looked up."""
    problem(await door.get(cluster_url(UNKNOWN_CID)), 401, "R-AUTH-01")


# --- R-AUTH-02 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("url", READS)
async def test_r_auth_02_member_may_read(door: httpx2.AsyncClient, url: str) -> None:
    """R-AUTH-02: a member of the cluster's organisation reads pools, nodes, cluster and state → 200."""
    r = await door.get(url, headers=MEMBER)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("url", READS)
async def test_r_auth_02_non_member_read_is_403(door: httpx2.AsyncClient, url: str) -> None:
    """R-AUTH-02: a member of another organisation reading an existing cluster → 403."""
    problem(await door.get(url, headers=OUTSIDER), 403, {"R-AUTH-02", "R-AUTH-04"})


async def test_r_auth_02_catalog_is_readable_by_any_member(door: httpx2.AsyncClient) -> None:
    """R-AUTH-02: the catalog belongs to no cluster; members of any organisation read it."""
    for headers in (ADMIN, MEMBER, OUTSIDER):
        r = await door.get(f"{API}/machine-tiers", headers=headers)
        assert r.status_code == 200, r.text
        assert any(tier["id"] == "dks.c5.xlarge" for tier in r.json()["items"])


async def test_r_auth_02_cluster_list_shows_only_own_organisation(door: httpx2.AsyncClient) -> None:
    """R-AUTH-02: GET /clusters lists the caller's organisation only; an outsider never sees payments-prod."""
    mine = await door.get(f"{API}/clusters", headers=MEMBER)
    assert mine.status_code == 200, mine.text
    assert CID in {c["id"] for c in mine.json()["items"]}
    theirs = await door.get(f"{API}/clusters", headers=OUTSIDER)
    assert theirs.status_code == 200, theirs.text
    assert CID not in {c["id"] for c in theirs.json()["items"]}


async def test_r_auth_02_super_admin_of_another_organisation_cannot_mutate(door: httpx2.AsyncClient) -> None:
    """R-AUTH-02: super_admin of acme is no member of payments → 403 on payments' pools; nothing changes."""
    acme_admin = await set_token(door, "acme-admin-token", "acme", "super_admin", "wile")
    await fund(door)
    problem(await patch_pool(door, "workers", {"count": 3}, headers=acme_admin), 403, {"R-AUTH-02", "R-AUTH-04"})
    problem(
        await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge"}, headers=acme_admin),
        403,
        {"R-AUTH-02", "R-AUTH-04"},
    )
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.count == 2
    assert await get_pool(door, "batch") is None


# --- R-AUTH-03 -----------------------------------------------------------------------------------


async def test_r_auth_03_member_cannot_add_pool(door: httpx2.AsyncClient) -> None:
    """R-AUTH-03: a member adding a pool → 403; no pool appears."""
    await fund(door)
    problem(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge"}, headers=MEMBER), 403, "R-AUTH-03")
    assert await get_pool(door, "batch") is None


async def test_r_auth_03_member_cannot_patch_pool(door: httpx2.AsyncClient) -> None:
    """R-AUTH-03: a member patching a pool → 403; the count is unchanged."""
    problem(await patch_pool(door, "workers", {"count": 3}, headers=MEMBER), 403, "R-AUTH-03")
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.count == 2


async def test_r_auth_03_member_cannot_remove_pool(door: httpx2.AsyncClient) -> None:
    """R-AUTH-03: a member removing a pool → 403; the pool stays active."""
    problem(await delete_pool(door, "workers", headers=MEMBER), 403, "R-AUTH-03")
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.lifecycle == "active"


async def test_r_auth_03_member_cannot_delete_node(door: httpx2.AsyncClient) -> None:
    """R-AUTH-03: a member deleting a node → 403."""
    problem(await replace_node(door, seed.DEMO_NODE_NAME, headers=MEMBER), 403, "R-AUTH-03")


async def test_r_auth_03_super_admin_may_mutate(door: httpx2.AsyncClient) -> None:
    """R-AUTH-03: the same PATCH by super_admin of the organisation → 202."""
    await fund(door)
    r = await patch_pool(door, "workers", {"labels": {"team": "payments"}})
    assert r.status_code == 202, r.text


async def test_r_auth_03_role_is_checked_before_the_body(door: httpx2.AsyncClient) -> None:
    """R-AUTH-03 before R-PATCH-02: a member's empty PATCH is 403, not 422."""
    problem(await patch_pool(door, "workers", {}, headers=MEMBER), 403, "R-AUTH-03")
    problem(await replace_node(door, "Not_A_Node", headers=MEMBER), 403, "R-AUTH-03")


# --- R-AUTH-04 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [cluster_url(UNKNOWN_CID), state_url(UNKNOWN_CID), pools_url(UNKNOWN_CID), nodes_url(UNKNOWN_CID)],
)
async def test_r_auth_04_unknown_cluster_is_404(door: httpx2.AsyncClient, url: str) -> None:
    """R-AUTH-04: an unknown cluster id → 404 for a member of any organisation."""
    problem(await door.get(url, headers=ADMIN), 404, "R-AUTH-04")


async def test_r_auth_04_mutating_unknown_cluster_is_404(door: httpx2.AsyncClient) -> None:
    """R-AUTH-04: mutations on an unknown cluster → 404."""
    problem(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge"}, cid=UNKNOWN_CID), 404, "R-AUTH-04")
    problem(await patch_pool(door, "workers", {"count": 3}, cid=UNKNOWN_CID), 404, "R-AUTH-04")
    problem(await delete_pool(door, "workers", cid=UNKNOWN_CID), 404, "R-AUTH-04")
    problem(await replace_node(door, "some-node", cid=UNKNOWN_CID), 404, "R-AUTH-04")


async def test_r_auth_04_non_member_gets_404_for_unknown_but_403_for_existing(door: httpx2.AsyncClient) -> None:
    """R-AUTH-04 decision: an outsider asking for a cluster that does not exist → 404, one that exists → 403."""
    problem(await door.get(cluster_url(UNKNOWN_CID), headers=OUTSIDER), 404, "R-AUTH-04")
    problem(await door.get(cluster_url(CID), headers=OUTSIDER), 403, {"R-AUTH-02", "R-AUTH-04"})


async def test_r_auth_04_torn_down_cluster_is_404(door: httpx2.AsyncClient) -> None:
    """R-AUTH-04: a cluster torn down (phase Deprovisioned) → 404 on reads and mutations."""
    await set_phase(door, "Deprovisioned")
    problem(await door.get(cluster_url(), headers=ADMIN), 404, "R-AUTH-04")
    problem(await door.get(pools_url(), headers=ADMIN), 404, "R-AUTH-04")
    problem(await patch_pool(door, "workers", {"count": 3}), 404, "R-AUTH-04")
