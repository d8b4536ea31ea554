"""Pools as read: R-POOL-01..05."""

from __future__ import annotations

import httpx2
import pytest

from backend_client.models import POOL_SCHEMA, Cluster, NodePool, NodePoolList
from reference_backend import seed
from reference_backend.clock import ManualClock
from tests.reference_backend.rules_helpers import (
    ADMIN,
    CID,
    MEMBER,
    accepted_cluster,
    add_pool,
    catalog,
    cluster_url,
    fund,
    get_cluster,
    get_pool,
    patch_pool,
    pools_url,
    problem,
    settled_nodes,
)

pytestmark = pytest.mark.anyio

POOL_FIELDS = {
    "id",
    "name",
    "size",
    "count",
    "auto_scale",
    "min_nodes",
    "max_nodes",
    "labels",
    "tags",
    "root_volume_size_gib",
    "lifecycle",
}


# --- R-POOL-01 -----------------------------------------------------------------------------------


async def test_r_pool_01_pool_list_is_the_documented_envelope(door: httpx2.AsyncClient) -> None:
    """R-POOL-01: 200 with {schema_version "nodepool.public.v1", cluster_id, items, total}."""
    r = await door.get(pools_url(), headers=MEMBER)
    assert r.status_code == 200, r.text
    body = r.json()
    assert {"schema_version", "cluster_id", "items", "total"} <= set(body)
    parsed = NodePoolList.model_validate(body)
    assert parsed.schema_version == POOL_SCHEMA
    assert parsed.cluster_id == CID
    assert parsed.total == len(parsed.items) == 1


async def test_r_pool_01_pool_items_do_not_embed_nodes(door: httpx2.AsyncClient) -> None:
    """R-POOL-01: pool items carry no nodes (use the node routes)."""
    body = (await door.get(pools_url(), headers=MEMBER)).json()
    for item in body["items"]:
        assert "nodes" not in item and "workers" not in item, item
    cluster = (await door.get(cluster_url(), headers=MEMBER)).json()
    for item in cluster["node_pools"]:
        assert "nodes" not in item, item


async def test_r_pool_01_total_counts_every_listed_pool(door: httpx2.AsyncClient) -> None:
    """R-POOL-01: `total` follows the items after a pool is added."""
    await fund(door)
    accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.m5.xlarge"}))
    parsed = NodePoolList.model_validate((await door.get(pools_url(), headers=MEMBER)).json())
    assert parsed.total == len(parsed.items) == 2
    assert {p.name for p in parsed.items} == {"workers", "batch"}


# --- R-POOL-02 -----------------------------------------------------------------------------------


async def test_r_pool_02_pool_item_has_exactly_the_documented_fields(door: httpx2.AsyncClient) -> None:
    """R-POOL-02: id, name, size, count, auto_scale, min_nodes, max_nodes, labels, tags, root_volume_size_gib, lifecycle."""
    item = (await door.get(pools_url(), headers=MEMBER)).json()["items"][0]
    assert set(item) >= POOL_FIELDS, set(item) ^ POOL_FIELDS


async def test_r_pool_02_demo_pool_matches_the_page_example(door: httpx2.AsyncClient) -> None:
    """R-POOL-02: the seeded `workers` pool reads exactly as on the page."""
    item = (await door.get(pools_url(), headers=MEMBER)).json()["items"][0]
    assert {k: item[k] for k in POOL_FIELDS} == {
        "id": seed.DEMO_POOL_ID,
        "name": "workers",
        "size": "dks.c5.xlarge",
        "count": 2,
        "auto_scale": False,
        "min_nodes": None,
        "max_nodes": None,
        "labels": {},
        "tags": {},
        "root_volume_size_gib": 80,
        "lifecycle": "active",
    }


async def test_r_pool_02_lifecycle_is_deleting_after_a_delete_is_accepted(
    door: httpx2.AsyncClient, clock: ManualClock
) -> None:
    """R-POOL-02: lifecycle is `active`, then `deleting` once a removal is accepted."""
    await fund(door)
    accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.m5.xlarge"}))
    clock.advance(300)
    pool = await get_pool(door, "batch")
    assert pool is not None and pool.lifecycle == "active"
    assert (await door.delete(f"{pools_url()}/batch", headers=ADMIN)).status_code == 202
    pool = await get_pool(door, "batch")
    assert pool is not None and pool.lifecycle == "deleting"


# --- R-POOL-03 -----------------------------------------------------------------------------------


async def test_r_pool_03_cluster_embeds_the_same_pool_items(door: httpx2.AsyncClient) -> None:
    """R-POOL-03: GET cluster embeds node_pools with the same item shape as the pool list."""
    await fund(door)
    accepted_cluster(await add_pool(door, {"name": "batch", "size": "dks.m5.xlarge", "labels": {"a": "b"}}))
    listed = (await door.get(pools_url(), headers=MEMBER)).json()["items"]
    embedded = (await door.get(cluster_url(), headers=MEMBER)).json()["node_pools"]
    key = lambda item: item["name"]  # noqa: E731
    assert sorted(embedded, key=key) == sorted(listed, key=key)


