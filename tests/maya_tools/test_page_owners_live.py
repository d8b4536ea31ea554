"""The approval page's owner checks, through a real ``serve --auth oauth`` (issue 26, point 12): a signed-in
person who is not the card's owner, holding the link and a form token that is valid for their own
browser session, is refused on POST, nothing executes and Door sees no request of the card; and that
person opening a running plan's progress view gets what a card that does not exist gets. The form
token is bound to the browser's session: the owner's other browser cannot use the token either.

The real test provider signs people in (the SDK's OAuth client for MCP, plain form posts in the
browsers), a real ``maya-tools reference-backend`` on a manual clock is Door (held, so a plan stays in
its wait step), and Door's request log says what reached it. The form token a signed-in person's
browser would be shown is computed from the server's ``MAYA_CREDENTIAL_KEY``, as every replica computes it.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import ElicitRequestParams, ElicitRequestURLParams, ElicitResult

from maya_tools.auth import parse_credential_keys
from maya_tools.auth.pages import FormTokens
from maya_tools.channels.page import form_purpose
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN
from tests.maya_tools.auth.test_serve_oauth import World
from tests.maya_tools.channels.live import LiveBrowser, csrf_of, digest, signed_in_client
from tests.maya_tools.channels.test_connect_door import UrlOnly
from tests.maya_tools.test_plans_live import DoorClock
from tests.maya_tools.test_plans_owner_live import MOVE, last_seq, requests_since, site, world  # noqa: F401
from tests.oidc import ADMIN, MEMBER

pytestmark = [pytest.mark.anyio, pytest.mark.http]

# ruff: noqa: F811 (``site`` and ``world`` are test_plans_owner_live's fixtures, imported by name)

MODES = ["legacy", "modern"]
SCALE = ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3})
SESSION_COOKIE = "maya-session"  # an http:// public URL: no __Host- prefix


def forms(world: World) -> FormTokens:
    return FormTokens.derived(parse_credential_keys(world.key))


class OtherPersonPosts:
    """The URL-only client's callback: mel, signed in, posts the link's form with a token valid for her
    own session; then ada approves in her own browser."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.seen: dict[str, Any] = {}

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        assert isinstance(params, ElicitRequestURLParams)
        path = params.url.removeprefix(self.world.public_url)
        card_id = path.split("/")[2]
        seen, tokens = self.seen, forms(self.world)
        mel, ada, ada_elsewhere = (LiveBrowser(self.world, user) for user in (MEMBER, ADMIN, ADMIN))
        try:
            await mel.visit("/connect")
            seen["mel_get"] = await mel.get(path)
            valid = tokens.token(mel.http.cookies[SESSION_COOKIE], form_purpose(card_id))
            since = last_seq(self.world)
            seen["mel_post"] = await mel.post(path, {"csrf": valid, "decision": "approve"})
            seen["door_after_mel"] = requests_since(self.world, since)
            if seen["mel_post"].status_code != 403:
                return ElicitResult(action="accept")  # her post was taken: the assertions say so
            page = await ada.visit(path)
            seen["ada_token"] = csrf_of(page)
            seen["ada_token_computed"] = tokens.token(ada.http.cookies[SESSION_COOKIE], form_purpose(card_id))
            await ada_elsewhere.visit(path)  # ada's other browser, signed in: her own session, not this one
            seen["elsewhere_post"] = await ada_elsewhere.post(path, {"csrf": csrf_of(page), "decision": "approve"})
            seen["door_after_elsewhere"] = requests_since(self.world, since)
            seen["done"] = await ada.post(path, {"csrf": csrf_of(page), "decision": "approve"})
        finally:
            for browser in (mel, ada, ada_elsewhere):
                await browser.aclose()
        return ElicitResult(action="accept")


@pytest.mark.parametrize("mode", MODES)
async def test_another_signed_in_person_with_a_valid_form_token_cannot_approve(world: World, mode: str) -> None:
    await world.connect_door(MEMBER, DEMO_MEMBER_TOKEN)
    since = last_seq(world)
    posting = OtherPersonPosts(world)
    async with signed_in_client(world, ADMIN, mode, client_class=UrlOnly, elicitation_callback=posting) as client:
        done = await client.call_tool(*SCALE)

    seen = posting.seen
    assert seen["mel_post"].status_code == 403 and "executed" not in seen["mel_post"].text
    assert seen["door_after_mel"] == [], "nothing of mel's post reached Door"
    assert seen["mel_get"].status_code == 403 and 'method="post"' not in seen["mel_get"].text
    assert seen["elsewhere_post"].status_code == 403 and seen["door_after_elsewhere"] == []
    assert seen["done"].status_code == 200 and "executed" in seen["done"].text, "the link stayed usable for ada"
    assert done.structured_content is not None and done.structured_content["status"] == "executed", done
    patches = [r for r in requests_since(world, since) if r["method"] == "PATCH"]
    assert [p["token"] for p in patches] == [digest(DEMO_ADMIN_TOKEN)]
    assert seen["ada_token"] == seen["ada_token_computed"], "mel's token was computed as the server computes one"


class OwnerStartsPlan:
    """The URL-only client's callback: ada approves the plan on the page, in a browser kept open."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.paths: list[str] = []
        self.answered: list[Any] = []
        self.ada = LiveBrowser(world, ADMIN)

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        assert isinstance(params, ElicitRequestURLParams)
        path = params.url.removeprefix(self.world.public_url)
        self.paths.append(path)
        page = await self.ada.visit(path)
        self.answered.append(await self.ada.post(path, {"csrf": csrf_of(page), "decision": "approve"}))
        return ElicitResult(action="accept")


@pytest.mark.parametrize("mode", MODES)
async def test_another_signed_in_person_sees_a_running_plans_progress_as_a_card_that_does_not_exist(
    world: World, mode: str
) -> None:
    owner = OwnerStartsPlan(world)
    mel = LiveBrowser(world, MEMBER)
    try:
        with DoorClock(world):  # held: the new pool's nodes stay Pending, the plan waits
            async with signed_in_client(world, ADMIN, mode, client_class=UrlOnly, elicitation_callback=owner) as c:
                started = await c.call_tool(*MOVE)
            [path] = owner.paths
            progress = path.split("?")[0] + "/progress"
            await mel.visit("/connect")
            theirs = await mel.get(progress)
            card_id, secret = path.split("/")[2], path.split("/")[3].split("?")[0]
            unknown = await mel.get(f"/approve/card_{'x' * 16}/{secret}/progress")
            ada_sees = await owner.ada.get(progress)
    finally:
        await mel.aclose()
        await owner.ada.aclose()

    assert started.structured_content is not None and started.structured_content["status"] == "executing", started
    [answered] = owner.answered
    assert answered.status_code == 200 and "Status: executing" in answered.text, answered.text[:400]
    assert ada_sees.status_code == 200 and "Status: executing" in ada_sees.text
    assert (theirs.status_code, theirs.text) == (unknown.status_code, unknown.text) and theirs.status_code == 404
    assert card_id not in theirs.text and "executing" not in theirs.text
