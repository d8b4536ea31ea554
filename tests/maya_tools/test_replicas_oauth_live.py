"""Three real ``maya-tools serve --auth oauth`` replicas on one PostgreSQL store behind docs/deploy.md's
HAProxy (its OAuth form: no ``via`` lines), one real Door and the real test provider: a card planned
through one replica is approved through another by the form (the 2026-07-28 retry round sent to a
different replica; a 2025-11-25 session on another replica meeting the pending card), by the approval
page (the owner's browser session, the page on a replica that did not ask) and by the Apps card
(``decide_card`` on another replica), in both protocol generations. Each executes once, with the
owner's own Door token connected on ``/connect`` (Door's request log), never an MCP access token."""

from __future__ import annotations

import secrets
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitRequestParams, ElicitRequestURLParams, ElicitResult

from backend_client.tls import verifying_tls
from maya_tools.channels.app_secret import META_KEY
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.auth.test_serve_oauth import Memory, World, oauth_client
from tests.maya_tools.channels.live import LiveBrowser, calls_since, csrf_of, digest, last_seq, signed_in_client
from tests.maya_tools.channels.test_channels_served import APPS, connected
from tests.maya_tools.channels.test_connect_door import UrlOnly
from tests.maya_tools.conftest import Person
from tests.maya_tools.live import free_port, wait_until
from tests.maya_tools.test_plans_live import DoorClock
from tests.maya_tools.test_replicas_live import Replicas, haproxy, haproxy_config
from tests.oidc import ADMIN, SERVER_CLIENT_ID, SERVER_CLIENT_SECRET, OpenIDProvider
from tests.postgres import PostgresServer, fresh_schema

pytestmark = [pytest.mark.anyio, pytest.mark.http]

MODES = ["legacy", "modern"]


def scale(count: int) -> tuple[str, dict[str, Any]]:
    return ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": count})


@dataclass
class Team:
    """The three replicas, and the same deployment as the channel helpers see one server (``world``:
    its public URL is the balancer's)."""

    replicas: Replicas
    world: World

    def port(self, n: int) -> int:
        return self.replicas.servers[n].port

    def pid(self, n: int) -> str:
        process = self.replicas.servers[n].process
        assert process is not None
        return str(process.pid)

    def executed_by(self) -> str:
        """The pid of the replica that executed the one card in the store."""
        (card,) = self.replicas.cards()
        assert card["status"] == "executed", card
        return str(card["executor"].split(":")[1])

    def patches(self, since: int) -> list[dict[str, Any]]:
        return [r for r in calls_since(self.world, since) if r["method"] == "PATCH"]

    def executed_once_with_the_owners_token(self, since: int) -> None:
        """Door's log: one keyed PATCH, accepted, carrying ada's own Door token; every call since
        carried it (the replicas have no DOOR_TOKEN of their own, and an MCP token would be a 401)."""
        (patch,) = self.patches(since)
        assert (patch["status"], patch["user"], patch["token"]) == (202, "ada", digest(DEMO_ADMIN_TOKEN)), patch
        assert patch["idempotency_key"], patch
        calls = calls_since(self.world, since)
        assert {(r["token"], r["user"]) for r in calls} == {(digest(DEMO_ADMIN_TOKEN), "ada")}, calls
        assert self.replicas.changes() == 1


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory, postgres: PostgresServer) -> Iterator[Team]:
    """Started once per module: the provider knows the balancer's ``/mcp`` as a resource and its
    ``/auth/callback`` as the servers' redirect URI; the replicas share the request-state and credential
    keys, the issuer and the client; ada connects her Door token once, through the balancer."""
    tmp = tmp_path_factory.mktemp("oauth-replicas")
    port = free_port()
    public_url = f"http://127.0.0.1:{port}"
    key = secrets.token_hex(32)
    store = postgres.schema_url(fresh_schema())
    with OpenIDProvider([public_url + "/mcp"], redirect_uris=[public_url + "/auth/callback"]).running() as provider:
        replicas = Replicas(
            tmp,
            store,
            balancer_port=port,
            DOOR_TOKEN="",  # no token of the servers' own: every Door call is a person's
            MAYA_OAUTH_ISSUER=provider.issuer,
            MAYA_OAUTH_CLIENT_ID=SERVER_CLIENT_ID,
            MAYA_OAUTH_CLIENT_SECRET=SERVER_CLIENT_SECRET,
            MAYA_CREDENTIAL_KEY=key,
            MAYA_PLAN_POLL_SECONDS="0.1",  # a plan's wait polls Door often (the plan test below)
        )
        try:
            with haproxy(replicas, tmp, haproxy_config(replicas, oauth=True)):
                world = World(provider, replicas.servers[0], replicas.door, public_url, Path(store), key)
                team = Team(replicas, world)
                replicas.reset()
                anyio.run(connected, world, ADMIN, DEMO_ADMIN_TOKEN)
                yield team
        finally:
            replicas.close()


@pytest.fixture
def fresh(team: Team) -> Team:
    """Door back at the demo seed (its request log empty) and no cards; ada's Door token stays connected."""
    team.replicas.reset()
    return team


