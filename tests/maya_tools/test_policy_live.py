"""Issue 28's "Done when", through real processes: a production change waits for a second person from
``platform``, who approves it on the review page, and it runs once with the requester's own Door token.

A real ``maya-tools serve --auth oauth`` (on SQLite, then two replicas on one PostgreSQL store), the
real test OpenID provider with three people whose ``groups`` claim is in their ID and access tokens
(ada: dev, the requester; pat: platform; olly: sales), each with their own Door token connected on
``/connect`` in their own browser, a real ``reference-backend`` as Door (its request log says whose
token every call carried), the policy file ``MAYA_POLICY`` and a webhook receiver on loopback
(``MAYA_APPROVAL_WEBHOOK_URL``). Both protocol generations for what the MCP clients do.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from backend_client.tls import verifying_tls
from maya_tools.auth import Principal
from maya_tools.channels.app_secret import META_KEY
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN, DEMO_OUTSIDER_TOKEN
from tests.maya_tools.auth.test_serve_oauth import World
from tests.maya_tools.channels.live import LiveBrowser, calls_since, csrf_of, digest, last_seq, signed_in_client
from tests.maya_tools.channels.test_channels_served import APPS, connected
from tests.maya_tools.conftest import Person
from tests.maya_tools.live import REF_ADMIN, Proc, base_env, free_port, wait_until
from tests.maya_tools.test_approval_page import UrlOnlyClient
from tests.oidc import SERVER_CLIENT_ID, SERVER_CLIENT_SECRET, OpenIDProvider, User
from tests.postgres import PostgresServer, fresh_schema

pytestmark = [pytest.mark.anyio, pytest.mark.http]

MODES = ["legacy", "modern"]
ADA = User("admin", "admin@door.test", "admin-password", "admin", groups=("dev",))
PAT = User("pat", "pat@door.test", "pat-password", "pat", groups=("platform", "oncall"))
OLLY = User("olly", "olly@door.test", "olly-password", "olly", groups=("sales",))
DOOR_TOKENS = {ADA: DEMO_ADMIN_TOKEN, PAT: DEMO_MEMBER_TOKEN, OLLY: DEMO_OUTSIDER_TOKEN}
POLICY = """
[[rule]]
name = "prod-four-eyes"
clusters = ["tag:prod"]
actions = ["scale", "remove", "change_tier"]
approvals = 1
approvers = { claim = "groups", any_of = ["platform"] }
self_approval = false
"""


def scale(count: int) -> tuple[str, dict[str, Any]]:
    return ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": count})


class Receiver:
    """The approvers' webhook receiver: a real HTTP server on loopback that keeps every JSON body."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                received.raw.append(body)
                received.bodies.append(json.loads(body))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/approvals"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def of(self, card_id: str) -> list[dict[str, Any]]:
        return [b for b in self.bodies if b["card"] == card_id]

    def wait_for(self, card_id: str, events: list[str]) -> list[dict[str, Any]]:
        wait_until(lambda: [b["event"] for b in self.of(card_id)] == events, f"the webhook's {events}", timeout=30)
        return self.of(card_id)


