"""Planners build the card the page's examples call for, and refuse what Door would refuse."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from backend_client import DoorClient
from backend_client.models import PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from confirmation_cards import (
    ApprovalService,
    Card,
    CardStatus,
    DoorApi,
    Planner,
    PreflightError,
    SqliteCardStore,
    token_fingerprint,
)
from reference_backend import seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock

pytestmark = pytest.mark.anyio

PROD = seed.DEMO_CLUSTER_ID
POOL_PATH = f"/v1/public/clusters/{PROD}/node-pools"


def codes(card: Card) -> list[str]:
    return [w.code for w in card.warnings]


def changes(card: Card) -> dict[str, tuple[Any, Any]]:
    return {c.field: (c.before, c.after) for c in card.diff}


async def warm_inventory(door: DoorClient, clock: ManualClock, cluster_id: str = PROD) -> None:
    """The first node read is cold (R-NODE-03); the refresh it queues lands two seconds later."""
    await door.list_nodes(cluster_id)
    clock.advance(3)


def add_batch_pool(backend: ReferenceBackend) -> None:
    cluster = backend.cluster(PROD)
    assert cluster is not None
    backend.install_pool(cluster, PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge", count=1))


async def test_the_door_client_is_what_the_planner_expects(admin: DoorClient) -> None:
    door: DoorApi = admin  # mypy checks the client against the protocol the cards use
    assert door is admin


# --- the page's examples ---------------------------------------------------------------------------


async def test_scaling_workers_on_payments_prod_to_4_shows_count_capacity_price_and_credit(planner: Planner) -> None:
    card = await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))

    assert (card.action, card.cluster_id, card.cluster_name, card.target) == (
        "scale_node_pool",
        PROD,
        "payments-prod",
        "workers",
    )
    assert (card.method, card.path, card.body) == ("PATCH", f"{POOL_PATH}/workers", {"count": 4})
    assert changes(card) == {"count": (2, 4)}
    assert (card.capacity_before.total_vcpu, card.capacity_after.total_vcpu) == (8, 16)
    assert (card.capacity_before.total_memory_gib, card.capacity_after.total_memory_gib) == (16.0, 32.0)
    assert (card.capacity_before.total_volume_gib, card.capacity_after.total_volume_gib) == (160, 320)
    assert (card.price_before, card.price_after, card.price_change) == (0.34, 0.68, 0.34)
    assert card.credit_needed == 8.16
    assert codes(card) == ["credit_required", "role_needed"]  # R-AUTH-03: role not known yet
    assert "8.16" in card.warnings[0].message
    assert {"R-AUTH-03", "R-PHASE-01", "R-OP-01", "R-PATCH-04", "R-CREDIT-01"} <= set(card.rules)
    assert card.required_role == "super_admin"
    assert card.status == "pending"
    assert card.target_snapshot["pool"]["count"] == 2  # type: ignore[index,call-overload]


async def test_a_card_expires_ten_minutes_after_it_is_made_and_has_an_unguessable_id(planner: Planner) -> None:
    one = await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
    two = await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))

    assert (one.expires_at - one.created_at).total_seconds() == 600
    assert one.id.startswith("card_") and len(one.id) >= 20
    assert one.id != two.id
    assert one.body_digest == two.body_digest  # same request, same digest: the digest binds the request


async def test_adding_batch_with_one_m5_xlarge_sends_exactly_the_page_body(planner: Planner) -> None:
    request = PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge", count=1)

    card = await planner.add_node_pool("payments-prod", request)

    assert (card.method, card.path, card.target) == ("POST", POOL_PATH, "batch")
    assert card.body == {"name": "batch", "size": "dks.m5.xlarge", "count": 1}
    assert changes(card)["size"] == (None, "dks.m5.xlarge")
    assert changes(card)["count"] == (None, 1)
    assert changes(card)["root_volume_size_gib"] == (None, 80)
    assert (card.capacity_before.total_vcpu, card.capacity_after.total_vcpu) == (8, 12)
    assert (card.capacity_before.total_memory_gib, card.capacity_after.total_memory_gib) == (16.0, 32.0)
    assert card.price_change == 0.192
    assert codes(card) == ["credit_required", "role_needed"]  # R-AUTH-03: role not known yet
    assert card.target_snapshot == {"phase": "Provisioned", "pool": None}


async def test_adding_a_pool_with_labels_warns_they_are_not_kubernetes_node_labels(planner: Planner) -> None:
    request = PublicNodePoolCreateRequest(name="gpu", size="dks.c5.large", labels={"team": "ml"})

    card = await planner.add_node_pool(PROD, request)

    assert "labels_not_node_labels" in codes(card)
    assert "R-POOL-05" in card.rules


async def test_adding_an_autoscaling_pool_whose_minimum_is_below_its_count_warns_it_may_shrink(
    planner: Planner,
) -> None:
    request = PublicNodePoolCreateRequest(
        name="batch", size="dks.c5.large", count=3, auto_scale=True, min_nodes=1, max_nodes=4
    )

    card = await planner.add_node_pool(PROD, request)

    assert "autoscale_may_shrink" in codes(card)
    assert "R-ADD-06" in card.rules


async def test_turning_on_autoscaling_2_to_6_counts_max_nodes_as_capacity(planner: Planner) -> None:
    patch = PublicNodePoolPatchRequest(auto_scale=True, min_nodes=2, max_nodes=6, count=2)

    card = await planner.scale_node_pool("payments-prod", "workers", patch)

    assert card.body == {"auto_scale": True, "min_nodes": 2, "max_nodes": 6, "count": 2}
    assert changes(card) == {"auto_scale": (False, True), "min_nodes": (None, 2), "max_nodes": (None, 6)}
    assert card.capacity_after.total_vcpu == 24  # R-CAP-01: effective nodes = max_nodes
    assert card.credit_needed == 16.32
    assert "autoscale_may_shrink" not in codes(card)


async def test_autoscaling_bounds_below_the_current_count_warn_that_the_pool_may_shrink(planner: Planner) -> None:
    patch = PublicNodePoolPatchRequest(auto_scale=True, min_nodes=1, max_nodes=6)

    card = await planner.scale_node_pool("payments-prod", "workers", patch)

    assert "autoscale_may_shrink" in codes(card)


async def test_scaling_down_warns_that_workers_are_removed_and_lowers_the_price(planner: Planner) -> None:
    card = await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=1))

    assert codes(card) == ["scale_down", "role_needed"]  # R-AUTH-03: role not known yet
    assert "removes 1 worker" in card.warnings[0].message
    assert card.price_change == -0.17
    assert card.credit_needed is None


async def test_relabelling_shows_the_label_diff_and_warns_about_node_labels(planner: Planner) -> None:
    patch = PublicNodePoolPatchRequest(labels={"team": "payments"}, tags={"cost": "prod"})

    card = await planner.relabel_node_pool("payments-prod", "workers", patch)

    assert card.body == {"labels": {"team": "payments"}, "tags": {"cost": "prod"}}
    assert changes(card) == {"labels": ({}, {"team": "payments"}), "tags": ({}, {"cost": "prod"})}
    assert codes(card) == ["labels_not_node_labels", "role_needed"]  # R-AUTH-03: role not known yet
    assert card.price_change == 0


async def test_removing_a_pool_warns_how_many_running_workers_it_drains(
    planner: Planner, admin: DoorClient, backend: ReferenceBackend, clock: ManualClock
) -> None:
    add_batch_pool(backend)
    await warm_inventory(admin, clock)

    card = await planner.remove_node_pool("payments-prod", "batch")

    assert (card.method, card.path, card.body) == ("DELETE", f"{POOL_PATH}/batch", {})
    assert changes(card)["lifecycle"] == ("active", "deleting")
    assert (card.capacity_before.total_vcpu, card.capacity_after.total_vcpu) == (12, 8)
    assert card.price_change == -0.192
    assert codes(card) == ["drains_workers", "role_needed"]  # R-AUTH-03: role not known yet
    assert "1 running worker" in card.warnings[0].message


async def test_removing_a_pool_on_a_cold_inventory_counts_the_declared_workers_and_says_so(
    planner: Planner, backend: ReferenceBackend
) -> None:
    add_batch_pool(backend)

    card = await planner.remove_node_pool("payments-prod", "batch")

    assert "1 by its declared count" in card.warnings[0].message
    assert "not loaded yet" in card.warnings[0].message


async def test_replacing_payments_prod_workers_abc12_deletes_one_node_and_keeps_the_count(
    planner: Planner, admin: DoorClient, clock: ManualClock
) -> None:
    await warm_inventory(admin, clock)

    card = await planner.replace_node("payments-prod", seed.DEMO_NODE_NAME)

    assert (card.method, card.path, card.body) == (
        "DELETE",
        f"/v1/public/clusters/{PROD}/nodes/{seed.DEMO_NODE_NAME}",
        {},
    )
    assert changes(card)["node"][1] == {"name": seed.DEMO_NODE_NAME, "status": "Deleting"}
    assert card.capacity_before == card.capacity_after
    assert card.price_change == 0
    assert codes(card) == ["node_drained", "role_needed"]  # R-AUTH-03: role not known yet
    assert card.target_snapshot["node"] == {"pool": "workers", "status": "Running", "ready": True}
    assert card.target_snapshot["replacing"] is False


async def test_replacing_a_node_before_the_inventory_is_loaded_warns_it_may_not_exist(planner: Planner) -> None:
    card = await planner.replace_node("payments-prod", seed.DEMO_NODE_NAME)

    assert codes(card) == ["node_unlisted", "role_needed"]  # R-AUTH-03: role not known yet
    assert "R-RNODE-04" in card.rules


async def test_replacing_the_last_ready_node_of_a_pool_warns(
    planner: Planner, admin: DoorClient, backend: ReferenceBackend, clock: ManualClock
) -> None:
    solo = backend.install_cluster(
        name="solo",
        organisation=seed.DEMO_ORGANISATION,
        pools=[PublicNodePoolCreateRequest(name="only", size="dks.c5.large", count=1)],
    )
    await warm_inventory(admin, clock, solo.id)
    node = (await admin.list_nodes(solo.id)).items[0].name

    card = await planner.replace_node("solo", node)

    assert "last_ready_node" in codes(card)


async def test_planning_changes_nothing_on_the_backend(planner: Planner, admin: DoorClient) -> None:
    before = await admin.get_cluster(PROD)

    await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))

    assert await admin.get_cluster(PROD) == before
    assert (await admin.get_cluster_state(PROD)).operations == []


# --- refusals --------------------------------------------------------------------------------------


async def refused(call: Any) -> PreflightError:
    with pytest.raises(PreflightError) as caught:
        await call
    return caught.value


def patch(**fields: Any) -> PublicNodePoolPatchRequest:
    return PublicNodePoolPatchRequest(**fields)


@pytest.mark.parametrize(
    ("fields", "rule", "field"),
    [
        ({"count": 0}, "R-PATCH-04", "count"),
        ({"auto_scale": True, "min_nodes": 5, "max_nodes": 3}, "R-PATCH-04", "min_nodes"),
        ({"auto_scale": True, "min_nodes": 1, "max_nodes": 3, "count": 5}, "R-PATCH-04", "count"),
        ({"auto_scale": True}, "R-PATCH-04", "max_nodes"),
        ({"count": 201}, "R-PATCH-06", "count"),
        ({}, "R-PATCH-02", None),
    ],
)
async def test_a_scale_door_would_refuse_gets_no_card(
    planner: Planner, fields: dict[str, Any], rule: str, field: str | None
) -> None:
    error = await refused(planner.scale_node_pool("payments-prod", "workers", patch(**fields)))

    assert (error.violation.rule, error.violation.field) == (rule, field)
    assert rule in str(error)


@pytest.mark.parametrize(
    ("request_fields", "rule", "field"),
    [
        ({"name": "batch", "size": "dks.c5.large", "count": 0}, "R-ADD-05", "count"),
        ({"name": "batch", "size": "dks.c5.large", "auto_scale": True}, "R-ADD-06", "max_nodes"),
        ({"name": "batch", "size": "dks.z9.huge"}, "R-ADD-03", "size"),
        ({"name": "Batch_1", "size": "dks.c5.large"}, "R-ADD-01", "name"),
        ({"name": "workers", "size": "dks.c5.large"}, "R-ADD-02", "name"),
    ],
)
async def test_an_add_door_would_refuse_gets_no_card(
    planner: Planner, request_fields: dict[str, Any], rule: str, field: str
) -> None:
    request = PublicNodePoolCreateRequest(**request_fields)

    error = await refused(planner.add_node_pool("payments-prod", request))

    assert (error.violation.rule, error.violation.field) == (rule, field)
    assert error.violation.fix in str(error)


async def test_removing_the_last_pool_is_refused(planner: Planner) -> None:
    error = await refused(planner.remove_node_pool("payments-prod", "workers"))

    assert error.rule == "R-DEL-01"
    assert "Add a replacement pool first" in str(error)


async def test_changing_a_cluster_that_is_not_provisioned_is_refused(planner: Planner) -> None:
    error = await refused(planner.scale_node_pool("payments-staging", "general", patch(count=2)))

    assert error.rule == "R-PHASE-01"
    assert "NodesReady" in str(error)


async def test_a_pool_busy_with_a_running_operation_is_refused(planner: Planner, admin: DoorClient) -> None:
    await admin.update_node_pool(PROD, "workers", patch(count=3))

    error = await refused(planner.scale_node_pool("payments-prod", "workers", patch(count=4)))

    assert error.rule == "R-OP-01"


async def test_an_unknown_pool_is_refused_for_a_patch_and_a_delete(planner: Planner) -> None:
    assert (await refused(planner.scale_node_pool("payments-prod", "nope", patch(count=3)))).rule == "R-PATCH-07"
    assert (await refused(planner.remove_node_pool("payments-prod", "nope"))).rule == "R-DEL-03"


async def test_a_pool_already_deleting_is_refused(
    planner: Planner, admin: DoorClient, backend: ReferenceBackend
) -> None:
    add_batch_pool(backend)
    await admin.remove_node_pool(PROD, "batch")

    error = await refused(planner.relabel_node_pool("payments-prod", "batch", patch(labels={"a": "b"})))

    assert error.rule == "R-PATCH-07"
    assert "already being deleted" in str(error)


async def test_a_malformed_node_name_is_refused(planner: Planner) -> None:
    assert (await refused(planner.replace_node("payments-prod", "Bad_Node"))).rule == "R-RNODE-03"


async def test_a_node_already_being_replaced_is_refused(planner: Planner, admin: DoorClient) -> None:
    await admin.replace_node(PROD, seed.DEMO_NODE_NAME)

    assert (await refused(planner.replace_node("payments-prod", seed.DEMO_NODE_NAME))).rule == "R-RNODE-05"


async def test_size_in_a_patch_explains_how_to_change_tier(planner: Planner) -> None:
    error = await refused(planner.scale_node_pool("payments-prod", "workers", {"size": "dks.c5.2xlarge"}))

    assert (error.rule, error.violation.field) == ("R-PATCH-01", "size")
    assert "R-PATCH-10" in str(error)
    assert "add a new pool" in str(error)


async def test_a_member_token_is_refused_up_front_once_door_refused_its_approved_change_and_nothing_changes(
    member: DoorClient, admin: DoorClient, clock: ManualClock
) -> None:
    """R-AUTH-03 is learned from Door's own 403 to an approved change, never from a probe (property 10)."""
    store = SqliteCardStore(":memory:")
    service = ApprovalService(store, clock=clock.now)
    principal = token_fingerprint(seed.DEMO_MEMBER_TOKEN)
    planner = Planner(member, clock=clock.now, principal=principal, roles=service.roles)
    before = await admin.get_cluster(PROD)

    card = await store.create(await planner.scale_node_pool("payments-prod", "workers", patch(count=4)))
    done = await service.approve(card.id, approver="mel", door=member, principal=principal)
    assert done.status is CardStatus.FAILED and done.result is not None and done.result.rule == "R-AUTH-03"

    error = await refused(planner.scale_node_pool("payments-prod", "workers", patch(count=5)))
    assert error.rule == "R-AUTH-03" and "super_admin" in str(error)
    # Another principal of the same organisation is not affected.
    admins = Planner(admin, clock=clock.now, principal=token_fingerprint(seed.DEMO_ADMIN_TOKEN), roles=service.roles)
    assert (await admins.scale_node_pool("payments-prod", "workers", patch(count=5))).target == "workers"
    assert await admin.get_cluster(PROD) == before
    assert (await admin.get_cluster_state(PROD)).operations == []