class ToReplica(httpx2.AsyncBaseTransport):
    """What a load balancer does with MCP requests, chosen by the test: each request to the balancer's
    ``/mcp`` goes to the replica ``route(body)`` names, its ``Host`` still the balancer's; the sign-in's
    requests (the resource metadata, the provider) go where they are addressed."""

    def __init__(self, team: Team, route: Callable[[bytes], int]) -> None:
        self.team, self.route = team, route
        self.inner = httpx2.AsyncHTTPTransport(verify=verifying_tls())
        self.sent: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.port == self.team.replicas.balancer_port and request.url.path == "/mcp":
            n = self.route(request.content)
            self.sent.append(n)
            request.url = request.url.copy_with(port=self.team.port(n))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def routed_client(
    team: Team,
    mode: str,
    route: Callable[[bytes], int],
    storage: Memory,
    client_class: type[Client] = Client,
    **kwargs: Any,
) -> AsyncIterator[Client]:
    """ada's MCP client of ``mode``, signed in by the SDK's OAuth client, its MCP requests sent by ``route``."""
    if mode == "legacy":
        kwargs["mode"] = "legacy"
    auth = oauth_client(team.world, ADMIN, storage)
    async with (
        httpx2.AsyncClient(transport=ToReplica(team, route), auth=auth, timeout=60) as http,
        client_class(streamable_http_client(team.world.mcp_url, http_client=http), **kwargs) as client,
    ):
        yield client


def to(n: int) -> Callable[[bytes], int]:
    return lambda body: n


async def test_2026_07_28_the_forms_answering_round_is_taken_by_another_replica(fresh: Team) -> None:
    team = fresh
    since = last_seq(team.world)
    asking = Person("accept")
    route = ToReplica(team, lambda body: 1 if b"requestState" in body else 0)
    auth = oauth_client(team.world, ADMIN, Memory())
    async with (
        httpx2.AsyncClient(transport=route, auth=auth, timeout=60) as http,
        Client(streamable_http_client(team.world.mcp_url, http_client=http), elicitation_callback=asking) as client,
    ):
        done = await client.call_tool(*scale(3))

    assert done.structured_content is not None, done.content
    assert (done.structured_content["status"], done.structured_content["changed"]) == ("executed", True)
    assert len(asking.messages) == 1 and {0, 1} <= set(route.sent), route.sent
    assert team.executed_by() == team.pid(1)  # replica 1 executed the card replica 0 planned and asked about
    team.executed_once_with_the_owners_token(since)


async def test_2025_11_25_a_card_pending_on_one_replica_is_approved_in_a_session_on_another(fresh: Team) -> None:
    team = fresh
    since = last_seq(team.world)
    storage = Memory()  # one person's MCP client: signed in once, two sessions
    async with routed_client(team, "legacy", to(0), storage) as planner:
        planned = await planner.call_tool(*scale(4))
    assert planned.structured_content is not None and planned.structured_content["status"] == "pending", planned
    assert team.patches(since) == []

    asking = Person("accept")
    async with routed_client(team, "legacy", to(2), storage, elicitation_callback=asking) as approver:
        approved = await approver.call_tool(*scale(4))

    assert approved.structured_content is not None, approved.content
    assert approved.structured_content["card"]["id"] == planned.structured_content["card"]["id"]
    assert (approved.structured_content["status"], approved.structured_content["changed"]) == ("executed", True)
    assert len(asking.messages) == 1 and team.executed_by() == team.pid(2)
    team.executed_once_with_the_owners_token(since)


class OwnerAtAnotherReplica:
    """The URL-only client's callback: ada's browser (signed in through the balancer) opens the link on
    replica ``n``'s port, the balancer's ``Host`` kept as a balancer would, and approves there."""

    def __init__(self, team: Team, n: int) -> None:
        self.team, self.n = team, n
        self.urls: list[str] = []
        self.seen: dict[str, httpx2.Response] = {}

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        assert isinstance(params, ElicitRequestURLParams)
        self.urls.append(params.url)
        world = self.team.world
        assert params.url.startswith(world.public_url + "/approve/") and "via=" not in params.url, params.url
        direct = params.url.replace(world.public_url, f"http://127.0.0.1:{self.team.port(self.n)}")
        host = {"host": world.public_url.removeprefix("http://")}
        browser = LiveBrowser(world, ADMIN)
        try:
            await browser.visit("/connect")  # signed in; the session lives in the shared store
            page = await browser.http.get(direct, headers=host)
            assert page.status_code == 200, page.text[:400]
            form = {"csrf": csrf_of(page), "decision": "approve"}
            same_site = {**host, "origin": world.public_url, "sec-fetch-site": "same-origin"}
            self.seen["done"] = await browser.http.post(direct, data=form, headers=same_site)
            self.seen["again"] = await browser.http.post(direct, data=form, headers=same_site)
        finally:
            await browser.aclose()
        return ElicitResult(action="accept")


