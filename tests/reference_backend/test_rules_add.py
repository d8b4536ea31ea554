"""Add a pool (POST /clusters/{id}/node-pools → 202 + cluster): R-ADD-01..10."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from backend_client.models import Cluster
from backend_client.rules import MSG_MAX_REQUIRED
from reference_backend import seed
from reference_backend.clock import ManualClock
from tests.conftest import auth
from tests.reference_backend.rules_helpers import (
    ADMIN,
    CID,
    SETTLE_S,
    accepted_cluster,
    add_pool,
    add_running_pool,
    delete_pool,
    fund,
    get_cluster,
    get_state,
    make_cluster,
    pools_url,
    problem,
    set_credit,
    set_token,
    settled_nodes,
)

pytestmark = pytest.mark.anyio


async def _batch_count(door: httpx2.AsyncClient, name: str = "batch") -> int:
    items = (await door.get(pools_url(), headers=ADMIN)).json()["items"]
    return sum(1 for item in items if item["name"] == name)


# --- R-ADD-01 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["Batch", "-batch", "batch-", "batch_1", "batch.1", "bätch", "a" * 64, "", "two words"],
)
async def test_r_add_01_malformed_name_is_422(door: httpx2.AsyncClient, name: str) -> None:
    """R-ADD-01: a name that is not an RFC 1123 DNS label → 422 naming `name`; no pool appears."""
    await fund(door)
    problem(await add_pool(door, {"name": name, "size": "dks.c5.xlarge"}), 422, "R-ADD-01", field="name")
    assert len((await get_cluster(door)).node_pools) == 1


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"count": 3.0}, (3, False, None, None)),
        ({"count": 4.0, "auto_scale": True, "min_nodes": 2.0, "max_nodes": 170.0}, (4, True, 2, 170)),
        ({"count": 1e1}, (10, False, None, None)),
    ],
)
async def test_r_add_04_a_whole_number_float_is_an_integer(
    door: httpx2.AsyncClient, body: dict[str, Any], expected: tuple[object, ...]
) -> None:
    """R-ADD-04 / R-ADD-06: the schema says "integer", and in JSON Schema `170.0` is one; it is
    accepted and stored as the integer."""
    await fund(door)
    cluster = accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.c5.large"} | body))
    pool = cluster.pool("batch")
    assert pool is not None
    assert (pool.count, pool.auto_scale, pool.min_nodes, pool.max_nodes) == expected
    assert all(type(value) is int for value in (pool.count, pool.min_nodes, pool.max_nodes) if value is not None)


@pytest.mark.parametrize("count", [2.5, True, "3", 1e300])
async def test_r_add_04_a_fraction_a_bool_or_a_string_is_not_a_count(door: httpx2.AsyncClient, count: object) -> None:
    """R-ADD-04: `2.5`, `true` and `"3"` are not integers (422), nor is a whole float beyond the range."""
    await fund(door)
    problem(await add_pool(door, {"name": "batch", "size": "dks.c5.large", "count": count}), 422, "R-ADD-04")


@pytest.mark.parametrize("name", ["other\n", "batch\n", "\nbatch", "batch\r\n"])
async def test_r_add_01_a_name_with_a_newline_is_422(door: httpx2.AsyncClient, name: str) -> None:
    """R-ADD-01: the whole name must be a DNS label; Python's `$` matching before a final newline
    once let `"other\\n"` through as a pool name."""
    await fund(door)
    problem(await add_pool(door, {"name": name, "size": "dks.c5.xlarge"}), 422, "R-ADD-01", field="name")
    assert [p.name for p in (await get_cluster(door)).node_pools] == ["workers"]


@pytest.mark.parametrize("name", ["a", "b2", "batch-1", "0pool", "a" * 63])
async def test_r_add_01_dns_label_names_are_accepted(door: httpx2.AsyncClient, name: str) -> None:
    """R-ADD-01: 1 to 63 of [a-z0-9-], starting and ending alphanumeric → 202."""
    await fund(door)
    cluster = accepted_cluster(await add_pool(door, {"name": name, "size": "dks.c5.xlarge"}))
    assert cluster.pool(name) is not None


async def test_r_add_01_missing_name_is_422(door: httpx2.AsyncClient) -> None:
    """R-ADD-01: `name` is required → 422 naming it."""
    await fund(door)
    problem(await add_pool(door, {"size": "dks.c5.xlarge"}), 422, field="name")


# --- R-ADD-02 ------------------------------------------------------------------------------------


async def test_r_add_02_name_of_an_alive_pool_is_409(door: httpx2.AsyncClient) -> None:
    """R-ADD-02: adding `workers` again → 409; still one pool named workers."""
    await fund(door)
    problem(await add_pool(door, {"name": "workers", "size": "dks.m5.xlarge"}), 409, "R-ADD-02")
    assert await _batch_count(door, "workers") == 1


async def test_r_add_02_name_of_a_deleting_pool_is_free(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-ADD-02 decision: a pool still `deleting` does not block its name; the new pool is a new id."""
    await add_running_pool(door, clock, "batch")
    old = (await get_cluster(door)).pool("batch")
    assert old is not None
    assert (await delete_pool(door, "batch")).status_code == 202
    cluster = accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.m5.xlarge"}))
    new = cluster.pool("batch")
    assert new is not None and new.id != old.id and new.size == "dks.m5.xlarge"
    lifecycles = sorted(p.lifecycle for p in cluster.node_pools if p.name == "batch")
    assert lifecycles in (["active"], ["active", "deleting"])


