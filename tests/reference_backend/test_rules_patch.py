"""Change a pool (PATCH /clusters/{id}/node-pools/{name} → 202 + cluster): R-PATCH-01..10."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from backend_client.rules import MSG_COUNT_ZERO, MSG_EMPTY_PATCH, MSG_MAX_REQUIRED
from reference_backend.clock import ManualClock
from tests.reference_backend.rules_helpers import (
    ADMIN,
    LABELS_ONLY_S,
    SETTLE_S,
    accepted_cluster,
    add_pool,
    add_running_pool,
    delete_pool,
    fund,
    get_pool,
    get_state,
    patch_pool,
    pool_url,
    problem,
    says,
    set_credit,
    set_phase,
    settled_nodes,
    texts,
)

pytestmark = pytest.mark.anyio


async def _autoscaling_workers(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """Turn the demo pool into autoscaling [2, 6] at count 2 (the page's example) and let it settle."""
    await fund(door)
    accepted_cluster(
        await patch_pool(door, "workers", {"auto_scale": True, "min_nodes": 2, "max_nodes": 6, "count": 2})
    )
    clock.advance(SETTLE_S)


# --- R-PATCH-01 ----------------------------------------------------------------------------------


async def test_r_patch_01_size_is_immutable_422(door: httpx2.AsyncClient) -> None:
    """R-PATCH-01: PATCH with `size` → 422 naming `size`; the pool keeps its tier."""
    await fund(door)
    problem(await patch_pool(door, "workers", {"size": "dks.m5.xlarge"}), 422, "R-PATCH-01", field="size")
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.size == "dks.c5.xlarge"


async def test_r_patch_01_size_alongside_valid_fields_is_still_422(door: httpx2.AsyncClient) -> None:
    """R-PATCH-01: `size` with a valid `count` → 422; nothing of the patch is applied."""
    await fund(door)
    problem(await patch_pool(door, "workers", {"count": 3, "size": "dks.m5.xlarge"}), 422, "R-PATCH-01", field="size")
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.count == 2


@pytest.mark.parametrize("field", ["name", "id", "lifecycle", "colour"])
async def test_r_patch_01_other_fields_are_422(door: httpx2.AsyncClient, field: str) -> None:
    """R-PATCH-01: any field outside count, auto_scale, min_nodes, max_nodes, labels, tags → 422 naming it."""
    problem(await patch_pool(door, "workers", {field: "x"}), 422, "R-PATCH-01", field=field)


@pytest.mark.parametrize(
    ("body", "field"),
    [({"count": "3"}, "count"), ({"auto_scale": "yes"}, "auto_scale"), ({"labels": "a=b"}, "labels")],
)
async def test_r_patch_01_wrong_types_are_422(door: httpx2.AsyncClient, body: dict[str, Any], field: str) -> None:
    """R-PATCH-01: the mutable fields keep their types; a string count → 422 naming `count`."""
    problem(await patch_pool(door, "workers", body), 422, field=field)


@pytest.mark.parametrize(
    "body",
    [{"count": 3}, {"labels": {"a": "b"}}, {"tags": {"a": "b"}}, {"auto_scale": True, "max_nodes": 4}],
)
async def test_r_patch_01_mutable_fields_are_accepted(door: httpx2.AsyncClient, body: dict[str, Any]) -> None:
    """R-PATCH-01: each mutable field on its own → 202."""
    await fund(door)
    accepted_cluster(await patch_pool(door, "workers", body))


# --- R-PATCH-02 ----------------------------------------------------------------------------------


async def test_r_patch_02_patch_without_fields_is_422(door: httpx2.AsyncClient) -> None:
    """R-PATCH-02: `{}` → 422 "at least one of: count, auto_scale, min_nodes, max_nodes, labels, tags"."""
    p = problem(await patch_pool(door, "workers", {}), 422, "R-PATCH-02")
    assert says(p, MSG_EMPTY_PATCH), p
    assert MSG_EMPTY_PATCH == "at least one of: count, auto_scale, min_nodes, max_nodes, labels, tags"


async def test_r_patch_02_empty_patch_starts_no_operation(door: httpx2.AsyncClient) -> None:
    """R-PATCH-02: a refused empty patch leaves no operation behind."""
    problem(await patch_pool(door, "workers", {}), 422, "R-PATCH-02")
    assert not (await get_state(door)).operations


# --- R-PATCH-03 ----------------------------------------------------------------------------------


async def test_r_patch_03_omitted_fields_keep_their_value(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-PATCH-03: a count-only PATCH keeps labels, tags, size and autoscaling as stored."""
    await fund(door)
    accepted_cluster(await patch_pool(door, "workers", {"labels": {"team": "pay"}, "tags": {"cc": "42"}}))
    clock.advance(LABELS_ONLY_S + 1)
    cluster = accepted_cluster(await patch_pool(door, "workers", {"count": 3}))
    for pool in (cluster.pool("workers"), await get_pool(door, "workers")):
        assert pool is not None
        assert pool.count == 3
        assert pool.labels == {"team": "pay"} and pool.tags == {"cc": "42"}
        assert pool.size == "dks.c5.xlarge" and pool.auto_scale is False
        assert (pool.min_nodes, pool.max_nodes) == (None, None)


async def test_r_patch_03_labels_replace_the_stored_map(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-PATCH-03: sent labels replace the map (no merge); tags, not sent, are kept."""
    accepted_cluster(await patch_pool(door, "workers", {"labels": {"a": "1", "b": "2"}, "tags": {"t": "x"}}))
    clock.advance(LABELS_ONLY_S + 1)
    accepted_cluster(await patch_pool(door, "workers", {"labels": {"c": "3"}}))
    pool = await get_pool(door, "workers")
    assert pool is not None
    assert pool.labels == {"c": "3"}
    assert pool.tags == {"t": "x"}
    assert pool.count == 2


async def test_r_patch_03_empty_map_clears_tags(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-PATCH-03: sending `tags: {}` replaces the stored tags with nothing."""
    accepted_cluster(await patch_pool(door, "workers", {"tags": {"t": "x"}}))
    clock.advance(LABELS_ONLY_S + 1)
    accepted_cluster(await patch_pool(door, "workers", {"tags": {}}))
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.tags == {}


async def test_r_patch_03_count_only_patch_keeps_stored_bounds(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-PATCH-03: on an autoscaling pool a count-only PATCH keeps auto_scale, min_nodes and max_nodes."""
    await _autoscaling_workers(door, clock)
    accepted_cluster(await patch_pool(door, "workers", {"count": 4}))
    pool = await get_pool(door, "workers")
    assert pool is not None
    assert (pool.count, pool.auto_scale, pool.min_nodes, pool.max_nodes) == (4, True, 2, 6)


# --- R-PATCH-04 ----------------------------------------------------------------------------------


async def test_r_patch_04_autoscale_without_max_is_422(door: httpx2.AsyncClient) -> None:
    """R-PATCH-04: auto_scale=true with max_nodes missing after the merge → 422 "max_nodes is required when auto_scale=true"."""
    await fund(door)
    p = problem(await patch_pool(door, "workers", {"auto_scale": True}), 422, "R-PATCH-04", field="max_nodes")
    assert says(p, MSG_MAX_REQUIRED), p
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.auto_scale is False


async def test_r_patch_04_min_above_max_is_422(door: httpx2.AsyncClient) -> None:
    """R-PATCH-04: min_nodes > max_nodes → 422."""
    await fund(door)
    body = {"auto_scale": True, "min_nodes": 5, "max_nodes": 3, "count": 4}
    p = problem(await patch_pool(door, "workers", body), 422, "R-PATCH-04")
    assert p.errors, p


@pytest.mark.parametrize("count", [1, 7])
async def test_r_patch_04_count_outside_bounds_while_autoscaling_is_422(door: httpx2.AsyncClient, count: int) -> None:
    """R-PATCH-04: count outside [min_nodes, max_nodes] while autoscaling → 422 naming `count`."""
    await fund(door)
    body = {"auto_scale": True, "min_nodes": 2, "max_nodes": 6, "count": count}
    problem(await patch_pool(door, "workers", body), 422, "R-PATCH-04", field="count")


async def test_r_patch_04_count_zero_without_autoscaling_is_422(door: httpx2.AsyncClient) -> None:
    """R-PATCH-04: auto_scale off and count=0 → 422 "count=0 requires auto_scale=true (or use DELETE to remove the pool)"."""
    p = problem(await patch_pool(door, "workers", {"count": 0}), 422, "R-PATCH-04", field="count")
    assert says(p, MSG_COUNT_ZERO), p
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.count == 2


async def test_r_patch_04_the_merge_uses_stored_bounds(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-PATCH-04: on a pool autoscaling in [2, 6], `count: 7` alone → 422 (merged with the stored bounds)."""
    await _autoscaling_workers(door, clock)
    problem(await patch_pool(door, "workers", {"count": 7}), 422, "R-PATCH-04", field="count")
    problem(await patch_pool(door, "workers", {"max_nodes": 1}), 422, "R-PATCH-04")
    problem(await patch_pool(door, "workers", {"min_nodes": 7}), 422, "R-PATCH-04")
    pool = await get_pool(door, "workers")
    assert pool is not None and (pool.count, pool.min_nodes, pool.max_nodes) == (2, 2, 6)


async def test_r_patch_04_count_zero_with_autoscaling_from_zero_is_accepted(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-PATCH-04: count=0 is fine while autoscaling with min_nodes 0."""
    await fund(door)
    body = {"auto_scale": True, "min_nodes": 0, "max_nodes": 3, "count": 0}
    pool = accepted_cluster(await patch_pool(door, "workers", body)).pool("workers")
    assert pool is not None and (pool.count, pool.min_nodes, pool.max_nodes) == (0, 0, 3)


async def test_r_patch_04_page_example_turns_autoscaling_on(door: httpx2.AsyncClient) -> None:
    """R-PATCH-04: the page's example {auto_scale, min 2, max 6, count 2} → 202 and stored as sent."""
    await fund(door)
    pool = accepted_cluster(
        await patch_pool(door, "workers", {"auto_scale": True, "min_nodes": 2, "max_nodes": 6, "count": 2})
    ).pool("workers")
    assert pool is not None
    assert (pool.auto_scale, pool.min_nodes, pool.max_nodes, pool.count) == (True, 2, 6, 2)


# --- R-PATCH-05 ----------------------------------------------------------------------------------


async def test_r_patch_05_autoscale_on_without_min_fills_1(door: httpx2.AsyncClient) -> None:
    """R-PATCH-05: auto_scale on with only max_nodes → min_nodes 1; count kept."""
    await fund(door)
    pool = accepted_cluster(await patch_pool(door, "workers", {"auto_scale": True, "max_nodes": 4})).pool("workers")
    assert pool is not None
    assert (pool.auto_scale, pool.min_nodes, pool.max_nodes, pool.count) == (True, 1, 4, 2)
    stored = await get_pool(door, "workers")
    assert stored is not None and stored.min_nodes == 1


async def test_r_patch_05_max_nodes_may_come_from_the_stored_row(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-PATCH-05: on a pool that already has max_nodes, `auto_scale: true` plus a count needs no max in the request."""
    await _autoscaling_workers(door, clock)
    pool = accepted_cluster(await patch_pool(door, "workers", {"auto_scale": True, "count": 3})).pool("workers")
    assert pool is not None and (pool.min_nodes, pool.max_nodes, pool.count) == (2, 6, 3)


async def test_r_patch_05_max_from_neither_request_nor_row_is_422(door: httpx2.AsyncClient) -> None:
    """R-PATCH-05: the fixed-size demo pool has no max_nodes, so `auto_scale: true, min_nodes: 1` → 422."""
    await fund(door)
    p = problem(
        await patch_pool(door, "workers", {"auto_scale": True, "min_nodes": 1}), 422, {"R-PATCH-04", "R-PATCH-05"}
    )
    assert says(p, MSG_MAX_REQUIRED), p


# --- R-PATCH-06 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [-1, 201])
async def test_r_patch_06_count_outside_0_to_200_is_422(door: httpx2.AsyncClient, count: int) -> None:
    """R-PATCH-06: count outside 0–200 → 422 naming `count`."""
    await fund(door)
    problem(await patch_pool(door, "workers", {"count": count}), 422, "R-PATCH-06", field="count")


async def test_r_patch_06_count_200_is_accepted(door: httpx2.AsyncClient) -> None:
    """R-PATCH-06: count=200 → 202."""
    await fund(door)
    pool = accepted_cluster(await patch_pool(door, "workers", {"count": 200})).pool("workers")
    assert pool is not None and pool.count == 200


async def test_r_patch_06_autoscale_off_keeps_count_and_clears_bounds(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-PATCH-06 decision: turning autoscaling off keeps count and sets min_nodes/max_nodes to null."""
    await _autoscaling_workers(door, clock)
    accepted_cluster(await patch_pool(door, "workers", {"count": 4}))
    clock.advance(SETTLE_S)
    accepted_cluster(await patch_pool(door, "workers", {"auto_scale": False}))
    pool = await get_pool(door, "workers")
    assert pool is not None
    assert (pool.auto_scale, pool.count, pool.min_nodes, pool.max_nodes) == (False, 4, None, None)


# --- R-PATCH-07 ----------------------------------------------------------------------------------


async def test_r_patch_07_unknown_pool_is_404(door: httpx2.AsyncClient) -> None:
    """R-PATCH-07: PATCH on a pool name that does not exist → 404."""
    problem(await patch_pool(door, "nope", {"count": 3}), 404, "R-PATCH-07")


async def test_r_patch_07_deleting_pool_is_404(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-PATCH-07: PATCH on a pool already `deleting` → 404."""
    await add_running_pool(door, clock, "batch")
    assert (await delete_pool(door, "batch")).status_code == 202
    problem(await patch_pool(door, "batch", {"count": 3}), 404, "R-PATCH-07")


# --- R-PATCH-08 ----------------------------------------------------------------------------------


async def test_r_patch_08_not_provisioned_is_409(door: httpx2.AsyncClient) -> None:
    """R-PATCH-08: PATCH while the cluster is not Provisioned → 409 (R-PHASE-01)."""
    await set_phase(door, "ControlPlaneReady")
    problem(await patch_pool(door, "workers", {"count": 3}), 409, "R-PHASE-01")


async def test_r_patch_08_operation_in_flight_is_409(door: httpx2.AsyncClient) -> None:
    """R-PATCH-08: PATCH while the pool's previous operation runs → 409 (R-OP-01)."""
    await fund(door)
    accepted_cluster(await patch_pool(door, "workers", {"count": 3}))
    problem(await patch_pool(door, "workers", {"count": 4}), 409, "R-OP-01")


async def test_r_patch_08_raising_nodes_without_credit_is_402(door: httpx2.AsyncClient) -> None:
    """R-PATCH-08: a PATCH that raises effective nodes with no credit → 402; the count is unchanged."""
    await set_credit(door, 0)
    problem(await patch_pool(door, "workers", {"count": 3}), 402, {"R-CREDIT-01", "R-PATCH-08"})
    problem(
        await patch_pool(door, "workers", {"auto_scale": True, "min_nodes": 1, "max_nodes": 5}),
        402,
        {"R-CREDIT-01", "R-PATCH-08"},
    )
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.count == 2 and pool.auto_scale is False


@pytest.mark.parametrize("body", [{"count": 1}, {"labels": {"a": "b"}}, {"count": 2}])
async def test_r_patch_08_patch_that_does_not_raise_nodes_needs_no_credit(
    door: httpx2.AsyncClient, body: dict[str, Any]
) -> None:
    """R-PATCH-08: scale-down, same count or labels-only with credit 0 → 202."""
    await set_credit(door, 0)
    accepted_cluster(await patch_pool(door, "workers", body))


# --- R-PATCH-09 ----------------------------------------------------------------------------------


async def test_r_patch_09_same_key_same_patch_replays_the_202(door: httpx2.AsyncClient) -> None:
    """R-PATCH-09: same Idempotency-Key + same patch replays the first 202, even while its operation runs."""
    await fund(door)
    headers = {**ADMIN, "Idempotency-Key": "card-patch-1"}
    first = await patch_pool(door, "workers", {"count": 4}, headers=headers)
    assert first.status_code == 202, first.text
    again = await patch_pool(door, "workers", {"count": 4}, headers=headers)
    assert again.status_code == 202, again.text
    assert again.json() == first.json()
    assert again.headers.get("idempotent-replayed") == "true"
    updates = [op for op in (await get_state(door)).operations if op.kind == "pool.update"]
    assert len(updates) == 1


async def test_r_patch_09_same_key_other_patch_is_422(door: httpx2.AsyncClient) -> None:
    """R-PATCH-09: same key with a different patch body → 422; the first patch stands."""
    await fund(door)
    headers = {**ADMIN, "Idempotency-Key": "card-patch-2"}
    accepted_cluster(await patch_pool(door, "workers", {"count": 4}, headers=headers))
    problem(await patch_pool(door, "workers", {"count": 5}, headers=headers), 422, "R-PATCH-09")
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.count == 4


async def test_r_patch_09_key_order_in_the_body_does_not_matter(door: httpx2.AsyncClient) -> None:
    """R-PATCH-09: the body is compared canonically (sorted keys), so reordered keys replay."""
    await fund(door)
    headers = {**ADMIN, "Idempotency-Key": "card-patch-3"}
    first = await door.patch(
        pool_url("workers"),
        content=b'{"auto_scale": true, "max_nodes": 5}',
        headers={**headers, "Content-Type": "application/json"},
    )
    assert first.status_code == 202, first.text
    again = await door.patch(
        pool_url("workers"),
        content=b'{"max_nodes":5,"auto_scale":true}',
        headers={**headers, "Content-Type": "application/json"},
    )
    assert again.status_code == 202, again.text
    assert again.headers.get("idempotent-replayed") == "true"


# --- R-PATCH-10 ----------------------------------------------------------------------------------


async def test_r_patch_10_size_refusal_explains_how_to_change_tier(door: httpx2.AsyncClient) -> None:
    """R-PATCH-10: PATCH `size` → 422 (R-PATCH-01) whose text says: add a new pool, wait, delete the old one."""
    p = problem(await patch_pool(door, "workers", {"size": "dks.m5.xlarge"}), 422, "R-PATCH-01", field="size")
    text = texts(p).lower()
    assert "new pool" in text, text
    assert "delete the old" in text, text


async def test_r_patch_10_tier_change_by_add_wait_delete(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-PATCH-10: add `workers-m5` on the new tier, wait until it runs, delete `workers`: only the new tier is left."""
    await add_running_pool(door, clock, "workers-m5", size="dks.m5.xlarge", count=2)
    nodes = await settled_nodes(door, clock, pool="workers-m5")
    assert len(nodes.items) == 2 and all(n.status == "Running" for n in nodes.items)
    accepted_cluster(await delete_pool(door, "workers"))
    clock.advance(SETTLE_S)
    r = await door.get(f"/v1/public/clusters/{nodes.cluster_id}/node-pools", headers=ADMIN)
    assert [(i["name"], i["size"]) for i in r.json()["items"]] == [("workers-m5", "dks.m5.xlarge")]


async def test_r_patch_10_adding_the_new_tier_keeps_the_old_pool_running(door: httpx2.AsyncClient) -> None:
    """R-PATCH-10: during the switch both pools are alive; the old one is untouched."""
    await fund(door)
    cluster = accepted_cluster(await add_pool(door, {"name": "workers-m5", "size": "dks.m5.xlarge", "count": 2}))
    old = cluster.pool("workers")
    assert old is not None and old.lifecycle == "active" and old.count == 2


async def test_r_patch_06_a_whole_number_float_is_an_integer(door: httpx2.AsyncClient) -> None:
    """R-PATCH-06: `{"count": 3.0}` is the integer 3 (the schema's "integer" admits it); `2.5` is not."""
    await fund(door)
    pool = accepted_cluster(await patch_pool(door, "workers", {"count": 3.0})).pool("workers")
    assert pool is not None and pool.count == 3 and type(pool.count) is int
    problem(await patch_pool(door, "workers", {"labels": {}, "max_nodes": 2.5}), 422)
