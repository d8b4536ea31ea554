"""Approval is the only path to the backend: once, in time, against the target as it was shown."""

from __future__ import annotations

import anyio
import httpx2
import pytest
from fastapi import FastAPI

from backend_client import DoorClient, UnprocessableEntity
from backend_client.models import PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from confirmation_cards import ApprovalService, Card, CardNotFound, CardStatus, Planner, SqliteCardStore
from reference_backend import seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.conftest import ADMIN_TOKEN, BASE_URL, auth

pytestmark = pytest.mark.anyio

PROD = seed.DEMO_CLUSTER_ID


async def operations(door: DoorClient, kind: str | None = None) -> list[str]:
    state = await door.get_cluster_state(PROD)
    return [op.id for op in state.operations if kind is None or op.kind == kind]


async def workers_count(door: DoorClient) -> int:
    pool = (await door.get_cluster(PROD)).pool("workers")
    assert pool is not None
    return pool.count


async def pending_scale_to_4(planner: Planner, store: SqliteCardStore) -> Card:
    card = await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
    return await store.create(card)


async def test_approving_a_card_makes_exactly_one_mutation_with_the_cards_body_and_key(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, admin: DoorClient
) -> None:
    card = await pending_scale_to_4(planner, store)

    done = await service.approve(card.id, approver="ada", door=admin)

    assert done.status is CardStatus.EXECUTED
    assert done.result is not None and done.result.status_code == 202
    assert await workers_count(admin) == 4
    assert await operations(admin) == [done.result.operation_id]
    # The card id was the Idempotency-Key for exactly this body: the same key with another body is refused.
    with pytest.raises(UnprocessableEntity) as caught:
        await admin.update_node_pool(PROD, "workers", PublicNodePoolPatchRequest(count=5), idempotency_key=card.id)
    assert caught.value.rule == "R-PATCH-09"


async def test_a_replayed_approval_executes_nothing(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, admin: DoorClient
) -> None:
    card = await pending_scale_to_4(planner, store)
    first = await service.approve(card.id, approver="ada", door=admin)

    again = await service.approve(card.id, approver="ada", door=admin)

    assert again == first
    assert len(await operations(admin)) == 1


async def test_fifty_concurrent_approvals_of_one_card_make_one_mutation(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, admin: DoorClient
) -> None:
    card = await pending_scale_to_4(planner, store)

    async def approve(n: int) -> None:
        await service.approve(card.id, approver=f"user-{n}", door=admin)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            for n in range(50):
                group.start_soon(approve, n)

    assert len(await operations(admin)) == 1
    assert await workers_count(admin) == 4
    assert [e.event for e in await store.audit(card.id)] == ["created", "approved", "executed"]
    final = await store.get(card.id)
    assert final is not None and final.status is CardStatus.EXECUTED


async def test_a_declined_card_never_executes(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, admin: DoorClient
) -> None:
    card = await pending_scale_to_4(planner, store)

    declined = await service.decline(card.id, by="ada", reason="cancelled")
    after = await service.approve(card.id, approver="ada", door=admin)

    assert declined.status is CardStatus.DECLINED
    assert declined.declined_by == "ada"
    assert after.status is CardStatus.DECLINED
    assert await operations(admin) == []
    assert (await store.audit(card.id))[-1].detail == "cancelled"


async def test_an_expired_card_is_reported_expired_and_never_executes(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, admin: DoorClient, clock: ManualClock
) -> None:
    card = await pending_scale_to_4(planner, store)
    clock.advance(601)

    approved = await service.approve(card.id, approver="ada", door=admin)
    declined = await service.decline(card.id, by="ada")

    assert approved.status is CardStatus.EXPIRED
    assert declined.status is CardStatus.EXPIRED
    assert await operations(admin) == []
    assert [e.event for e in await store.audit(card.id)] == ["created", "expired"]


async def test_expire_due_marks_only_pending_cards_past_their_expiry(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, clock: ManualClock
) -> None:
    old = await pending_scale_to_4(planner, store)
    clock.advance(300)
    young = await pending_scale_to_4(planner, store)
    clock.advance(301)

    expired = await service.expire_due()

    assert [c.id for c in expired] == [old.id]
    assert [c.id for c in await store.list(CardStatus.PENDING)] == [young.id]
    assert await service.expire_due() == []