async def test_r_add_02_name_clash_is_checked_within_one_cluster(door: httpx2.AsyncClient) -> None:
    """R-ADD-02: `workers` exists on payments-prod, yet another cluster may add its own `workers`."""
    await fund(door)
    other = await make_cluster(door, "ledger", [{"name": "a", "size": "dks.c5.xlarge", "count": 1}])
    cluster = accepted_cluster(await add_pool(door, {"name": "workers", "size": "dks.c5.xlarge"}, cid=other.id))
    assert cluster.pool("workers") is not None
    problem(await add_pool(door, {"name": "workers", "size": "dks.c5.xlarge"}), 409, "R-ADD-02")


# --- R-ADD-03 ------------------------------------------------------------------------------------


async def test_r_add_03_unknown_tier_is_400(door: httpx2.AsyncClient) -> None:
    """R-ADD-03: a size that is not a catalog tier id → 400; no pool appears."""
    await fund(door)
    problem(await add_pool(door, {"name": "batch", "size": "dks.z9.mega"}), 400, "R-ADD-03")
    assert await _batch_count(door) == 0


async def test_r_add_03_size_is_required(door: httpx2.AsyncClient) -> None:
    """R-ADD-03: `size` is required → 422 naming it."""
    await fund(door)
    problem(await add_pool(door, {"name": "batch"}), 422, field="size")


async def test_r_add_03_every_catalog_tier_is_accepted(door: httpx2.AsyncClient) -> None:
    """R-ADD-03: each tier id from GET /machine-tiers is a valid size."""
    await fund(door)
    tiers = (await door.get("/v1/public/machine-tiers", headers=ADMIN)).json()["items"]
    assert tiers
    for i, tier in enumerate(tiers):
        r = await add_pool(door, {"name": f"tier-{i}", "size": tier["id"]})
        assert r.status_code == 202, (tier["id"], r.text)


# --- R-ADD-04 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [-1, 201, 1000])
async def test_r_add_04_count_outside_0_to_200_is_422(door: httpx2.AsyncClient, count: int) -> None:
    """R-ADD-04: count outside 0–200 → 422 naming `count`."""
    await fund(door)
    problem(
        await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge", "count": count}), 422, "R-ADD-04", field="count"
    )
    assert await _batch_count(door) == 0