async def test_a_scale_to_the_current_count_is_refused_as_nothing_would_change(planner: Planner) -> None:
    error = await refused(planner.scale_node_pool("payments-prod", "workers", patch(count=2)))

    assert "nothing would change" in str(error)


async def test_the_scale_planner_refuses_labels_and_the_relabel_planner_refuses_counts(planner: Planner) -> None:
    scale = await refused(planner.scale_node_pool("payments-prod", "workers", patch(labels={"a": "b"})))
    relabel = await refused(planner.relabel_node_pool("payments-prod", "workers", patch(count=3)))

    assert "relabel_node_pool" in str(scale)
    assert "scale_node_pool" in str(relabel)


async def test_an_unknown_cluster_is_refused(planner: Planner) -> None:
    error = await refused(planner.scale_node_pool("no-such-cluster", "workers", patch(count=3)))

    assert error.violation.status == 404


async def test_a_token_door_does_not_know_is_refused_naming_the_rule_once(app: Any, clock: ManualClock) -> None:
    """Door's own detail already reads "R-AUTH-01: what. Fix.": the refusal says the rule once, and
    Door's fix instead of a second one (acceptance test: "R-AUTH-01: R-AUTH-01: …" over HTTP)."""
    async with DoorClient("http://door.test", "not-a-door-token", transport=httpx2.ASGITransport(app=app)) as stranger:
        with pytest.raises(PreflightError) as refused:
            await Planner(stranger, clock=clock.now).scale_node_pool(
                "payments-prod", "workers", PublicNodePoolPatchRequest(count=3)
            )
    said = str(refused.value)
    assert refused.value.rule == "R-AUTH-01"
    assert said.count("R-AUTH-01") == 1, said
    assert said.startswith("R-AUTH-01: no valid bearer token. "), said
    assert "not-a-door-token" not in said