async def test_a_target_changed_since_the_card_was_shown_makes_it_stale_and_says_what_changed(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, admin: DoorClient, clock: ManualClock
) -> None:
    card = await pending_scale_to_4(planner, store)
    await admin.update_node_pool(PROD, "workers", PublicNodePoolPatchRequest(count=3))
    clock.advance(200)  # let that change finish, so only staleness can stop the card

    result = await service.approve(card.id, approver="ada", door=admin)

    assert result.status is CardStatus.STALE
    assert result.result is not None and "count was 2 and is now 3" in result.result.message
    assert await workers_count(admin) == 3
    assert len(await operations(admin)) == 1  # only the direct change
    assert (await store.audit(card.id))[-1].event == "stale"


async def test_a_refusal_by_door_is_recorded_as_failed_with_the_rule_and_what_to_do(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, admin: DoorClient, backend: ReferenceBackend
) -> None:
    card = await pending_scale_to_4(planner, store)
    backend.set_credit(seed.DEMO_ORGANISATION, 1.0)

    result = await service.approve(card.id, approver="ada", door=admin)

    assert result.status is CardStatus.FAILED
    assert result.result is not None
    assert (result.result.status_code, result.result.rule) == (402, "R-CREDIT-01")
    assert "Top up" in result.result.message
    assert await workers_count(admin) == 2
    assert (await store.audit(card.id))[-1].status_code == 402


async def test_approving_through_a_member_token_fails_with_the_role_rule(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, member: DoorClient, admin: DoorClient
) -> None:
    card = await pending_scale_to_4(planner, store)

    result = await service.approve(card.id, approver="mel", door=member)

    assert result.status is CardStatus.FAILED
    assert result.result is not None and result.result.rule == "R-AUTH-03"
    assert await operations(admin) == []


async def test_an_unknown_card_id_raises_card_not_found(service: ApprovalService, admin: DoorClient) -> None:
    with pytest.raises(CardNotFound):
        await service.approve("card_doesnotexist", approver="ada", door=admin)
    with pytest.raises(KeyError):
        await service.decline("card_doesnotexist", by="ada")


async def test_approving_an_add_creates_the_pool_with_its_operation(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, admin: DoorClient
) -> None:
    request = PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge", count=1)
    card = await store.create(await planner.add_node_pool("payments-prod", request))

    done = await service.approve(card.id, approver="ada", door=admin)

    assert done.status is CardStatus.EXECUTED
    assert (await admin.get_cluster(PROD)).pool("batch") is not None
    assert await operations(admin, "pool.create") == [done.result.operation_id if done.result else None]


async def test_approving_a_remove_and_a_replace_reach_the_backend(
    planner: Planner,
    store: SqliteCardStore,
    service: ApprovalService,
    admin: DoorClient,
    backend: ReferenceBackend,
    clock: ManualClock,
) -> None:
    cluster = backend.cluster(PROD)
    assert cluster is not None
    backend.install_pool(cluster, PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge", count=1))
    remove = await store.create(await planner.remove_node_pool("payments-prod", "batch"))
    replace = await store.create(await planner.replace_node("payments-prod", seed.DEMO_NODE_NAME))

    removed = await service.approve(remove.id, approver="ada", door=admin)
    replaced = await service.approve(replace.id, approver="ada", door=admin)

    assert (removed.status, replaced.status) == (CardStatus.EXECUTED, CardStatus.EXECUTED)
    assert (await admin.get_cluster(PROD)).pool("batch") is None
    assert len(await operations(admin, "pool.delete")) == 1
    assert len(await operations(admin, "node.replace")) == 1


async def test_the_audit_trail_of_a_full_flow_names_who_when_and_what_door_answered(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, admin: DoorClient, clock: ManualClock
) -> None:
    card = await pending_scale_to_4(planner, store)
    clock.advance(30)

    done = await service.approve(card.id, approver="ada", door=admin)

    created, approved, executed = await store.audit(card.id)
    assert (created.event, created.at, created.by) == ("created", card.created_at, None)
    assert card.body_digest in created.detail
    assert (approved.event, approved.by, approved.at) == ("approved", "ada", clock.now())
    assert (executed.event, executed.status_code) == ("executed", 202)
    assert executed.operation_id is not None and done.result is not None
    assert executed.operation_id == done.result.operation_id
    assert done.approved_by == "ada"


async def test_a_replace_planned_on_a_cold_inventory_still_executes_once_the_inventory_has_loaded(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, admin: DoorClient, clock: ManualClock
) -> None:
    card = await store.create(await planner.replace_node("payments-prod", seed.DEMO_NODE_NAME))
    clock.advance(5)
    assert any(n.name == seed.DEMO_NODE_NAME for n in (await admin.list_nodes(PROD)).items)

    done = await service.approve(card.id, approver="ada", door=admin)

    assert done.status is CardStatus.EXECUTED
    assert len(await operations(admin, "node.replace")) == 1


async def test_a_replace_of_a_node_that_started_draining_meanwhile_is_stale(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, admin: DoorClient, clock: ManualClock
) -> None:
    await admin.list_nodes(PROD)
    clock.advance(3)
    card = await store.create(await planner.replace_node("payments-prod", seed.DEMO_NODE_NAME))
    await admin.replace_node(PROD, seed.DEMO_NODE_NAME)

    result = await service.approve(card.id, approver="ada", door=admin)

    assert result.status is CardStatus.STALE
    assert result.result is not None and "a replacement of node" in result.result.message
    assert len(await operations(admin, "node.replace")) == 1


async def test_an_answer_lost_after_the_change_is_retried_with_the_card_id_and_replays_instead_of_repeating(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, admin: DoorClient, app: FastAPI
) -> None:
    card = await pending_scale_to_4(planner, store)
    fault = {
        "route": "PATCH /v1/public/clusters/{cluster_id}/node-pools/{pool_name}",
        "status": 503,
        "count": 1,
        "when": "after",  # the change takes effect, then the answer is lost
    }
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE_URL) as plane:
        created = await plane.post("/_reference/faults", json=fault, headers=auth(ADMIN_TOKEN))
        assert created.status_code == 201

        done = await service.approve(card.id, approver="ada", door=admin)

        fired = (await plane.get("/_reference/faults", headers=auth(ADMIN_TOKEN))).json()
    assert [f["remaining"] for f in fired] in ([0], [])  # the first answer really was lost
    assert done.status is CardStatus.EXECUTED
    assert await workers_count(admin) == 4
    assert len(await operations(admin, "pool.update")) == 1