async def test_r_pool_03_cluster_carries_the_capacity_totals(door: httpx2.AsyncClient) -> None:
    """R-POOL-03: GET cluster carries total_vcpu, total_memory_gib, total_volume_gib (R-CAP-*)."""
    body = (await door.get(cluster_url(), headers=MEMBER)).json()
    assert {"total_vcpu", "total_memory_gib", "total_volume_gib"} <= set(body)
    tiers = await catalog(door)
    c5 = tiers["dks.c5.xlarge"]
    cluster = Cluster.model_validate(body)
    assert cluster.total_vcpu == 2 * c5.vcpu
    assert cluster.total_memory_gib == pytest.approx(2 * c5.memory_gib)
    assert cluster.total_volume_gib == 2 * 80


# --- R-POOL-04 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", ["dks.c5.xlarge", "dks.c5.large", "dks.c5.2xlarge"])
async def test_r_pool_04_root_volume_comes_from_the_tier_disk(door: httpx2.AsyncClient, size: str) -> None:
    """R-POOL-04: root_volume_size_gib is the tier's spec.disk_gib."""
    await fund(door)
    tiers = await catalog(door)
    cluster = accepted_cluster(await add_pool(door, {"name": "extra", "size": size}))
    pool = cluster.pool("extra")
    assert pool is not None
    assert pool.root_volume_size_gib == tiers[size].spec.disk_gib


async def test_r_pool_04_demo_c5_xlarge_pool_has_80_gib(door: httpx2.AsyncClient) -> None:
    """R-POOL-04: dks.c5.xlarge → 80 GiB, as the page says."""
    tiers = await catalog(door)
    assert tiers["dks.c5.xlarge"].spec.disk_gib == 80
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.root_volume_size_gib == 80


async def test_r_pool_04_root_volume_is_not_a_create_field(door: httpx2.AsyncClient) -> None:
    """R-POOL-04: sending root_volume_size_gib on create → 422 naming it; no pool appears."""
    await fund(door)
    r = await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge", "root_volume_size_gib": 500})
    problem(r, 422, field="root_volume_size_gib")
    assert await get_pool(door, "batch") is None


async def test_r_pool_04_root_volume_cannot_be_patched(door: httpx2.AsyncClient) -> None:
    """R-POOL-04: PATCH root_volume_size_gib → 422 naming it; the disk stays 80."""
    r = await patch_pool(door, "workers", {"root_volume_size_gib": 500})
    problem(r, 422, {"R-POOL-04", "R-PATCH-01"}, field="root_volume_size_gib")
    pool = await get_pool(door, "workers")
    assert pool is not None and pool.root_volume_size_gib == 80


# --- R-POOL-05 -----------------------------------------------------------------------------------


async def test_r_pool_05_labels_and_tags_are_stored_and_returned(door: httpx2.AsyncClient) -> None:
    """R-POOL-05: pool labels and tags (string maps) come back as sent, in the 202, the list and the cluster."""
    await fund(door)
    labels = {"team": "payments", "tier": "batch"}
    tags = {"cost-center": "42"}
    cluster = accepted_cluster(
        await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge", "labels": labels, "tags": tags})
    )
    created = cluster.pool("batch")
    assert created is not None and created.labels == labels and created.tags == tags
    listed = await get_pool(door, "batch")
    assert listed is not None and listed.labels == labels and listed.tags == tags
    embedded = (await get_cluster(door)).pool("batch")
    assert embedded is not None and embedded.labels == labels and embedded.tags == tags


@pytest.mark.parametrize("field", ["labels", "tags"])
async def test_r_pool_05_non_string_map_values_are_422(door: httpx2.AsyncClient, field: str) -> None:
    """R-POOL-05: labels and tags are string maps; a number value → 422 naming the field."""
    await fund(door)
    problem(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge", field: {"a": 1}}), 422, field=field)
    problem(await patch_pool(door, "workers", {field: ["a", "b"]}), 422, field=field)


async def test_r_pool_05_pool_labels_are_not_applied_to_nodes(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    """R-POOL-05: labels are never applied as Kubernetes node labels: nodes carry no labels."""
    accepted_cluster(await patch_pool(door, "workers", {"labels": {"team": "payments"}}))
    nodes = await settled_nodes(door, clock, pool="workers")
    assert nodes.items
    for item in (await door.get(f"{pools_url()}/workers/nodes", headers=ADMIN)).json()["items"]:
        assert "labels" not in item and "tags" not in item, item


async def test_r_pool_05_cluster_tags_are_a_string_array_apart_from_pool_tags(door: httpx2.AsyncClient) -> None:
    """R-POOL-05: cluster `tags` is a list of strings; setting pool tags does not change it."""
    before = (await door.get(cluster_url(), headers=ADMIN)).json()
    assert isinstance(before["tags"], list) and all(isinstance(t, str) for t in before["tags"])
    accepted_cluster(await patch_pool(door, "workers", {"tags": {"cost-center": "42"}}))
    after = (await door.get(cluster_url(), headers=ADMIN)).json()
    assert after["tags"] == before["tags"]
    pool = NodePool.model_validate(next(p for p in after["node_pools"] if p["name"] == "workers"))
    assert pool.tags == {"cost-center": "42"}