@pytest.mark.parametrize("count", ["2", 2.5, None, True])
async def test_r_add_04_count_must_be_an_int(door: httpx2.AsyncClient, count: Any) -> None:
    """R-ADD-04: count is an int; a string, float, null or bool → 422 naming `count`."""
    await fund(door)
    problem(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge", "count": count}), 422, field="count")


async def test_r_add_04_count_defaults_to_1(door: httpx2.AsyncClient) -> None:
    """R-ADD-04: count omitted → 1."""
    await fund(door)
    pool = accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge"})).pool("batch")
    assert pool is not None and pool.count == 1


async def test_r_add_04_count_200_is_the_upper_bound(door: httpx2.AsyncClient) -> None:
    """R-ADD-04: count=200 is inside the range → 202."""
    await fund(door)
    pool = accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.c5.large", "count": 200})).pool("batch")
    assert pool is not None and pool.count == 200


# --- R-ADD-05 ------------------------------------------------------------------------------------


async def test_r_add_05_count_zero_without_autoscaling_is_422(door: httpx2.AsyncClient) -> None:
    """R-ADD-05: count=0 with auto_scale false (default) → 422 naming `count`."""
    await fund(door)
    problem(
        await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge", "count": 0}), 422, "R-ADD-05", field="count"
    )
    problem(
        await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge", "count": 0, "auto_scale": False}),
        422,
        "R-ADD-05",
        field="count",
    )
    assert await _batch_count(door) == 0


async def test_r_add_05_count_zero_with_autoscaling_is_accepted(door: httpx2.AsyncClient) -> None:
    """R-ADD-05: count=0 with auto_scale true and bounds [0, 3] → 202."""
    await fund(door)
    body = {"name": "batch", "size": "dks.c5.xlarge", "count": 0, "auto_scale": True, "min_nodes": 0, "max_nodes": 3}
    pool = accepted_cluster(await add_pool(door, body)).pool("batch")
    assert pool is not None
    assert (pool.count, pool.auto_scale, pool.min_nodes, pool.max_nodes) == (0, True, 0, 3)


# --- R-ADD-06 ------------------------------------------------------------------------------------


async def test_r_add_06_autoscaling_defaults_off_without_bounds(door: httpx2.AsyncClient) -> None:
    """R-ADD-06: auto_scale defaults to false; min_nodes and max_nodes stay null."""
    await fund(door)
    pool = accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge"})).pool("batch")
    assert pool is not None
    assert (pool.auto_scale, pool.min_nodes, pool.max_nodes) == (False, None, None)


async def test_r_add_06_min_nodes_null_becomes_1_when_autoscaling(door: httpx2.AsyncClient) -> None:
    """R-ADD-06: auto_scale true, min_nodes omitted → min_nodes 1."""
    await fund(door)
    body = {"name": "batch", "size": "dks.c5.xlarge", "count": 2, "auto_scale": True, "max_nodes": 4}
    pool = accepted_cluster(await add_pool(door, body)).pool("batch")
    assert pool is not None and (pool.min_nodes, pool.max_nodes) == (1, 4)


async def test_r_add_06_max_nodes_required_when_autoscaling(door: httpx2.AsyncClient) -> None:
    """R-ADD-06: auto_scale true without max_nodes → 422 "max_nodes is required when auto_scale=true"."""
    await fund(door)
    body = {"name": "batch", "size": "dks.c5.xlarge", "auto_scale": True}
    p = problem(await add_pool(door, body), 422, "R-ADD-06", field="max_nodes")
    assert any(MSG_MAX_REQUIRED in e.message for e in p.errors) or MSG_MAX_REQUIRED in (p.detail or ""), p


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"min_nodes": -1, "max_nodes": 3}, "min_nodes"),
        ({"min_nodes": 4, "max_nodes": 2, "count": 3}, None),
        ({"min_nodes": 2, "max_nodes": 4, "count": 5}, "count"),
        ({"min_nodes": 2, "max_nodes": 4, "count": 1}, "count"),
    ],
    ids=["min-negative", "min-above-max", "count-above-max", "count-below-min"],
)
async def test_r_add_06_bounds_breaks_are_422(
    door: httpx2.AsyncClient, extra: dict[str, int], field: str | None
) -> None:
    """R-ADD-06: min_nodes < 0, max_nodes < min_nodes, count outside [min, max] → 422."""
    await fund(door)
    body = {"name": "batch", "size": "dks.c5.xlarge", "auto_scale": True, **extra}
    p = problem(await add_pool(door, body), 422, "R-ADD-06", field=field)
    assert p.errors, p
    if field is None:
        assert any(e.field.endswith(("min_nodes", "max_nodes")) for e in p.errors), p.errors
    assert await _batch_count(door) == 0


