"""The team's policy (issue 28): denials and limits refuse before any card; cards wait for the right people.

Against the real reference backend over ASGI on a manual clock. Every request Door receives is
written down with the fingerprint of the token it carried (``Wire``), so "Door sees only GETs" and
"the PATCH went with the requester's own token" are read from what crossed the wire.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import anyio
import pytest
from fastapi import FastAPI

from backend_client import DoorClient
from backend_client.models import PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from confirmation_cards import (
    ApprovalRefused,
    ApprovalService,
    Approver,
    Card,
    CardStatus,
    Planner,
    PreflightError,
    SqliteCardStore,
    lifecycle,
    render_markdown,
    render_text,
    token_fingerprint,
)
from confirmation_cards.approvals import outstanding, waiting_line
from confirmation_cards.models import CardOwner
from confirmation_cards.owners import OwnerDoor
from confirmation_cards.policy import Policy, Target, check, parse_policy
from confirmation_cards.tier_plan import plan_tier_change
from reference_backend import seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.confirmation_cards.test_plan_owners import Seen, Wire
from tests.conftest import BASE_URL

pytestmark = pytest.mark.anyio

ISSUER = "https://id.example.test"
ANN = CardOwner(issuer=ISSUER, subject="ann")  # asks for the change; not in platform
REQUESTER = token_fingerprint(seed.DEMO_ADMIN_TOKEN)

FOUR_EYES = {
    "rule": [
        {
            "name": "prod-four-eyes",
            "clusters": ["tag:prod"],
            "approvals": 1,
            "approvers": {"claim": "groups", "any_of": ["platform"]},
            "self_approval": False,
        }
    ]
}
CAP = {"rule": [{"name": "cap", "clusters": ["*"], "max_count": 5, "sizes": ["dks.c5.large", "dks.c5.xlarge"]}]}
NO_PROD_REMOVALS = {
    "rule": [
        {
            "name": "no-prod-removals",
            "clusters": ["tag:prod"],
            "actions": ["remove"],
            "deny": "Pool removals on production go through a change ticket.",
        }
    ]
}


def person(subject: str, *groups: str, claim: Any = None) -> Approver:
    claims: dict[str, Any] = {"groups": list(groups)} if claim is None else {"groups": claim}
    return Approver(
        principal=f"sub_{subject}", issuer=ISSUER, subject=subject, name=f"{subject}@example.test", claims=claims
    )


REQUESTING = Approver(principal=REQUESTER, issuer=ISSUER, subject="ann", name="ann@example.test", claims={})


@pytest.fixture
def seen() -> Seen:
    return []


@pytest.fixture
async def door(app: FastAPI, seen: Seen) -> AsyncIterator[DoorClient]:
    async def no_sleep(_: float) -> None:
        pass

    async with DoorClient(BASE_URL, seed.DEMO_ADMIN_TOKEN, transport=Wire(app, seen), sleep=no_sleep) as client:
        yield client


class OwnersDoor:
    """The owner's own credential, as a server finds it for ``card.owner`` (only Ann's is held)."""

    def __init__(self, door: DoorClient) -> None:
        self.door = door
        self.asked_for: list[CardOwner | None] = []

    async def door_for(self, card: Card) -> OwnerDoor:
        self.asked_for.append(card.owner)
        assert card.owner == ANN
        return OwnerDoor(self.door, REQUESTER)


def planner_with(door: DoorClient, clock: ManualClock, policy: dict[str, Any] | Policy | None) -> Planner:
    parsed = policy if isinstance(policy, Policy) or policy is None else parse_policy(policy)
    return Planner(door, clock=clock.now, principal=REQUESTER, policy=parsed)


def mutations(seen: Seen) -> list[tuple[str, str]]:
    return [(method, token) for method, _, _, token in seen if method != "GET"]


async def planned(planner: Planner, store: SqliteCardStore, count: int = 4) -> Card:
    card = await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=count))
    return await store.create(card.model_copy(update={"owner": ANN}))


# --- denials and limits refuse before any card -------------------------------------------------------


async def test_a_deny_rule_refuses_a_prod_removal_before_any_card_naming_the_rule_and_its_reason(
    door: DoorClient, clock: ManualClock, backend: ReferenceBackend, seen: Seen
) -> None:
    pools = [PublicNodePoolCreateRequest(name=n, size="dks.c5.large", count=1) for n in ("web", "batch")]
    backend.install_cluster(name="orders-prod", organisation="payments", pools=pools, tags=["prod"])
    planner = planner_with(door, clock, NO_PROD_REMOVALS)

    with pytest.raises(PreflightError) as refused:
        await planner.remove_node_pool("orders-prod", "batch")

    said = str(refused.value)
    assert "no-prod-removals" in said and "Pool removals on production go through a change ticket." in said
    assert {method for method, *_ in seen} == {"GET"}
    # The same removal on a cluster without the tag is planned as before.
    backend.install_cluster(name="orders-dev", organisation="payments", pools=pools, tags=["dev"])
    card = await planner.remove_node_pool("orders-dev", "batch")
    assert card.policy is None


async def test_max_count_refuses_a_count_and_an_autoscale_bound_above_it_naming_the_rule_and_limit(
    door: DoorClient, clock: ManualClock, seen: Seen
) -> None:
    planner = planner_with(door, clock, CAP)

    with pytest.raises(PreflightError) as too_many:
        await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=6))
    assert "'cap'" in str(too_many.value) and "max_count = 5" in str(too_many.value)
    assert too_many.value.violation.field == "count"

    autoscale = PublicNodePoolPatchRequest(auto_scale=True, min_nodes=1, max_nodes=9)
    with pytest.raises(PreflightError) as bound:
        await planner.scale_node_pool("payments-prod", "workers", autoscale)
    assert bound.value.violation.field == "max_nodes" and "max_nodes 9" in str(bound.value)

    card = await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=5))
    assert card.policy is not None and card.policy.rules == ("cap",) and card.policy.requirements == ()
    assert {method for method, *_ in seen} == {"GET"}


async def test_sizes_limits_the_tiers_of_a_new_pool_and_of_a_tier_change(door: DoorClient, clock: ManualClock) -> None:
    planner = planner_with(door, clock, CAP)

    with pytest.raises(PreflightError) as added:
        await planner.add_node_pool(
            "payments-prod", PublicNodePoolCreateRequest(name="big", size="dks.m5.xlarge", count=1)
        )
    assert "'cap'" in str(added.value) and added.value.violation.field == "size"
    with pytest.raises(PreflightError) as moved:
        await plan_tier_change(planner, "payments-prod", "workers", "dks.c5.2xlarge")
    assert "dks.c5.2xlarge is not allowed" in str(moved.value)

    fine = await planner.add_node_pool(
        "payments-prod", PublicNodePoolCreateRequest(name="small", size="dks.c5.large", count=1)
    )
    assert fine.policy is not None and fine.policy.rules == ("cap",)


# --- cards that wait for the right people -----------------------------------------------------------


async def test_a_four_eyes_card_says_whom_it_waits_for_and_its_policy_is_in_its_digest(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore
) -> None:
    card = await planned(planner_with(door, clock, FOUR_EYES), store)

    assert card.policy is not None and card.policy.rules == ("prod-four-eyes",)
    for rendered in (render_text(card), render_markdown(card)):
        assert "Team policy" in rendered and "prod-four-eyes" in rendered
        assert (
            "Waiting: needs 1 approval from platform (rule prod-four-eyes); the person who asked cannot approve it."
            in rendered
        )
    assert waiting_line(card, REQUESTING) == (
        "needs 1 approval from platform (rule prod-four-eyes); you cannot approve your own change"
    )
    same = await planner_with(door, clock, FOUR_EYES).scale_node_pool(
        "payments-prod", "workers", PublicNodePoolPatchRequest(count=4)
    )
    assert (await lifecycle.keep_or_store(store, same, clock.now())).id == card.id
    # Planned again under other requirements (the file changed): another card, never the waiting one.
    two = {"rule": [{**FOUR_EYES["rule"][0], "approvals": 2}]}
    again = await planner_with(door, clock, two).scale_node_pool(
        "payments-prod", "workers", PublicNodePoolPatchRequest(count=4)
    )
    kept = await lifecycle.keep_or_store(store, again.model_copy(update={"owner": ANN}), clock.now())
    assert kept.id != card.id and kept.policy is not None and kept.policy.digest != card.policy.digest


async def test_the_requester_cannot_approve_a_four_eyes_card_in_their_own_channel_or_as_an_approver(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen
) -> None:
    service = ApprovalService(store, clock=clock.now, owners=OwnersDoor(door))
    card = await planned(planner_with(door, clock, FOUR_EYES), store)
    # Even holding the claim: self_approval = false.
    ann_in_platform = Approver(
        principal=REQUESTER, issuer=ISSUER, subject="ann", name="ann", claims={"groups": ["platform"]}
    )

    with pytest.raises(ApprovalRefused, match="you cannot approve your own change"):
        await service.approve(card.id, approver="ann (MCP elicitation)", door=door, person=ann_in_platform)
    with pytest.raises(ApprovalRefused, match="you cannot approve your own change"):
        await service.approve(card.id, approver="ann (MCP elicitation)", door=door)  # stdio: no claims at all
    with pytest.raises(ApprovalRefused, match="does not count the requester's own approval"):
        await service.approve_as(card.id, ann_in_platform)

    now = await service.get(card.id)
    assert now.status is CardStatus.PENDING and now.approvals == ()
    assert mutations(seen) == []
    assert [e.event for e in await store.audit(card.id)] == ["created"]


async def test_a_person_outside_the_approvers_is_refused_and_nothing_changes(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen
) -> None:
    service = ApprovalService(store, clock=clock.now, owners=OwnersDoor(door))
    card = await planned(planner_with(door, clock, FOUR_EYES), store)

    with pytest.raises(ApprovalRefused, match="needs a person whose groups claim holds platform"):
        await service.approve_as(card.id, person("carol", "payments"))
    with pytest.raises(ApprovalRefused, match="cannot decline"):
        await service.decline_as(card.id, person("carol", "payments"))

    now = await service.get(card.id)
    assert now.status is CardStatus.PENDING and now.approvals == ()
    assert mutations(seen) == []


async def test_a_qualifying_approval_executes_once_with_the_requesters_own_credential(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen
) -> None:
    owners = OwnersDoor(door)
    service = ApprovalService(store, clock=clock.now, owners=owners)
    card = await planned(planner_with(door, clock, FOUR_EYES), store)

    done = await service.approve_as(card.id, person("bob", "platform", "sre"))
    again = await service.approve_as(card.id, person("dan", "platform"))  # after it ran: changes nothing

    assert done.status is CardStatus.EXECUTED and again.status is CardStatus.EXECUTED
    assert mutations(seen) == [("PATCH", REQUESTER)]  # one PATCH, with Ann's token: Door records who asked
    assert set(owners.asked_for) == {ANN}
    assert [(a.subject, a.claims, a.rules) for a in done.approvals] == [
        ("bob", {"groups": ("platform", "sre")}, ("prod-four-eyes",))
    ]
    events = await store.audit(card.id)
    assert [e.event for e in events] == ["created", "approval", "approved", "executed"]
    assert events[1].by is not None and "bob@example.test" in events[1].by and events[1].rule == "prod-four-eyes"
    assert events[2].by is not None and "approvals: bob@example.test" in events[2].by


async def test_a_claim_given_as_one_string_qualifies_too(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen
) -> None:
    service = ApprovalService(store, clock=clock.now, owners=OwnersDoor(door))
    card = await planned(planner_with(door, clock, FOUR_EYES), store)

    done = await service.approve_as(card.id, person("bob", claim="platform"))

    assert done.status is CardStatus.EXECUTED and mutations(seen) == [("PATCH", REQUESTER)]


async def test_two_approvals_needed_means_one_is_not_enough_and_one_person_counts_once(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen
) -> None:
    service = ApprovalService(store, clock=clock.now, owners=OwnersDoor(door))
    two = {"rule": [{**FOUR_EYES["rule"][0], "approvals": 2}]}
    card = await planned(planner_with(door, clock, two), store)

    first = await service.approve_as(card.id, person("bob", "platform"))
    assert first.status is CardStatus.PENDING and mutations(seen) == []
    assert (
        waiting_line(first)
        == "needs 1 approval from platform (rule prod-four-eyes); the person who asked cannot approve it"
    )
    with pytest.raises(ApprovalRefused, match="already approved"):
        await service.approve_as(card.id, person("bob", "platform"))
    assert [a.subject for a in (await service.get(card.id)).approvals] == ["bob"]

    done = await service.approve_as(card.id, person("eve", "platform"))
    assert done.status is CardStatus.EXECUTED and mutations(seen) == [("PATCH", REQUESTER)]
    assert [a.subject for a in done.approvals] == ["bob", "eve"] and outstanding(done) == []


async def test_each_matching_rule_is_met_on_its_own(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen
) -> None:
    both = {
        "rule": [
            FOUR_EYES["rule"][0],
            {
                "name": "sre-too",
                "clusters": ["payments-prod"],
                "approvals": 1,
                "approvers": {"claim": "groups", "any_of": ["sre"]},
            },
        ]
    }
    service = ApprovalService(store, clock=clock.now, owners=OwnersDoor(door))
    card = await planned(planner_with(door, clock, both), store)

    after_bob = await service.approve_as(card.id, person("bob", "platform"))
    assert after_bob.status is CardStatus.PENDING and [r.rule for r, _ in outstanding(after_bob)] == ["sre-too"]
    done = await service.approve_as(card.id, person("sam", "sre"))
    assert done.status is CardStatus.EXECUTED and mutations(seen) == [("PATCH", REQUESTER)]


async def test_a_decline_by_an_approver_ends_the_card(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen
) -> None:
    service = ApprovalService(store, clock=clock.now, owners=OwnersDoor(door))
    card = await planned(planner_with(door, clock, FOUR_EYES), store)

    declined = await service.decline_as(card.id, person("bob", "platform"), reason="not during the freeze")
    late = await service.approve_as(card.id, person("eve", "platform"))

    assert declined.status is CardStatus.DECLINED and late.status is CardStatus.DECLINED
    assert declined.declined_by is not None and "prod-four-eyes" in declined.declined_by
    assert mutations(seen) == []


async def test_an_expired_waiting_card_takes_no_approval(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen
) -> None:
    service = ApprovalService(store, clock=clock.now, owners=OwnersDoor(door))
    card = await planned(planner_with(door, clock, FOUR_EYES), store)
    clock.advance(timedelta(minutes=11).total_seconds())

    late = await service.approve_as(card.id, person("bob", "platform"))

    assert late.status is CardStatus.EXPIRED and late.approvals == () and mutations(seen) == []


async def test_a_card_whose_policy_does_not_match_its_digest_never_executes(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen
) -> None:
    service = ApprovalService(store, clock=clock.now, owners=OwnersDoor(door))
    planned_card = await planner_with(door, clock, FOUR_EYES).scale_node_pool(
        "payments-prod", "workers", PublicNodePoolPatchRequest(count=4)
    )
    assert planned_card.policy is not None
    # The requirement loosened in the stored card without its digest: a forged or corrupted row.
    loose = planned_card.policy.requirements[0].model_copy(update={"any_of": ("payments",)})
    forged = planned_card.policy.model_copy(update={"requirements": (loose,)})
    card = await store.create(planned_card.model_copy(update={"owner": ANN, "policy": forged}))

    with pytest.raises(ApprovalRefused, match="does not match its policy digest"):
        await service.approve_as(card.id, person("carol", "payments"))

    assert (await service.get(card.id)).status is CardStatus.PENDING and mutations(seen) == []


async def test_a_card_without_approvers_is_still_its_requesters_alone(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen
) -> None:
    service = ApprovalService(store, clock=clock.now, owners=OwnersDoor(door))
    card = await planned(planner_with(door, clock, CAP), store)

    with pytest.raises(ApprovalRefused, match="only the person who asked"):
        await service.approve_as(card.id, person("bob", "platform"))
    done = await service.approve(card.id, approver="ann (MCP elicitation)", door=door)

    assert done.status is CardStatus.EXECUTED and mutations(seen) == [("PATCH", REQUESTER)]


async def test_the_created_audit_names_the_rules_that_applied_and_their_digest(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore
) -> None:
    card = await planned(planner_with(door, clock, FOUR_EYES), store)

    [created] = await store.audit(card.id)

    assert card.policy is not None
    assert f"policy rules prod-four-eyes (prod-four-eyes needs 1), policy sha256 {card.policy.digest}" in created.detail


def test_a_rule_naming_clients_refuses_any_other_client_before_any_card() -> None:
    policy = parse_policy({"rule": [{"name": "ide-only", "clusters": ["*"], "clients": ["vscode-maya"]}]})
    target = Target(
        action="scale_node_pool",
        cluster_id="c1",
        cluster_name="payments-prod",
        cluster_tags=("prod",),
        pool="workers",
        counts=(("count", 4),),
        size=None,
        client="some-other-app",
    )

    with pytest.raises(PreflightError) as refused:
        check(policy, target)
    assert "ide-only" in str(refused.value) and "'some-other-app'" in str(refused.value)
    assert refused.value.violation.field == "client"
    allowed = check(policy, dataclasses.replace(target, client="vscode-maya"))
    assert allowed is not None and allowed.rules == ("ide-only",)


def test_rules_match_by_cluster_name_id_tag_pool_glob_and_action() -> None:
    def rule(**fields: Any) -> Policy:
        return parse_policy({"rule": [{"name": "r", "clusters": ["*"], **fields}]})

    target = Target(
        action="replace_node",
        cluster_id="c1",
        cluster_name="payments-prod",
        cluster_tags=("prod", "eu"),
        pool="web-blue",
        counts=(),
        size=None,
    )
    assert check(rule(clusters=["c1"]), target) is not None
    assert check(rule(clusters=["payments-prod"]), target) is not None
    assert check(rule(clusters=["tag:eu"]), target) is not None
    assert check(rule(clusters=["tag:us", "staging"]), target) is None
    assert check(rule(pools=["web-*"]), target) is not None
    assert check(rule(pools=["batch"]), target) is None
    assert check(rule(pools=["batch"]), dataclasses.replace(target, pool=None)) is not None  # unknown: fail closed
    assert check(rule(actions=["replace"]), target) is not None
    assert check(rule(actions=["scale", "add"]), target) is None


async def test_a_requester_who_qualifies_under_self_approval_approves_in_their_own_channel(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen
) -> None:
    own = {"rule": [{**FOUR_EYES["rule"][0], "self_approval": True}]}
    service = ApprovalService(store, clock=clock.now, owners=OwnersDoor(door))
    card = await planned(planner_with(door, clock, own), store)
    ann_in_platform = Approver(
        principal=REQUESTER, issuer=ISSUER, subject="ann", name="ann", claims={"groups": ["platform"]}
    )

    with pytest.raises(ApprovalRefused, match="your own approval is not enough"):
        await service.approve(card.id, approver="ann (MCP elicitation)", door=door, person=REQUESTING)
    done = await service.approve(card.id, approver="ann (MCP elicitation)", door=door, person=ann_in_platform)

    assert done.status is CardStatus.EXECUTED and mutations(seen) == [("PATCH", REQUESTER)]
    assert [(a.subject, a.rules) for a in done.approvals] == [("ann", ("prod-four-eyes",))]


async def test_racing_qualifying_approvers_execute_the_card_exactly_once(
    door: DoorClient, clock: ManualClock, store: SqliteCardStore, seen: Seen
) -> None:
    service = ApprovalService(store, clock=clock.now, owners=OwnersDoor(door))
    card = await planned(planner_with(door, clock, FOUR_EYES), store)
    results: list[Card] = []

    async def approve(who: str) -> None:
        results.append(await service.approve_as(card.id, person(who, "platform")))

    async with anyio.create_task_group() as group:
        for i in range(10):
            group.start_soon(approve, f"approver{i}")

    assert mutations(seen) == [("PATCH", REQUESTER)]
    final = await service.get(card.id)
    assert final.status is CardStatus.EXECUTED
    assert [e.event for e in await store.audit(card.id)].count("approved") == 1