@dataclass
class Site:
    tmp: Path
    provider: OpenIDProvider
    door: Proc
    receiver: Receiver
    ports: tuple[int, int]
    policy: Path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The provider (three people; two servers' resources and callbacks), Door, the webhook receiver."""
    tmp = tmp_path_factory.mktemp("policy-live")
    ports = (free_port(), free_port())
    door_port = free_port()
    door = Proc(
        [
            "reference-backend",
            "--port",
            str(door_port),
            "--state",
            str(tmp / "door.sqlite3"),
            "--admin-token",
            REF_ADMIN,
        ],
        door_port,
        base_env(),
    )
    policy = tmp / "policy.toml"
    policy.write_text(POLICY, encoding="utf-8")
    receiver = Receiver()
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    provider = OpenIDProvider(
        [u + "/mcp" for u in urls], redirect_uris=[u + "/auth/callback" for u in urls], users=[ADA, PAT, OLLY]
    )
    try:
        with provider.running():
            yield Site(tmp, provider, door, receiver, ports, policy)
    finally:
        receiver.server.shutdown()
        door.stop()


def server_env(site: Site, port: int, store: str, key: str, state_key: str) -> dict[str, str]:
    return {
        **base_env(),
        "DOOR_API_URL": f"http://127.0.0.1:{site.door.port}",
        "DOOR_TOKEN": "",  # no token of the server's own: every Door call is a person's
        "MAYA_CARD_STORE": store,
        "MAYA_OAUTH_ISSUER": site.provider.issuer,
        "MAYA_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "MAYA_OAUTH_CLIENT_ID": SERVER_CLIENT_ID,
        "MAYA_OAUTH_CLIENT_SECRET": SERVER_CLIENT_SECRET,
        "MAYA_CREDENTIAL_KEY": key,
        "MAYA_REQUEST_STATE_KEY": state_key,
        "MAYA_POLICY": str(site.policy),
        "MAYA_APPROVAL_WEBHOOK_URL": site.receiver.url,
        "MAYA_AUDIT_LOG": f"{store}.audit.jsonl",  # beside the store: each server its own file
    }


def serve(site: Site, n: int, store: str, key: str, state_key: str) -> Proc:
    port = site.ports[n]
    return Proc(
        ["serve", "--transport", "streamable-http", "--port", str(port)],
        port,
        server_env(site, port, store, key, state_key),
    )


def world_of(site: Site, server: Proc, store: str, key: str) -> World:
    return World(site.provider, server, site.door, f"http://127.0.0.1:{server.port}", Path(store), key)


def reset_door(site: Site) -> None:
    world = World(site.provider, site.door, site.door, "", Path(), "")
    response = world.admin("POST", "/_reference/reset", json={"seed": "demo"})
    assert response.status_code == 200, response.text


async def connect_everyone(world: World) -> None:
    for user, token in DOOR_TOKENS.items():
        await connected(world, user, token)


@pytest.fixture
def world(site: Site) -> Iterator[World]:
    """One server on its own SQLite store; the three people's Door tokens connected on its ``/connect``."""
    reset_door(site)
    store = str(site.tmp / f"cards-{secrets.token_hex(4)}.sqlite3")
    key = secrets.token_hex(32)
    server = serve(site, 0, store, key, secrets.token_urlsafe(32))
    world = world_of(site, server, store, key)
    try:
        anyio.run(connect_everyone, world)
        yield world
    finally:
        server.stop()


@pytest.fixture
def replicas(site: Site, postgres: PostgresServer) -> Iterator[tuple[World, World]]:
    """Two servers on one PostgreSQL store (their own public URLs); the Door tokens connected on the first."""
    reset_door(site)
    store = postgres.schema_url(fresh_schema())
    key, state_key = secrets.token_hex(32), secrets.token_urlsafe(32)
    first = serve(site, 0, store, key, state_key)
    try:
        second = serve(site, 1, store, key, state_key)
        try:
            worlds = (world_of(site, first, store, key), world_of(site, second, store, key))
            anyio.run(connect_everyone, worlds[0])
            yield worlds
        finally:
            second.stop()
    finally:
        first.stop()


def patches(world: World, since: int) -> list[dict[str, Any]]:
    return [r for r in calls_since(world, since) if r["method"] == "PATCH"]


async def ask(world: World, mode: str) -> str:
    """ada asks for the change in a client with forms: the card is pending at once and no form is offered."""
    asking = Person("accept")
    async with signed_in_client(world, ADA, mode, elicitation_callback=asking) as client:
        asked = await client.call_tool(*scale(3))
    data = asked.structured_content
    assert data is not None and data["status"] == "pending", asked.content
    assert asking.messages == [], "the form is never offered as an approval of a card waiting for platform"
    text = asked.content[0].text  # type: ignore[union-attr]
    assert "needs 1 approval from platform (rule prod-four-eyes)" in text and "/cards/" in text, text
    return str(data["card"]["id"])


async def requester_cannot_approve(world: World, mode: str, card_id: str) -> None:
    """Not by the approval page (a URL-mode client is sent no link), not in the Apps view (Approve disabled,
    no secret), not by ``decide_card``, not on the review page."""
    linked = Person("accept")
    async with signed_in_client(world, ADA, mode, client_class=UrlOnlyClient, elicitation_callback=linked) as url:
        again = await url.call_tool(*scale(3))  # the same request: the same live card
    assert again.structured_content is not None and again.structured_content["card"]["id"] == card_id
    assert again.structured_content["status"] == "pending" and linked.messages == [], "no approval link is sent"
    async with signed_in_client(world, ADA, mode, extensions=[APPS]) as apps:
        shown = await apps.call_tool(*scale(3))  # the same request: the same live card
        assert shown.meta is not None and shown.meta[META_KEY]["cardId"] == card_id, shown.meta
        assert "secret" not in shown.meta[META_KEY]
        assert "you cannot approve your own change" in shown.meta[META_KEY]["waiting"]
        decided = await apps.call_tool(
            "decide_card", {"card_id": card_id, "secret": secrets.token_urlsafe(32), "decision": "approve"}
        )
        assert decided.is_error and "prod-four-eyes" in decided.content[0].text  # type: ignore[union-attr]
    await refused_on_the_review_page(world, ADA, card_id, "you asked for this change and rule prod-four-eyes")


async def refused_on_the_review_page(world: World, user: User, card_id: str, why: str) -> None:
    """``user`` does not see the card in ``/cards``, gets 403 on its page, and a well-formed approval
    post from their own signed-in session (the session's form token, same origin) is 403 too."""
    browser = LiveBrowser(world, user)
    try:
        listed = await browser.visit("/cards")
        assert listed.status_code == 200 and card_id not in listed.text, listed.text[:600]
        page = await browser.visit(f"/cards/{card_id}")
        assert page.status_code == 403 and why in page.text, page.text[:800]
        token = csrf_of(await browser.visit("/connect"))  # this session's form token
        for decision in ("approve", "decline"):
            posted = await browser.post(f"/cards/{card_id}", {"csrf": token, "decision": decision})
            assert posted.status_code == 403, posted.text[:600]
    finally:
        await browser.aclose()


async def approved_by_platform(world: World, card_id: str) -> str:
    """pat sees the card in ``/cards``; a cross-site post or one without the session's token changes
    nothing; pat's approval executes it; a second post executes nothing."""
    browser = LiveBrowser(world, PAT)
    try:
        listed = await browser.visit("/cards")
        assert listed.status_code == 200 and f'href="/cards/{card_id}"' in listed.text, listed.text[:800]
        page = await browser.visit(f"/cards/{card_id}")
        assert page.status_code == 200 and 'value="approve"' in page.text and 'value="decline"' in page.text
        for shown in (listed, page):  # never cached, never framed, nothing loaded from elsewhere
            assert shown.headers["cache-control"] == "no-store", shown.headers
            assert "frame-ancestors 'none'" in shown.headers["content-security-policy"], shown.headers
        # the requester by the readable name of their verified claims (defanged on pages), then their sub
        assert "Asked by admin[@]door[.]test (sub admin" in page.text and "prod-four-eyes" in page.text and "Request digest" in page.text
        token = csrf_of(page)
        url = browser.url(f"/cards/{card_id}")
        form = {"csrf": token, "decision": "approve"}
        elsewhere = await browser.http.post(url, data=form, headers={"origin": "http://evil.test"})
        cross_site = await browser.http.post(url, data=form, headers={"sec-fetch-site": "cross-site"})
        forged = await browser.post(f"/cards/{card_id}", {"csrf": "0" * 64, "decision": "approve"})
        for refused in (elsewhere, cross_site, forged):
            assert refused.status_code == 403 and "nothing was changed" in refused.text, refused.text[:400]
        async with httpx2.AsyncClient(verify=verifying_tls()) as nobody:  # no session: sent to sign in, or 403
            unsigned = await nobody.get(url)
            assert unsigned.status_code == 303 and unsigned.headers["location"].startswith("/auth/login?")
            anonymous = await nobody.post(url, data=form, headers={"origin": world.public_url})
            assert anonymous.status_code == 403 and "not signed in" in anonymous.text, anonymous.text[:400]
        done = await browser.post(f"/cards/{card_id}", form)
        assert done.status_code == 200 and "Status: executed" in done.text, done.text[:1500]
        again = await browser.post(f"/cards/{card_id}", form)
        assert again.status_code == 200 and "Status: executed" in again.text, again.text[:600]
        return done.text
    finally:
        await browser.aclose()


async def decided_card_shown_only_to_its_approvers(world: World, card_id: str) -> None:
    """Once executed, pat sees the outcome read-only; olly still sees nothing of it."""
    for user, status, shown in ((PAT, 200, "Status: executed"), (OLLY, 403, "no longer waiting for approvals")):
        browser = LiveBrowser(world, user)
        try:
            page = await browser.visit(f"/cards/{card_id}")
            assert page.status_code == status and shown in page.text and 'value="approve"' not in page.text, page.text
        finally:
            await browser.aclose()


def door_saw_one_patch_with_adas_token(world: World, since: int) -> None:
    (patch,) = patches(world, since)
    assert (patch["status"], patch["user"], patch["token"]) == (202, "ada", digest(DEMO_ADMIN_TOKEN)), patch
    assert patch["idempotency_key"], patch


def pat_key(site: Site) -> str:
    """pat's principal as the server names people (issuer and ``sub`` hashed), never a token."""
    return Principal(issuer=site.provider.issuer, subject=PAT.sub, name=None).key


def webhook_told_waiting_and_executed(site: Site, card_id: str, public_url: str) -> None:
    waiting, decided = site.receiver.wait_for(card_id, ["waiting", "decided"])
    for body in (waiting, decided):
        assert body["url"] == f"{public_url}/cards/{card_id}" and body["rules"] == ["prod-four-eyes"], body
        assert (body["cluster"], body["pool"], body["action"]) == ("payments-prod", "workers", "scale"), body
    assert waiting["status"] == "pending" and "needs 1 approval from platform" in waiting["waiting_for"], waiting
    assert f"asked by {ADA.email} (sub admin" in waiting["text"] and f"asked by {ADA.email}" in decided["text"], waiting
    assert decided["status"] == "executed" and decided["approved_by"] == [f"{PAT.email} (sub pat, {pat_key(site)})"], (
        decided
    )
    sent = b"".join(site.receiver.raw).decode()
    assert not any(token in sent for token in (*DOOR_TOKENS.values(), SERVER_CLIENT_SECRET)), sent
    assert "/approve/" not in sent and "secret" not in sent, sent  # no approval link, no app secret


@pytest.mark.parametrize("mode", MODES)
async def test_a_prod_change_waits_for_platform_and_runs_once_with_the_requesters_door_token(
    site: Site, world: World, mode: str
) -> None:
    since = last_seq(world)
    card_id = await ask(world, mode)
    site.receiver.wait_for(card_id, ["waiting"])
    await requester_cannot_approve(world, mode, card_id)
    await refused_on_the_review_page(world, OLLY, card_id, "needs a person whose groups claim holds platform")
    assert patches(world, since) == [], "nobody who may not approve changed anything"

    await approved_by_platform(world, card_id)
    await decided_card_shown_only_to_its_approvers(world, card_id)

    door_saw_one_patch_with_adas_token(world, since)
    webhook_told_waiting_and_executed(site, card_id, world.public_url)
    audit_names_every_event_and_no_secret(world, card_id)


def audit_names_every_event_and_no_secret(world: World, card_id: str) -> None:
    """The audit file and ``cards audit --json`` of the store hold the same lines: the card planned
    under the rule, pat's approval counted for it, the run and its outcome; no secret the flow handled."""
    env = {**base_env(), "MAYA_CARD_STORE": str(world.card_store)}
    printed = subprocess.run(
        [sys.executable, "-m", "maya_tools.cli", "cards", "audit", "--since", "2000-01-01", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    logged = Path(f"{world.card_store}.audit.jsonl").read_text(encoding="utf-8").splitlines()
    mine = [json.loads(line) for line in logged if json.loads(line)["card_id"] == card_id]
    assert [line for line in printed if json.loads(line)["card_id"] == card_id] == [
        line for line in logged if json.loads(line)["card_id"] == card_id
    ]
    events = [line["event"] for line in mine]
    assert events[0] == "created" and "approval" in events and events[-1] == "executed", events
    approval = next(line for line in mine if line["event"] == "approval")
    assert approval["rule"] == "prod-four-eyes" and "pat" in approval["by"], approval
    assert all(line["rules"] == ["prod-four-eyes"] for line in mine), mine
    text = "\n".join(logged + printed)
    assert not any(secret in text for secret in (*DOOR_TOKENS.values(), SERVER_CLIENT_SECRET, world.key)), text
    assert "/approve/" not in text, text


async def test_a_decline_by_a_platform_approver_ends_the_card_and_tells_the_webhook(site: Site, world: World) -> None:
    since = last_seq(world)
    card_id = await ask(world, "modern")
    browser = LiveBrowser(world, PAT)
    try:
        page = await browser.visit(f"/cards/{card_id}")
        done = await browser.post(f"/cards/{card_id}", {"csrf": csrf_of(page), "decision": "decline"})
        assert done.status_code == 200 and "Status: declined" in done.text, done.text[:800]
        listed = await browser.visit("/cards")
        assert card_id not in listed.text
    finally:
        await browser.aclose()
    assert patches(world, since) == []
    _, decided = site.receiver.wait_for(card_id, ["waiting", "decided"])
    assert decided["status"] == "declined" and "pat" in decided["text"], decided


async def test_a_card_no_rule_asks_approvers_for_is_nobody_elses_to_decide_on_the_review_page(
    site: Site, world: World
) -> None:
    """ada's relabel of the prod workers (no rule matches it) waits for her own answer (her client offers no
    channel): pat, in platform, may not approve it on /cards, nor see it listed; nothing reaches Door and the
    webhook is not told."""
    since = last_seq(world)
    async with signed_in_client(world, ADA, "modern") as client:  # no elicitation: the card stays pending
        asked = await client.call_tool(
            "relabel_node_pool", {"cluster": "payments-prod", "pool": "workers", "labels": {"team": "payments"}}
        )
    assert asked.structured_content is not None and asked.structured_content["status"] == "pending", asked.content
    card_id = str(asked.structured_content["card"]["id"])
    await refused_on_the_review_page(world, PAT, card_id, "No rule of the team")
    assert patches(world, since) == [] and site.receiver.of(card_id) == []


@pytest.mark.parametrize("mode", MODES)
async def test_on_postgresql_a_card_asked_on_one_replica_is_approved_on_the_other(
    site: Site, replicas: tuple[World, World], mode: str
) -> None:
    """ada asks on replica 0; olly is refused and pat approves on replica 1's review page, which runs it
    with ada's Door token (connected on replica 0, kept in the shared store)."""
    first, second = replicas
    since = last_seq(first)
    card_id = await ask(first, mode)
    await refused_on_the_review_page(second, ADA, card_id, "you asked for this change and rule prod-four-eyes")
    await refused_on_the_review_page(second, OLLY, card_id, "needs a person whose groups claim holds platform")
    assert patches(first, since) == []

    await approved_by_platform(second, card_id)

    door_saw_one_patch_with_adas_token(first, since)
    waiting, decided = site.receiver.wait_for(card_id, ["waiting", "decided"])
    assert waiting["url"] == f"{first.public_url}/cards/{card_id}"  # told by the replica that planned it
    assert decided["url"] == f"{second.public_url}/cards/{card_id}" and decided["status"] == "executed"
