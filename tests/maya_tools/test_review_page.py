"""The review page in process (issue 28): what needs the server's clock or Door held still.

``serve``'s own HTTP app (``build_app``, OAuth) with the real test provider, the reference backend on a
manual clock as Door (every request's bearer recorded), and the approver's browser reaching the app over
ASGI and the provider over loopback. The live test (``test_policy_live``) covers the rest through real
processes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from starlette.types import ASGIApp

from backend_client.tls import verifying_tls
from confirmation_cards import CardStatus
from confirmation_cards.policy import Policy, parse_policy
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.auth.served import PUBLIC_URL, RESOURCE, Served, served
from tests.maya_tools.auth.site import Browser, csrf_of
from tests.oidc import OpenIDProvider, User

pytestmark = pytest.mark.anyio

ADA = User("admin", "admin@door.test", "admin-password", "admin", groups=("dev",))
PAT = User("pat", "pat@door.test", "pat-password", "pat", groups=("platform",))
QUINN = User("quinn", "quinn@door.test", "quinn-password", "quinn", groups=("platform",))
POLICY = parse_policy(
    {
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
)


@dataclass
class Origin:
    """What ``Browser`` needs of a site: the app behind ``origin``."""

    app: ASGIApp
    origin: str = PUBLIC_URL


@pytest.fixture(scope="module")
def provider() -> Iterator[OpenIDProvider]:
    with OpenIDProvider(
        [RESOURCE], redirect_uris=[PUBLIC_URL + "/auth/callback"], users=[ADA, PAT, QUINN]
    ).running() as up:
        yield up


@pytest.fixture
def policy() -> Policy:
    return POLICY


@pytest.fixture
async def site(
    provider: OpenIDProvider,
    backend: ReferenceBackend,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    policy: Policy,
) -> AsyncIterator[Served]:
    async with served(provider, backend, tmp_path / "cards.sqlite3", monkeypatch, policy=policy) as running:
        yield running


@pytest.fixture
async def pat(site: Served) -> AsyncIterator[Browser]:
    browser = Browser(Origin(site.app), PAT)  # type: ignore[arg-type]
    try:
        yield browser
    finally:
        await browser.aclose()


async def ask(site: Served, provider: OpenIDProvider, tool: str, arguments: dict[str, Any]) -> str:
    """ada asks (her Door token connected); the card waits for platform."""
    await site.connect_door(ADA, DEMO_ADMIN_TOKEN)
    async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10.0) as http:
        token = await provider.access_token(http, ADA)
    async with site.mcp(token, "modern") as client:
        asked = await client.call_tool(tool, arguments)
    assert asked.structured_content is not None and asked.structured_content["status"] == "pending", asked.content
    return str(asked.structured_content["card"]["id"])


def door_mutations(site: Served, backend: ReferenceBackend) -> list[tuple[str, str]]:
    return [(r["method"], r["path"]) for r in backend.requests_since(0) if r["method"] != "GET"]


async def test_an_expired_card_is_not_listed_offers_no_approval_and_executes_nothing(
    site: Served, provider: OpenIDProvider, pat: Browser, clock: ManualClock, backend: ReferenceBackend
) -> None:
    card_id = await ask(site, provider, "scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3})
    page = await pat.visit(f"/cards/{card_id}")
    assert page.status_code == 200 and 'value="approve"' in page.text
    token = csrf_of(page)

    clock.advance(site.settings.card_ttl_seconds + 1)  # past its expiry; the sweep has not closed it yet

    listed = await pat.visit("/cards")
    assert listed.status_code == 200 and card_id not in listed.text
    again = await pat.visit(f"/cards/{card_id}")
    assert again.status_code == 200 and 'value="approve"' not in again.text, again.text[:800]
    posted = await pat.post(f"/cards/{card_id}", {"csrf": token, "decision": "approve"})
    assert posted.status_code == 200 and "Status: executed" not in posted.text
    (card,) = await site.cards()
    assert card.status in (CardStatus.PENDING, CardStatus.EXPIRED) and card.approvals == ()
    assert door_mutations(site, backend) == []


async def test_a_plan_approved_on_the_review_page_runs_in_the_servers_task_group_as_its_requester(
    site: Served, provider: OpenIDProvider, pat: Browser, backend: ReferenceBackend
) -> None:
    """The tier move's first step is sent with ada's Door token; the page answers once it is under way,
    while the plan waits for Door's clock (held still) for the new pool's workers."""
    move = {"cluster": "payments-prod", "pool": "workers", "size": "dks.c5.2xlarge"}
    card_id = await ask(site, provider, "change_pool_tier", move)
    page = await pat.visit(f"/cards/{card_id}")
    with anyio.fail_after(30):  # the plan itself waits for Door's clock: the page must not
        done = await pat.post(f"/cards/{card_id}", {"csrf": csrf_of(page), "decision": "approve"})

    assert done.status_code == 200 and "Status: executing" in done.text, done.text[:1200]
    (card,) = await site.cards()
    assert card.status is CardStatus.EXECUTING and [a.subject for a in card.approvals] == ["pat"]
    assert [m for m, _ in door_mutations(site, backend)] == ["POST"]
    assert f"Bearer {DEMO_ADMIN_TOKEN}" in site.door_bearers and all(
        b == f"Bearer {DEMO_ADMIN_TOKEN}" for b in site.door_bearers if b
    )


TWO = parse_policy({"rule": [{**POLICY.model_dump()["rule"][0], "approvals": 2}]})


@pytest.mark.parametrize("policy", [TWO], ids=["two approvals"])
async def test_each_approval_on_the_review_page_counts_once_and_the_last_one_needed_executes(
    site: Served, provider: OpenIDProvider, pat: Browser, backend: ReferenceBackend
) -> None:
    card_id = await ask(site, provider, "scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3})
    page = await pat.visit(f"/cards/{card_id}")
    first = await pat.post(f"/cards/{card_id}", {"csrf": csrf_of(page), "decision": "approve"})
    assert first.status_code == 200 and "Status: pending" in first.text, first.text[:1200]
    assert "needs 1 approval from platform (rule prod-four-eyes)" in first.text
    again = await pat.post(f"/cards/{card_id}", {"csrf": csrf_of(page), "decision": "approve"})
    assert again.status_code == 403 and "You already approved this card" in again.text, again.text[:800]
    assert card_id not in (await pat.visit("/cards")).text
    assert door_mutations(site, backend) == []

    quinn = Browser(Origin(site.app), QUINN)  # type: ignore[arg-type]
    try:
        assert f'href="/cards/{card_id}"' in (await quinn.visit("/cards")).text
        page = await quinn.visit(f"/cards/{card_id}")
        done = await quinn.post(f"/cards/{card_id}", {"csrf": csrf_of(page), "decision": "approve"})
    finally:
        await quinn.aclose()
    assert done.status_code == 200 and "Status: executed" in done.text, done.text[:1200]
    (card,) = await site.cards()
    assert [a.subject for a in card.approvals] == ["pat", "quinn"]
    assert [m for m, _ in door_mutations(site, backend)] == ["PATCH"]
    assert {b for b in site.door_bearers if b} == {f"Bearer {DEMO_ADMIN_TOKEN}"}


async def test_the_list_holds_every_card_waiting_for_the_person_newest_first(
    site: Served, provider: OpenIDProvider, pat: Browser, clock: ManualClock
) -> None:
    older = await ask(site, provider, "scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3})
    clock.advance(60)
    newer = await ask(site, provider, "scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 4})
    listed = (await pat.visit("/cards")).text
    assert older in listed and newer in listed and listed.index(newer) < listed.index(older), listed


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3}),
        ("change_pool_tier", {"cluster": "payments-prod", "pool": "workers", "size": "dks.c5.2xlarge"}),
    ],
    ids=["a change", "a plan"],
)
async def test_when_the_service_refuses_what_the_page_allowed_the_answer_is_403_and_nothing_runs(
    site: Served,
    provider: OpenIDProvider,
    pat: Browser,
    backend: ReferenceBackend,
    tmp_path: Path,
    tool: str,
    arguments: dict[str, Any],
) -> None:
    """A card whose stored policy no longer matches its digest (a store written by something else): the page
    offers it, the service refuses to run it, and the page says so (403) rather than failing."""
    card_id = await ask(site, provider, tool, arguments)
    page = await pat.visit(f"/cards/{card_id}")
    with sqlite3.connect(tmp_path / "cards.sqlite3") as db:
        db.execute("UPDATE cards SET data = json_set(data, '$.policy.digest', ?) WHERE id = ?", ("0" * 64, card_id))
    with anyio.fail_after(30):
        posted = await pat.post(f"/cards/{card_id}", {"csrf": csrf_of(page), "decision": "approve"})
    assert posted.status_code == 403 and "does not match its policy digest" in posted.text, posted.text[:1200]
    (card,) = await site.cards()
    assert card.status is CardStatus.PENDING
    assert door_mutations(site, backend) == []