async def test_a_card_whose_stored_body_no_longer_matches_its_digest_sends_nothing(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, admin: DoorClient
) -> None:
    planned = await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
    tampered = await store.create(planned.model_copy(update={"body": {"count": 40}}))

    result = await service.approve(tampered.id, approver="ada", door=admin)

    assert result.status is CardStatus.FAILED
    assert result.result is not None and "does not match its digest" in result.result.message
    assert await operations(admin) == []


async def test_a_card_whose_target_no_longer_matches_its_digested_path_sends_nothing(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, admin: DoorClient, backend: ReferenceBackend
) -> None:
    """The call is made from the card's cluster and target, so those must be the ones the digest covers."""
    cluster = backend.cluster(PROD)
    assert cluster is not None
    backend.install_pool(cluster, PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge", count=1))
    planned = await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
    other = await planner.scale_node_pool("payments-prod", "batch", PublicNodePoolPatchRequest(count=4))
    # Same path, body and digest as the card for `workers`, but aimed at `batch` with batch's own snapshot.
    tampered = await store.create(
        planned.model_copy(
            update={
                "target": "batch",
                "target_snapshot": other.target_snapshot,
                "target_fingerprint": other.target_fingerprint,
            }
        )
    )

    result = await service.approve(tampered.id, approver="ada", door=admin)

    assert result.status is CardStatus.FAILED
    assert result.result is not None and "nothing was sent" in result.result.message
    assert await operations(admin) == []


async def test_a_pool_deleted_after_its_card_was_made_makes_the_card_stale(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, admin: DoorClient, backend: ReferenceBackend
) -> None:
    cluster = backend.cluster(PROD)
    assert cluster is not None
    backend.install_pool(cluster, PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge", count=1))
    card = await store.create(await planner.scale_node_pool("payments-prod", "batch", PublicNodePoolPatchRequest(count=2)))
    await admin.remove_node_pool(PROD, "batch")

    result = await service.approve(card.id, approver="ada", door=admin)

    assert result.status is CardStatus.STALE
    assert result.result is not None and "lifecycle was active and is now deleting" in result.result.message
    assert await operations(admin, "pool.update") == []


async def test_reading_a_card_past_its_expiry_reports_it_expired(
    planner: Planner, store: SqliteCardStore, service: ApprovalService, clock: ManualClock
) -> None:
    card = await pending_scale_to_4(planner, store)
    clock.advance(600)

    assert (await service.get(card.id)).status is CardStatus.EXPIRED
