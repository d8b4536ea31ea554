"""Every approval channel through a real ``maya-tools serve --transport streamable-http`` with OAuth:
the real test provider signs people in (the SDK's ``mcp.client.auth`` client for MCP, a browser of
plain form posts for ``/connect`` and the approval page), the embedded-free reference backend in its
own process is Door, and each person's Door calls carry the Door token they connected on
``/connect`` (Door's request log shows whose), in both protocol generations."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.client.extension import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp.shared.exceptions import MCPError
from mcp_types import URL_ELICITATION_REQUIRED, ElicitRequestParams, ElicitRequestURLParams, ElicitResult

from maya_tools.channels.app_secret import META_KEY
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN
from tests.maya_tools.auth.test_serve_oauth import Memory, World
from tests.maya_tools.channels.live import LiveBrowser, calls_since, csrf_of, digest, last_seq, signed_in_client
from tests.maya_tools.channels.test_connect_door import UrlOnly
from tests.maya_tools.conftest import Person
from tests.oidc import ADMIN, MEMBER, User

pytestmark = pytest.mark.anyio

MODES = ["legacy", "modern"]
SCALE = ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3})
APPS = advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})


async def connected(world: World, user: User, door_token: str) -> None:
    """``user`` connects ``door_token`` on the served ``/connect`` in a browser of their own."""
    browser = LiveBrowser(world, user)
    try:
        await browser.connect(door_token)
    finally:
        await browser.aclose()


async def disconnected(world: World, user: User) -> None:
    browser = LiveBrowser(world, user)
    try:
        await browser.disconnect()
    finally:
        await browser.aclose()


def card_of(approval: dict[str, str]) -> dict[str, str]:
    """``decide_card``'s arguments from a result's ``_meta`` approval."""
    return {"card_id": approval["cardId"], "secret": approval["secret"]}


def patches(world: World, since: int) -> list[dict[str, Any]]:
    return [r for r in calls_since(world, since) if r["method"] == "PATCH"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_change_approved_by_the_form_runs_with_the_door_token_connected_on_connect(
    fresh: World, mode: str
) -> None:
    world = fresh
    await connected(world, ADMIN, DEMO_ADMIN_TOKEN)
    since = last_seq(world)
    answering = Person("accept")
    async with signed_in_client(world, ADMIN, mode, elicitation_callback=answering) as client:
        done = await client.call_tool(*SCALE)

    assert done.structured_content is not None and done.structured_content["changed"] is True, done.content
    assert len(answering.messages) == 1
    (patch,) = patches(world, since)
    assert patch["status"] == 202 and patch["token"] == digest(DEMO_ADMIN_TOKEN) and patch["user"] == "ada"


class PageVisitors:
    """The URL-only client's elicitation callback: the other person, signed in, opens the link first
    (refused, nothing changes); then the owner opens it in a browser not yet signed in, is sent
    through sign-in and back, and approves once."""

    def __init__(self, world: World, owner: User, other: User) -> None:
        self.world = world
        self.owner = owner
        self.other = other
        self.seen: dict[str, Any] = {}

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        assert isinstance(params, ElicitRequestURLParams)
        path = params.url.removeprefix(self.world.public_url)
        assert path != params.url, params.url
        since = last_seq(self.world)
        other = LiveBrowser(self.world, self.other)
        owner = LiveBrowser(self.world, self.owner)
        try:
            await other.visit("/connect")  # signed in as the other person
            self.seen["other_get"] = await other.get(path)
            self.seen["other_post"] = await other.post(path, {"csrf": "x", "decision": "approve"})
            self.seen["door_after_other"] = patches(self.world, since)
            self.seen["first"] = await owner.get(path)
            page = await owner.visit(path)
            assert page.status_code == 200, page.text[:400]
            self.seen["done"] = await owner.post(path, {"csrf": csrf_of(page), "decision": "approve"})
            self.seen["again"] = await owner.post(path, {"csrf": csrf_of(page), "decision": "approve"})
        finally:
            await other.aclose()
            await owner.aclose()
        return ElicitResult(action="accept")


@pytest.mark.parametrize("mode", MODES)
async def test_the_url_page_knows_who_opened_it_and_the_owner_approves_once(fresh: World, mode: str) -> None:
    world = fresh
    await connected(world, ADMIN, DEMO_ADMIN_TOKEN)
    await connected(world, MEMBER, DEMO_MEMBER_TOKEN)
    since = last_seq(world)
    visitors = PageVisitors(world, ADMIN, MEMBER)
    async with signed_in_client(world, ADMIN, mode, client_class=UrlOnly, elicitation_callback=visitors) as client:
        done = await client.call_tool(*SCALE)

    seen = visitors.seen
    assert seen["other_get"].status_code == 403 and seen["other_post"].status_code == 403
    assert seen["door_after_other"] == [], "the other person's visit changed nothing in Door"
    assert seen["first"].status_code == 303 and "/auth/login" in seen["first"].headers["location"]
    assert seen["done"].status_code == 200 and "executed" in seen["done"].text
    assert seen["again"].status_code == 404, "the one-time link is spent"
    assert done.structured_content is not None and done.structured_content["status"] == "executed", done
    (patch,) = patches(world, since)
    assert patch["token"] == digest(DEMO_ADMIN_TOKEN)


@pytest.mark.parametrize("mode", MODES)
async def test_the_apps_card_is_decided_by_its_meta_secret_and_only_by_its_own_person(fresh: World, mode: str) -> None:
    world = fresh
    await connected(world, ADMIN, DEMO_ADMIN_TOKEN)
    await connected(world, MEMBER, DEMO_MEMBER_TOKEN)
    since = last_seq(world)
    answering = Person("accept")
    async with signed_in_client(world, ADMIN, mode, extensions=[APPS], elicitation_callback=answering) as admin:
        shown = await admin.call_tool(*SCALE)
        assert shown.meta is not None and META_KEY in shown.meta, shown
        approval = shown.meta[META_KEY]
        decide = {"card_id": approval["cardId"], "secret": approval["secret"], "decision": "approve"}
        async with signed_in_client(world, MEMBER, mode, extensions=[APPS]) as member:
            theirs = await member.call_tool("decide_card", decide)
            peeked = await member.call_tool("get_card", {"card_id": approval["cardId"]})
        assert patches(world, since) == [], "the other person's decide changed nothing"
        done = await admin.call_tool("decide_card", decide)

    assert answering.messages == [], "an Apps client is never asked by a form"
    assert theirs.is_error and peeked.is_error, (theirs, peeked)
    assert approval["secret"] not in str(peeked.model_dump())
    assert done.structured_content is not None and done.structured_content["status"] == "executed", done
    (patch,) = patches(world, since)
    assert patch["token"] == digest(DEMO_ADMIN_TOKEN)


class Connecting:
    """A URL-only client's callback: a ``/connect?for=`` link is opened and the Door token connected
    in the person's browser; an approval page link is approved there."""

    def __init__(self, world: World, user: User, door_token: str) -> None:
        self.world = world
        self.user = user
        self.door_token = door_token
        self.urls: list[str] = []

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        assert isinstance(params, ElicitRequestURLParams)
        self.urls.append(params.url)
        browser = LiveBrowser(self.world, self.user)
        try:
            if "/connect?for=" in params.url:
                assert "Connect your Door account" in params.message
                await browser.connect(self.door_token, params.url)
            else:
                page = await browser.visit(params.url)
                done = await browser.post(params.url, {"csrf": csrf_of(page), "decision": "approve"})
                assert done.status_code == 200, done.text[:400]
        finally:
            await browser.aclose()
        return ElicitResult(action="accept")


