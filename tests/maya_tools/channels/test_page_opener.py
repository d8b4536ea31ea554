"""The approval page verifies who opens it (OAuth over HTTP): only the browser sign-in of the card's own
person decides a link, and Door is then called with that person's own Door token, on any replica.

Real pieces throughout: the test provider signs people in (its own login and consent forms, posted
as a browser would), the reference backend is Door, and the page is the server's own, reached over
ASGI at the public URL. Who may open a link, through a real ``serve --auth oauth`` and both protocol
generations, is in ``test_channels_served.py``; here what a second replica and a missing Door token do."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from confirmation_cards import CardStatus
from maya_tools.auth import ConnectionInfo
from reference_backend.seed import DEMO_ORGANISATION
from tests.maya_tools.auth.site import Browser, csrf_of
from tests.maya_tools.channels.conftest import Team
from tests.oidc import ADMIN, User

pytestmark = pytest.mark.anyio


async def connected(team: Team, user: User, token: str) -> None:
    """``user`` has connected ``token`` on /connect (the credentials are shared by every replica)."""
    credentials = team.replicas[0].runtime.credentials
    assert credentials is not None
    checked = ConnectionInfo(checked_at=datetime.now(UTC), organisations=(DEMO_ORGANISATION,), clusters=())
    await credentials.put(team.person(user), token, checked=checked)


async def status(team: Team, card_id: str) -> CardStatus:
    return (await team.replicas[0].runtime.service.get(card_id)).status


async def decide(browser: Browser, path: str, decision: str = "approve") -> tuple[int, str]:
    page = await browser.visit(path)
    assert page.status_code == 200, page.text[:400]
    done = await browser.post(path, {"csrf": csrf_of(page), "decision": decision})
    return done.status_code, done.text


async def test_a_link_sent_by_one_replica_is_decided_on_another_with_the_owners_door_token(
    team: Team, tokens: dict[str, str]
) -> None:
    await connected(team, ADMIN, tokens["admin"])
    card = await team.card(ADMIN, tokens["admin"], on=0)
    path = await team.link(card, on=0)
    assert "via=" not in path  # under OAuth a link names no replica: any of them can decide it
    other = team.replicas[1]
    admin = Browser(other.site, ADMIN)

    code, text = await decide(admin, path)

    assert code == 200 and "executed" in text
    assert await status(team, card.id) is CardStatus.EXECUTED
    assert f"Bearer {tokens['admin']}" in other.door_auth
    audit = await other.runtime.store.audit(card.id)
    assert any(ADMIN.email in (entry.by or "") and "approval page" in (entry.by or "") for entry in audit)
    await admin.aclose()


async def test_the_owner_without_a_connected_door_token_changes_nothing_and_keeps_the_link(
    team: Team, tokens: dict[str, str]
) -> None:
    card = await team.card(ADMIN, tokens["admin"])
    path = await team.link(card)
    admin = Browser(team.replicas[1].site, ADMIN)

    code, text = await decide(admin, path)

    assert code == 409 and "Connect your Door account first" in text and 'href="/connect"' in text
    assert await status(team, card.id) is CardStatus.PENDING
    await connected(team, ADMIN, tokens["admin"])
    code, _ = await decide(admin, path)
    assert code == 200 and await status(team, card.id) is CardStatus.EXECUTED
    await admin.aclose()