@pytest.mark.parametrize("mode", MODES)
async def test_the_approval_page_of_one_replica_is_approved_on_another_by_the_owners_session(
    fresh: Team, mode: str
) -> None:
    """Replica 0 plans and sends the link; ada approves it on replica 2; the 2026-07-28 retry round
    goes to replica 1 (a 2025-11-25 session stays on replica 0, which learns the outcome from the store)."""
    team = fresh
    since = last_seq(team.world)
    owner = OwnerAtAnotherReplica(team, 2)
    route = to(0) if mode == "legacy" else (lambda body: 1 if b"requestState" in body else 0)
    async with routed_client(team, mode, route, Memory(), client_class=UrlOnly, elicitation_callback=owner) as client:
        done = await client.call_tool(*scale(5))

    assert len(owner.urls) == 1
    assert owner.seen["done"].status_code == 200 and "executed" in owner.seen["done"].text, owner.seen["done"].text
    assert owner.seen["again"].status_code == 404, "the one-time link is spent"
    assert done.structured_content is not None and done.structured_content["status"] == "executed", done
    assert team.executed_by() == team.pid(2)
    team.executed_once_with_the_owners_token(since)


@pytest.mark.parametrize("mode", MODES)
async def test_the_apps_card_shown_by_one_replica_is_decided_on_another_once(fresh: Team, mode: str) -> None:
    team = fresh
    since = last_seq(team.world)
    storage = Memory()
    async with routed_client(team, mode, to(0), storage, extensions=[APPS]) as shower:
        shown = await shower.call_tool(*scale(6))
    assert shown.meta is not None and META_KEY in shown.meta, shown
    approval = shown.meta[META_KEY]
    decision = {"card_id": approval["cardId"], "secret": approval["secret"], "decision": "approve"}
    assert team.patches(since) == []

    async with routed_client(team, mode, to(1), storage, extensions=[APPS]) as decider:
        done = await decider.call_tool("decide_card", decision)
    async with routed_client(team, mode, to(2), storage, extensions=[APPS]) as replayer:
        replayed = await replayer.call_tool("decide_card", decision)

    assert done.structured_content is not None, done.content
    assert (done.structured_content["status"], done.structured_content["changed"]) == ("executed", True)
    assert replayed.is_error, "the secret was spent on replica 1"
    assert team.executed_by() == team.pid(1)
    team.executed_once_with_the_owners_token(since)


@pytest.mark.parametrize("mode", MODES)
async def test_through_the_documented_haproxy_config_a_signed_in_person_plans_and_approves(
    fresh: Team, mode: str
) -> None:
    """The balancer as configured, nothing routed by the test: 2025-11-25 sessions stick to their
    replica, 2026-07-28 rounds go round robin; the sign-in, a read and a change approved by the form."""
    team = fresh
    since = last_seq(team.world)
    asking = Person("accept")
    async with signed_in_client(team.world, ADMIN, mode, elicitation_callback=asking) as client:
        listed = await client.call_tool("list_node_pools", {"cluster": "payments-prod"})
        done = await client.call_tool(*scale(7))

    assert not listed.is_error, listed
    assert done.structured_content is not None, done.content
    assert (done.structured_content["status"], done.structured_content["changed"]) == ("executed", True)
    assert len(asking.messages) == 1
    team.executed_once_with_the_owners_token(since)


async def test_a_plan_whose_replica_is_killed_is_continued_by_another_as_its_owner(fresh: Team) -> None:
    """Issue 26: replica 0 runs ada's approved tier move and is SIGKILLed after step 1; a live replica's sweep
    takes the plan over on PostgreSQL and finishes it with ada's own Door token (the replicas have no
    DOOR_TOKEN): every call Door received since carried it, one POST and one DELETE."""
    team = fresh
    since = last_seq(team.world)
    dying = team.replicas.servers[0]
    killed = team.pid(0)

    def step_1_done() -> bool:
        cards = team.replicas.cards()
        return bool(cards) and cards[0]["steps"][0]["status"] == "done"

    def kill_after_step_1() -> None:
        wait_until(step_1_done, "step 1 to be recorded", timeout=60)
        dying.kill()

    async def arrange() -> None:
        threading.Thread(target=kill_after_step_1, daemon=True).start()

    move = ("change_pool_tier", {"cluster": "payments-prod", "pool": "workers", "size": "dks.c5.2xlarge"})
    try:
        with DoorClock(team.replicas) as clock:
            with pytest.raises(Exception):  # noqa: B017 (the replica died under the call: any transport error)
                async with routed_client(
                    team, "modern", to(0), Memory(), elicitation_callback=Person("accept", arrange)
                ) as client:
                    await client.call_tool(*move)
            clock.start()
            wait_until(lambda: team.replicas.cards()[0]["status"] != "executing", "a replica to finish", timeout=90)
    finally:
        dying.start()  # the module's other tests use all three replicas

    (card,) = team.replicas.cards()
    assert card["status"] == "executed", card["result"]
    assert card["executor"].split(":")[1] != killed
    calls = calls_since(team.world, since)
    assert {(r["token"], r["user"]) for r in calls} == {(digest(DEMO_ADMIN_TOKEN), "ada")}, calls
    assert [r["method"] for r in calls if r["method"] != "GET"] == ["POST", "DELETE"]
