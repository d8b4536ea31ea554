"""Every warning the planner can make is said whole in every rendering (issue 27).

Each action is planned against the reference backend with the longest names Door allows (a cluster
name at the cards' 64-character cap, pool names of 63, the DNS-label maximum, R-ADD-01) and with
each source of warnings the planners have; then the text card, the Markdown card, the approval page,
the form question and get_card's summary must each hold every warning's sentence and rule exactly,
never cut and never counted, each at most ``WARNING_MAX`` characters, and the form question must keep
to ``FORM_MAX``. The role a change needs (R-AUTH-03) is said until Door has accepted a change of this
caller in that organisation.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

import pytest
from markupsafe import escape

from backend_client import DoorClient
from backend_client.models import NodeList, NodePool, PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from confirmation_cards import ApprovalService, Card, Planner, RoleMemory, SqliteCardStore
from confirmation_cards import warnings as w
from confirmation_cards.form import FORM_MAX, form_message
from confirmation_cards.render import NAME_SHOWN, environment, name_text, render_markdown, render_text
from confirmation_cards.tier_plan import plan_tier_change
from confirmation_cards.warnings import WARNING_MAX, shown
from maya_tools.channels.form import question
from reference_backend import seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock

pytestmark = pytest.mark.anyio

CLUSTER = "k" * 64
POOL = "p" * 63
OTHER = "q" * 63
SOLO = "s" * 63
LABELS = {"team": "payments", "tier": "web"}

Plan = Callable[[Planner], Awaitable[Card]]


def world(backend: ReferenceBackend) -> str:
    """A cluster of the longest names: a labelled autoscaling pool of three, a plain pool, a pool of one."""
    backend.set_credit(seed.DEMO_ORGANISATION, 1e9)
    cluster = backend.install_cluster(
        name=CLUSTER,
        organisation=seed.DEMO_ORGANISATION,
        pools=[
            PublicNodePoolCreateRequest(name=POOL, size="dks.c5.large", count=3, labels=LABELS, tags=LABELS),
            PublicNodePoolCreateRequest(name=OTHER, size="dks.c5.large", count=2),
            PublicNodePoolCreateRequest(name=SOLO, size="dks.c5.large", count=1),
        ],
    )
    return cluster.id


async def warm(admin: DoorClient, clock: ManualClock, cluster_id: str) -> None:
    """The first node read is cold (R-NODE-03); its refresh lands two seconds later."""
    await admin.list_nodes(cluster_id)
    clock.advance(3)


def page(card: Card) -> str:
    return environment().get_template("card.html.j2").render(card=card, view="done", refresh="")


def assert_whole(card: Card) -> None:
    asked = question(card)
    renderings = {
        "text": render_text(card),
        "markdown": render_markdown(card),
        "form": asked,
        "get_card": form_message(card, 1_200, closing=False),
    }
    assert len(asked) <= FORM_MAX, (card.action, len(asked), asked)
    assert card.warnings, card.action
    for warning in card.warnings:
        said = shown(warning)
        assert len(said) <= WARNING_MAX, (len(said), said)
        for name, rendering in renderings.items():
            assert said in rendering, (card.action, name, said, rendering)
        assert str(escape(said)) in page(card), (card.action, said)
    for rendering in (*renderings.values(), page(card)):
        assert "warnings (" not in rendering and "more warning" not in rendering
        assert '{"name"' not in rendering and "{“name”" not in rendering  # no JSON node diff


@pytest.fixture
async def cluster(backend: ReferenceBackend) -> str:
    return world(backend)


CASES: dict[str, tuple[Plan, set[str]]] = {
    "add with labels, autoscaling and credit": (
        lambda p: p.add_node_pool(
            CLUSTER,
            PublicNodePoolCreateRequest(
                name="a" * 63,
                size="dks.r5.xlarge",
                count=3,
                auto_scale=True,
                min_nodes=1,
                max_nodes=200,
                labels=LABELS,
                tags=LABELS,
            ),
        ),
        {"labels_not_node_labels", "autoscale_may_shrink", "credit_required", "role_needed"},
    ),
    "scale up": (
        lambda p: p.scale_node_pool(CLUSTER, OTHER, PublicNodePoolPatchRequest(count=200)),
        {"credit_required", "role_needed"},
    ),
    "scale down": (
        lambda p: p.scale_node_pool(CLUSTER, POOL, PublicNodePoolPatchRequest(count=1)),
        {"scale_down", "role_needed"},
    ),
    "autoscaling that may shrink": (
        lambda p: p.scale_node_pool(
            CLUSTER, POOL, PublicNodePoolPatchRequest(auto_scale=True, min_nodes=1, max_nodes=200)
        ),
        {"autoscale_may_shrink", "credit_required", "role_needed"},
    ),
    "relabel": (
        lambda p: p.relabel_node_pool(CLUSTER, OTHER, PublicNodePoolPatchRequest(labels=LABELS)),
        {"labels_not_node_labels", "role_needed"},
    ),
    "remove, inventory cold": (lambda p: p.remove_node_pool(CLUSTER, POOL), {"drains_workers", "role_needed"}),
    "replace, inventory cold": (lambda p: p.replace_node(CLUSTER, "n" * 64), {"node_unlisted", "role_needed"}),
    "tier change": (
        lambda p: plan_tier_change(p, CLUSTER, POOL, "dks.c5.2xlarge"),
        {"drains_workers", "name_changes", "credit_required", "role_needed"},
    ),
    "tier change keeping the name": (
        lambda p: plan_tier_change(p, CLUSTER, POOL, "dks.c5.2xlarge", keep_name=True),
        {"drains_workers", "credit_required", "role_needed"},
    ),
}


@pytest.mark.parametrize("case", CASES)
async def test_every_warning_of_every_action_is_said_whole_in_every_rendering(
    planner: Planner, cluster: str, case: str
) -> None:
    plan, expected = CASES[case]
    card = await plan(planner)
    assert {w.code for w in card.warnings} == expected
    assert_whole(card)


async def test_the_warnings_that_need_a_loaded_node_list_are_said_whole(
    planner: Planner, admin: DoorClient, clock: ManualClock, backend: ReferenceBackend, cluster: str
) -> None:
    await warm(admin, clock, cluster)
    nodes = (await admin.list_nodes(cluster)).items
    solo = next(n.name for n in nodes if n.pool == SOLO)
    assert len(solo) > 64  # <cluster>-<pool>-<5>: shown to the cards' cap, and the warning still fits

    cards = {
        "last ready node": await planner.replace_node(CLUSTER, solo),
        "unlisted node": await planner.replace_node(CLUSTER, "n" * 64),
        "remove, counted": await planner.remove_node_pool(CLUSTER, POOL),
    }
    backend.set_inventory(False)
    cards["remove, inventory down"] = await planner.remove_node_pool(CLUSTER, OTHER)

    assert [w.code for w in cards["last ready node"].warnings] == ["node_drained", "last_ready_node", "role_needed"]
    assert "running workers" in cards["remove, counted"].warnings[0].message
    assert "unavailable" in cards["remove, inventory down"].warnings[0].message
    for card in cards.values():
        assert_whole(card)


async def test_a_node_change_is_said_in_words_not_as_a_json_object(
    planner: Planner, admin: DoorClient, clock: ManualClock
) -> None:
    await warm(admin, clock, seed.DEMO_CLUSTER_ID)
    card = await planner.replace_node("payments-prod", seed.DEMO_NODE_NAME)

    line = f"node {seed.DEMO_NODE_NAME}: Running -> drained and deleted; Door adds a replacement"
    for rendering in (render_text(card), question(card)):
        assert line in rendering, rendering
    assert f"| node {seed.DEMO_NODE_NAME} | Running | drained and deleted; Door adds a replacement |" in (
        render_markdown(card)
    )
    assert f"<td>node {seed.DEMO_NODE_NAME}</td><td>Running</td>" in page(card)


async def test_a_new_pool_s_defaults_get_no_line_and_maps_are_written_as_entries(planner: Planner) -> None:
    request = PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge", count=2, labels={"team": "data"})
    scaling = request.model_copy(update={"name": "spot", "auto_scale": True, "min_nodes": 1, "max_nodes": 4})
    card = await planner.add_node_pool("payments-prod", request)
    autoscaling = await planner.add_node_pool("payments-prod", scaling)
    text_lines = ["  size: “dks.m5.xlarge”", "  count: 2", "  labels: “team”=“data”", "  root_volume_size_gib: 80"]
    # The form also leaves out the root volume (the tier's, R-POOL-04; the capacity line says it) and says
    # a new pool's autoscaling on one line.
    for rendering, expected in (
        (render_text(card), text_lines),
        (question(card), text_lines[:3]),
        (question(autoscaling), [*text_lines[:2], "  autoscaling: 1 to 4 workers", text_lines[2]]),
    ):
        changes = [
            line
            for line in re.split(r"\n(?:Planned capacity|Capacity)", rendering)[0].splitlines()
            if line.startswith("  ")
        ]
        assert changes == expected, rendering
        assert not any("none" in line or "auto_scale" in line or "tags" in line for line in changes), changes


async def test_the_role_a_change_needs_is_said_until_door_accepts_a_change_of_this_caller(
    admin: DoorClient, member: DoorClient, clock: ManualClock
) -> None:
    """R-AUTH-03: Door only tells by its answer to an approved change (DESIGN.md property 10)."""
    store = SqliteCardStore(":memory:")
    service = ApprovalService(store, clock=clock.now, roles=RoleMemory())
    as_admin = Planner(admin, clock=clock.now, principal="tok_admin", roles=service.roles)
    as_member = Planner(member, clock=clock.now, principal="tok_member", roles=service.roles)
    patch = PublicNodePoolPatchRequest(count=3)

    first = await store.create(await as_admin.scale_node_pool("payments-prod", "workers", patch))
    member_card = await store.create(await as_member.scale_node_pool("payments-prod", "workers", patch))
    assert "role_needed" in [w.code for w in first.warnings]
    assert "role_needed" in [w.code for w in member_card.warnings]  # a member is told before approving
    assert "R-AUTH-03" in question(member_card)

    assert (await service.approve(first.id, approver="ada", door=admin)).status == "executed"
    clock.advance(600)
    later = await as_admin.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=2))
    assert "role_needed" not in [w.code for w in later.warnings]  # Door took this caller's change
    still = await as_member.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=2))
    assert "role_needed" in [w.code for w in still.warnings]  # another caller: not known


def test_a_name_is_cut_only_past_the_cards_cap_or_when_escaping_would_double_it() -> None:
    dotted = "ip-10-0-1-5.eu-west-1.compute.internal"  # defanged and escaped: longer, still whole
    assert name_text(dotted) == "ip-10-0-1-5\\[.\\]eu-west-1\\[.\\]compute\\[.\\]internal"
    assert name_text("p" * 63) == "p" * 63
    hostile = name_text("&<*_`[" * 11)  # 66 characters that escape to five times their length
    assert len(hostile) <= NAME_SHOWN and hostile.endswith("…") and hostile.startswith("&amp;&lt;\\*")


async def test_a_removal_s_form_says_in_one_line_what_goes(planner: Planner, backend: ReferenceBackend) -> None:
    cluster = backend.cluster(seed.DEMO_CLUSTER_ID)
    assert cluster is not None
    backend.install_pool(cluster, PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge", count=1))
    card = await planner.remove_node_pool("payments-prod", "workers")

    assert "\n  pool: “dks.c5.xlarge” × 2 -> deleting\nCapacity: " in question(card)
    assert "  lifecycle: “active” -> “deleting”" in render_text(card)  # the text card keeps each field


def test_every_warning_is_one_sentence_of_at_most_140_characters_at_its_extremes() -> None:
    """Each constructor with the largest numbers (200 workers, prices of six figures) and names at the
    cards' cap; the stale node list too, which a planner meets only when Door's refresh lags."""
    pool = NodePool.model_construct(name="p" * 80, min_nodes=200, max_nodes=200)
    lists = [
        NodeList.model_construct(cold=cold, stale=stale)
        for cold, stale in ((True, False), (False, True), (False, False))
    ]
    made = [
        w.labels_warning(),
        w.autoscale_warning(pool),
        *(w.unlisted_node_warning(nodes) for nodes in lists),
        w.node_drained_warning("n" * 300),
        w.last_ready_warning(),
        w.scale_down_warning(200, 0),
        w.drain_warning(200, None, "the node list is not loaded yet"),
        w.drain_warning(200, None, "the node list is unavailable"),
        w.drain_warning(200, 200),
        w.plan_drain_warning(200),
        w.name_changes_warning("t" * 80),
        w.credit_warning(999999.99, 23999999.76),
        w.plan_credit_warning(999999.99, 23999999.76),
        w.role_warning(),
    ]
    assert "out of date" in made[3].message
    for warning in made:
        said = shown(warning)
        assert len(said) <= WARNING_MAX and "\n" not in said, (len(said), said)