async def test_2026_07_28_a_person_without_a_door_token_connects_in_the_round_and_the_change_runs(
    fresh: World,
) -> None:
    """The person made this very change before (executed), Door is back where it was, and their Door
    token is gone: the retry after connecting plans afresh and runs, rather than meet the old card
    by its request and change nothing (fails without ``answers_connect`` in ``form.card_for``)."""
    world = fresh
    await connected(world, ADMIN, DEMO_ADMIN_TOKEN)
    async with signed_in_client(world, ADMIN, "modern", elicitation_callback=Person("accept")) as client:
        before = await client.call_tool(*SCALE)
    assert before.structured_content is not None and before.structured_content["status"] == "executed"
    assert world.admin("POST", "/_reference/reset", json={"seed": "demo"}).status_code == 200
    await disconnected(world, ADMIN)
    since = last_seq(world)
    person = Connecting(world, ADMIN, DEMO_ADMIN_TOKEN)
    async with signed_in_client(world, ADMIN, "modern", client_class=UrlOnly, elicitation_callback=person) as client:
        done = await client.call_tool(*SCALE)

    connect, page = person.urls
    assert connect.startswith(world.public_url + "/connect?for=") and "/connect" not in page
    assert done.structured_content is not None and done.structured_content["changed"] is True, done
    assert DEMO_ADMIN_TOKEN not in str(done.model_dump())
    calls = calls_since(world, since)
    assert calls and {r["token"] for r in calls} == {digest(DEMO_ADMIN_TOKEN)}, calls


async def test_2025_11_25_a_person_without_a_door_token_is_sent_to_connect_then_the_call_runs(
    fresh: World,
) -> None:
    world = fresh
    await disconnected(world, ADMIN)
    since = last_seq(world)
    person = Connecting(world, ADMIN, DEMO_ADMIN_TOKEN)
    async with signed_in_client(world, ADMIN, "legacy", client_class=UrlOnly, elicitation_callback=person) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("list_clusters", {})
        assert calls_since(world, since) == [], "nothing reaches Door before the person connects"
        error = refused.value.error
        assert error.code == URL_ELICITATION_REQUIRED
        [asked] = (error.data or {})["elicitations"]
        assert asked["mode"] == "url" and "/connect?for=" in asked["url"]
        browser = LiveBrowser(world, ADMIN)
        try:
            await browser.connect(DEMO_ADMIN_TOKEN, asked["url"])
        finally:
            await browser.aclose()
        listed = await client.call_tool("list_clusters", {})

    assert not listed.is_error and "payments-prod" in str(listed.content)
    assert {r["token"] for r in calls_since(world, since)} == {digest(DEMO_ADMIN_TOKEN)}