async def test_r_add_06_bounds_on_the_edges_are_accepted(door: httpx2.AsyncClient) -> None:
    """R-ADD-06: count == min_nodes == max_nodes is inside the range → 202."""
    await fund(door)
    body = {"name": "batch", "size": "dks.c5.xlarge", "auto_scale": True, "min_nodes": 3, "max_nodes": 3, "count": 3}
    accepted_cluster(await add_pool(door, body))


# --- R-ADD-07 ------------------------------------------------------------------------------------


async def test_r_add_07_labels_and_tags_default_to_empty_maps(door: httpx2.AsyncClient) -> None:
    """R-ADD-07: labels and tags omitted → {}."""
    await fund(door)
    pool = accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge"})).pool("batch")
    assert pool is not None and pool.labels == {} and pool.tags == {}


@pytest.mark.parametrize("field", ["color", "id", "lifecycle", "nodes"])
async def test_r_add_07_unknown_field_is_422(door: httpx2.AsyncClient, field: str) -> None:
    """R-ADD-07: an unknown field → 422 naming it; no pool appears."""
    await fund(door)
    problem(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge", field: "x"}), 422, field=field)
    assert await _batch_count(door) == 0


# --- R-ADD-08 ------------------------------------------------------------------------------------


async def test_r_add_08_no_credit_for_the_new_pool_is_402(door: httpx2.AsyncClient) -> None:
    """R-ADD-08: prepaid credit 0 cannot cover a new pool → 402; no pool appears."""
    await set_credit(door, 0)
    problem(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge"}), 402, {"R-CREDIT-01", "R-ADD-08"})
    assert await _batch_count(door) == 0


async def test_r_add_08_enough_credit_lets_the_pool_in(door: httpx2.AsyncClient) -> None:
    """R-ADD-08: with credit for one dks.c5.xlarge for 24 h the same add → 202."""
    tiers = (await door.get("/v1/public/machine-tiers", headers=ADMIN)).json()["items"]
    price = next(t["price_per_hour"] for t in tiers if t["id"] == "dks.c5.xlarge")
    await set_credit(door, round(price * 24, 2) + 0.01)
    accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge"}))


# --- R-ADD-09 ------------------------------------------------------------------------------------


async def test_r_add_09_same_key_same_body_replays_without_a_second_pool(door: httpx2.AsyncClient) -> None:
    """R-ADD-09: the same Idempotency-Key and body replays the first 202 (marked replayed); one pool only."""
    await fund(door)
    body = {"name": "batch", "size": "dks.c5.xlarge", "count": 1}
    headers = {**ADMIN, "Idempotency-Key": "card-0001"}
    first = await add_pool(door, body, headers=headers)
    assert first.status_code == 202, first.text
    second = await add_pool(door, body, headers=headers)
    assert second.status_code == 202, second.text
    assert second.json() == first.json()
    assert second.headers.get("idempotent-replayed") == "true"
    assert first.headers.get("idempotent-replayed") in (None, "false")
    assert await _batch_count(door) == 1
    creates = [op for op in (await get_state(door)).operations if op.kind == "pool.create"]
    assert len(creates) == 1


async def test_r_add_09_same_key_different_body_is_422(door: httpx2.AsyncClient) -> None:
    """R-ADD-09 decision: the same key with another body → 422; only the first pool exists."""
    await fund(door)
    headers = {**ADMIN, "Idempotency-Key": "card-0002"}
    accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge"}, headers=headers))
    problem(await add_pool(door, {"name": "other", "size": "dks.c5.xlarge"}, headers=headers), 422, "R-ADD-09")
    assert await _batch_count(door, "other") == 0


async def test_r_add_09_without_key_a_repeat_is_a_new_request(door: httpx2.AsyncClient) -> None:
    """R-ADD-09: without Idempotency-Key the same add again is a name clash (409), not a replay."""
    await fund(door)
    body = {"name": "batch", "size": "dks.c5.xlarge"}
    accepted_cluster(await add_pool(door, body))
    problem(await add_pool(door, body), 409, "R-ADD-02")


async def test_r_add_09_keys_are_per_token(door: httpx2.AsyncClient) -> None:
    """R-ADD-09 decision: another token's same key is not a replay (here it meets the name clash, 409)."""
    await fund(door)
    other_admin = await set_token(door, "second-admin-token", seed.DEMO_ORGANISATION, "super_admin", "bo")
    body = {"name": "batch", "size": "dks.c5.xlarge"}
    accepted_cluster(await add_pool(door, body, headers={**ADMIN, "Idempotency-Key": "card-0003"}))
    r = await add_pool(door, body, headers={**other_admin, "Idempotency-Key": "card-0003"})
    problem(r, 409, "R-ADD-02")
    assert await _batch_count(door) == 1


async def test_r_add_09_keys_are_forgotten_after_24_hours(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-ADD-09 decision: a key is remembered 24 h; after that the same request is new (409 name clash)."""
    await fund(door)
    body = {"name": "batch", "size": "dks.c5.xlarge"}
    headers = {**ADMIN, "Idempotency-Key": "card-0004"}
    accepted_cluster(await add_pool(door, body, headers=headers))
    clock.advance(23 * 3600)
    replay = await add_pool(door, body, headers=headers)
    assert replay.status_code == 202, replay.text
    clock.advance(3600 + 60)
    problem(await add_pool(door, body, headers=headers), 409, "R-ADD-02")


async def test_r_add_09_refusals_are_not_remembered(door: httpx2.AsyncClient) -> None:
    """R-ADD-09: only 2xx answers are stored: a 402 under a key, then credit, then the same key → 202."""
    await set_credit(door, 0)
    body = {"name": "batch", "size": "dks.c5.xlarge"}
    headers = {**ADMIN, "Idempotency-Key": "card-0005"}
    problem(await add_pool(door, body, headers=headers), 402)
    await fund(door)
    accepted_cluster(await add_pool(door, body, headers=headers))


# --- R-ADD-10 ------------------------------------------------------------------------------------


async def test_r_add_10_new_pool_is_active_at_once_in_the_full_cluster_body(door: httpx2.AsyncClient) -> None:
    """R-ADD-10: the 202 is the full cluster body with the new pool active; the pool list shows it too."""
    await fund(door)
    r = await add_pool(door, {"name": "batch", "size": "dks.m5.xlarge", "count": 2})
    cluster = accepted_cluster(r)
    assert cluster.id == CID
    assert {p.name for p in cluster.node_pools} == {"workers", "batch"}
    pool = cluster.pool("batch")
    assert pool is not None and pool.lifecycle == "active" and pool.count == 2
    listed = (await door.get(pools_url(), headers=ADMIN)).json()["items"]
    assert any(i["name"] == "batch" and i["lifecycle"] == "active" for i in listed)
    Cluster.model_validate((await door.get(f"/v1/public/clusters/{CID}", headers=auth(seed.DEMO_MEMBER_TOKEN))).json())


async def test_r_add_10_workers_are_provisioned_in_the_background(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-ADD-10: a pool.create operation runs, then succeeds once the workers are Running."""
    await fund(door)
    accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.m5.xlarge", "count": 2}))
    op = next(op for op in (await get_state(door)).operations if op.target == "batch")
    assert op.kind == "pool.create" and op.status == "running"
    clock.advance(SETTLE_S)
    done = next(o for o in (await get_state(door)).operations if o.id == op.id)
    assert done.status == "succeeded", done
    nodes = await settled_nodes(door, clock, pool="batch")
    assert len(nodes.items) == 2
    assert all(n.pool == "batch" and n.status == "Running" and n.ready for n in nodes.items), nodes.items