@pytest.mark.parametrize("mode", MODES)
async def test_two_people_each_call_door_with_their_own_token_and_never_see_each_others_cards(
    fresh: World, mode: str
) -> None:
    """admin@door.test (a Door super_admin) and member@door.test (a member), each signed in and with
    their own Door token: Door's log shows whose token each call carried, never an MCP access token;
    the member's change is refused by Door's rule (R-AUTH-03); neither reads nor decides the other's card."""
    world = fresh
    await connected(world, ADMIN, DEMO_ADMIN_TOKEN)
    await connected(world, MEMBER, DEMO_MEMBER_TOKEN)
    since = last_seq(world)
    admin_tokens, member_tokens = Memory(), Memory()
    async with (
        signed_in_client(world, ADMIN, mode, admin_tokens, extensions=[APPS]) as admin,
        signed_in_client(world, MEMBER, mode, member_tokens, extensions=[APPS]) as member,
    ):
        mine = await admin.call_tool(*SCALE)
        theirs = await member.call_tool(*SCALE)
        assert mine.meta is not None, mine
        mine_card = mine.meta[META_KEY]
        member_reads_mine = await member.call_tool("get_card", {"card_id": mine_card["cardId"]})
        member_decides_mine = await member.call_tool("decide_card", {**card_of(mine_card), "decision": "approve"})
        # Door's role, once learnt, refuses the member's change before any card; else it makes one
        refused = theirs
        if theirs.meta is not None and META_KEY in theirs.meta:
            theirs_card = theirs.meta[META_KEY]
            admin_reads_theirs = await admin.call_tool("get_card", {"card_id": theirs_card["cardId"]})
            admin_decides_theirs = await admin.call_tool("decide_card", {**card_of(theirs_card), "decision": "approve"})
            assert admin_reads_theirs.is_error and admin_decides_theirs.is_error
            assert patches(world, since) == [], "nobody decided anything yet"
            refused = await member.call_tool("decide_card", {**card_of(theirs_card), "decision": "approve"})
        assert [r for r in patches(world, since) if r["status"] < 400] == [], "Door changed nothing yet"
        done = await admin.call_tool("decide_card", {**card_of(mine_card), "decision": "approve"})

    assert member_reads_mine.is_error and member_decides_mine.is_error
    assert done.structured_content is not None and done.structured_content["status"] == "executed", done
    assert "R-AUTH-03" in str(refused.model_dump()), refused
    calls = calls_since(world, since)
    by_user = {(r["user"], r["token"]) for r in calls}
    assert by_user == {("ada", digest(DEMO_ADMIN_TOKEN)), ("mel", digest(DEMO_MEMBER_TOKEN))}, by_user
    mcp_tokens = [t.access_token for t in (admin_tokens.tokens, member_tokens.tokens) if t is not None]
    assert len(mcp_tokens) == 2
    assert not {r["token"] for r in world.door_requests()} & {digest(t) for t in mcp_tokens}
    (patch,) = [r for r in calls if r["method"] == "PATCH" and r["status"] == 202]
    assert patch["user"] == "ada"


class Reconnecting(Connecting):
    """A person whose connect link must say that Door refused the token they had connected."""

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        assert isinstance(params, ElicitRequestURLParams)
        assert "/connect?for=" not in params.url or "Door refused the Door API token" in params.message, params
        return await super().__call__(context, params)


async def test_a_door_token_that_door_refuses_is_forgotten_and_the_person_connects_again(fresh: World) -> None:
    """Issue 20: "a Door 401 for a stored token asks the person to connect again". The token ada connected
    is revoked at Door; her next call gets Door's 401 (R-AUTH-01), the stored token is forgotten, the
    round asks her to connect again, and once she has, the call runs with the new token."""
    world = fresh
    revoked = "ada-token-revoked-later"
    assert world.admin(
        "PUT", f"/_reference/tokens/{revoked}", json={"user": "ada", "organisation": "payments", "role": "super_admin"}
    ).is_success
    await connected(world, ADMIN, revoked)
    assert world.admin("DELETE", f"/_reference/tokens/{revoked}").status_code == 204
    since = last_seq(world)
    person = Reconnecting(world, ADMIN, DEMO_ADMIN_TOKEN)
    async with signed_in_client(world, ADMIN, "modern", client_class=UrlOnly, elicitation_callback=person) as client:
        listed = await client.call_tool("list_clusters", {})

    assert [url for url in person.urls if "/connect?for=" in url], person.urls
    assert not listed.is_error and "payments-prod" in str(listed.content), listed
    calls = calls_since(world, since)
    assert (calls[0]["token"], calls[0]["status"]) == (digest(revoked), 401), calls
    assert {r["token"] for r in calls[1:]} == {digest(DEMO_ADMIN_TOKEN)}, calls
    assert revoked not in str(listed.model_dump())
