"""Three real `maya-tools serve` replicas on one PostgreSQL card store, in front of one real reference
backend: a card planned on one replica is approved on another (both protocol generations), fifty
racing approvals spread over the three mutate Door once, a forged or altered ``requestState`` is
refused by every replica, and a replica SIGKILLed while it executes is settled by a live one."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.request_state import AESGCMRequestStateCodec
from mcp_types import ElicitResult

from backend_client.tls import verifying_tls
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN, DEMO_OUTSIDER_TOKEN
from tests.maya_tools.conftest import Person
from tests.maya_tools.live import PATCH_ROUTE, Live, Proc, free_port, wait_until
from tests.maya_tools.test_app_card import APPS, decide, show
from tests.maya_tools.test_approval_page import Browser, UrlOnlyClient, form_token, opened_link, origin, press
from tests.postgres import PostgresServer, fresh_schema

pytestmark = [pytest.mark.anyio, pytest.mark.http]

KEY = secrets.token_hex(32)
BEARER = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}


class Replicas(Live):
    """``Live`` with three servers sharing one PostgreSQL store and one requestState key (``env`` over
    the defaults: the OAuth settings, say); ``balancer_port`` is where docs/deploy.md's HAProxy listens
    when a test starts it (chosen beforehand when a provider must know the public URL first)."""

    def __init__(self, tmp: Path, store: str, *, balancer_port: int | None = None, **env: str) -> None:
        self.balancer_port = balancer_port or free_port()
        self.named: dict[str, Proc] = {}
        super().__init__(tmp, MAYA_CARD_STORE=store, MAYA_REQUEST_STATE_KEY=KEY, **env)
        self.store = store
        with ThreadPoolExecutor(2) as starting:  # the other two replicas start side by side
            list(starting.map(self.serve, ["r2", "r3"]))

    def serve(self, name: str = "r1") -> str:
        """Start replica ``name``, its approval-page links addressed to the balancer (``MAYA_PUBLIC_URL``)."""
        port = free_port()
        env = {**self.server_env, "MAYA_REPLICA": name, "MAYA_PUBLIC_URL": f"http://127.0.0.1:{self.balancer_port}"}
        server = Proc(["serve", "--transport", "streamable-http", "--port", str(port)], port, env)
        self.servers.append(server)
        self.named[name] = server
        return self.url

    def mcp(self, n: int) -> str:
        return f"http://127.0.0.1:{self.servers[n].port}/mcp"

    def cards(self) -> list[dict[str, Any]]:
        with psycopg.connect(self.store, autocommit=True) as conn:
            rows = conn.execute("SELECT data, executor FROM maya_cards ORDER BY created_at").fetchall()
        return [{**json.loads(data), "executor": executor} for data, executor in rows]

    def reset(self) -> None:
        """Door back to the demo world with no faults, and no cards in the store (the audit stays: append-only)."""
        response = self.admin("POST", "/_reference/reset", json={"seed": "demo"})
        assert response.status_code == 200, response.text
        with psycopg.connect(self.store, autocommit=True) as conn:
            conn.execute("DELETE FROM maya_cards")


@pytest.fixture(scope="module")
def shared_replicas(tmp_path_factory: pytest.TempPathFactory, postgres: PostgresServer) -> Iterator[Replicas]:
    """One Door and three replicas per test process, for the tests that stop no process (starting four
    processes costs a second or two of the machine's two cores)."""
    world = Replicas(tmp_path_factory.mktemp("replicas"), postgres.schema_url(fresh_schema()))
    try:
        yield world
    finally:
        world.close()


@pytest.fixture
def replicas(shared_replicas: Replicas) -> Replicas:
    shared_replicas.reset()
    return shared_replicas


@pytest.fixture
def own_replicas(tmp_path: Path, postgres_url: str) -> Iterator[Replicas]:
    """Door and three replicas of this test's own, for a test that kills one."""
    world = Replicas(tmp_path, postgres_url)
    try:
        yield world
    finally:
        world.close()


def scale(count: int) -> tuple[str, dict[str, Any]]:
    return ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": count})


class Routed(httpx2.AsyncBaseTransport):
    """Sends each request to a replica chosen by ``route(body)``, as a load balancer might, and keeps the traffic."""

    def __init__(self, replicas: Replicas, route: Any) -> None:
        self.replicas, self.route = replicas, route
        self.inner = httpx2.AsyncHTTPTransport()
        self.sent: list[httpx2.Request] = []
        self.bodies: list[bytes] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = self.replicas.servers[self.route(request.content)].port
        request.url = request.url.copy_with(port=port)
        request.headers["host"] = f"127.0.0.1:{port}"
        self.sent.append(request)
        response = await self.inner.handle_async_request(request)
        if response.headers.get("content-type", "").startswith("application/json"):
            body = await response.aread()
            self.bodies.append(body)
            return httpx2.Response(response.status_code, headers=response.headers, content=body, request=request)
        return response


def answer_round(transport: Routed, decision: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The next round of the recorded tools/call, answering every question with ``decision``."""
    (call,) = [r for r in transport.sent if b'"tools/call"' in r.content and b"requestState" not in r.content]
    asked = next(json.loads(body) for body in reversed(transport.bodies) if b"requestState" in body)["result"]
    message = json.loads(call.content)
    message["params"] = {
        **message["params"],
        "requestState": asked["requestState"],
        "inputResponses": {key: decision for key in asked["inputRequests"]},
    }
    headers = {k: v for k, v in call.headers.items() if k.lower() not in {"content-length", "host"}}
    return message, headers


async def test_a_card_planned_on_one_replica_is_approved_on_another_2026_07_28(replicas: Replicas) -> None:
    """The question's round goes to replica 0, the answering round (with its sealed requestState) to replica 1."""
    transport = Routed(replicas, lambda body: 1 if b"requestState" in body else 0)
    async with (
        httpx2.AsyncClient(transport=transport, headers=BEARER, timeout=60) as http,
        Client(streamable_http_client(replicas.mcp(0), http_client=http), elicitation_callback=Person()) as client,
    ):
        result = await client.call_tool(*scale(3))

    assert result.structured_content is not None, result.content
    assert (result.structured_content["status"], result.structured_content["changed"]) == ("executed", True)
    (card,) = replicas.cards()
    pids = [s.process.pid for s in replicas.servers if s.process is not None]
    assert card["executor"].split(":")[1] == str(pids[1])  # replica 1 executed the card replica 0 planned
    assert replicas.changes() == 1


async def test_a_card_planned_on_one_replica_is_approved_on_another_2025_11_25(replicas: Replicas) -> None:
    """Legacy sessions live on one replica: a client that cannot elicit plans on replica 0 (pending card);
    the same person's elicitation-capable client on replica 2 asks for the same change, meets that
    card, and approves it there."""
    async with (
        httpx2.AsyncClient(verify=verifying_tls(), headers=BEARER, timeout=60) as http,
        Client(streamable_http_client(replicas.mcp(0), http_client=http), mode="legacy") as planner,
    ):
        planned = await planner.call_tool(*scale(4))
    assert planned.structured_content is not None and planned.structured_content["status"] == "pending"
    assert replicas.changes() == 0

    person = Person()
    async with (
        httpx2.AsyncClient(verify=verifying_tls(), headers=BEARER, timeout=60) as http,
        Client(
            streamable_http_client(replicas.mcp(2), http_client=http), mode="legacy", elicitation_callback=person
        ) as approver,
    ):
        approved = await approver.call_tool(*scale(4))

    assert approved.structured_content is not None
    assert approved.structured_content["card"]["id"] == planned.structured_content["card"]["id"]
    assert (approved.structured_content["status"], approved.structured_content["changed"]) == ("executed", True)
    assert len(person.messages) == 1 and replicas.changes() == 1


async def test_fifty_racing_approvals_of_one_card_over_three_replicas_mutate_door_once(replicas: Replicas) -> None:
    transport = Routed(replicas, lambda body: 0)
    replies: list[str] = []

    async def fifty_at_once(context: Any, params: Any) -> ElicitResult:
        message, headers = answer_round(transport, {"action": "accept", "content": {"approve": True}})

        async def approve(n: int) -> None:
            async with httpx2.AsyncClient(verify=verifying_tls(), timeout=60) as http:
                reply = await http.post(replicas.mcp(n % 3), headers=headers, json=message)
            replies.append(reply.text)

        async with anyio.create_task_group() as group:
            for n in range(50):
                group.start_soon(approve, n)
        return ElicitResult(action="decline")  # the person's own late answer: the card is decided already

    async with (
        httpx2.AsyncClient(transport=transport, headers=BEARER, timeout=60) as http,
        Client(streamable_http_client(replicas.mcp(0), http_client=http), elicitation_callback=fifty_at_once) as c,
    ):
        late = await c.call_tool(*scale(5))

    assert len(replies) == 50
    decided_here = [text for text in replies if '"changed":true' in text.replace(" ", "")]
    assert len(decided_here) == 1, [text[:200] for text in replies[:3]]
    assert replicas.changes() == 1
    assert late.structured_content is not None and late.structured_content["changed"] is False
    (card,) = replicas.cards()
    assert card["status"] == "executed"


async def test_a_forged_or_altered_request_state_is_refused_by_every_replica(replicas: Replicas) -> None:
    transport = Routed(replicas, lambda body: 0)
    refusals: list[dict[str, Any]] = []

    async def forge(context: Any, params: Any) -> ElicitResult:
        message, headers = answer_round(transport, {"action": "accept", "content": {"approve": True}})
        real = message["params"]["requestState"]
        flipped = real[:-2] + ("A" if real[-2] != "A" else "B") + real[-1]
        other_key = AESGCMRequestStateCodec([secrets.token_bytes(32)])
        claims = {"v": 1, "iat": time.time(), "exp": time.time() + 600, "m": "tools/call", "s": "{}"}
        forgeries = [flipped, other_key.seal(json.dumps(claims).encode()), '{"asked": {}}', real + "x"]
        async with httpx2.AsyncClient(verify=verifying_tls(), timeout=60) as http:
            for n, forged in enumerate(forgeries * 3):
                tampered = {**message, "params": {**message["params"], "requestState": forged}}
                reply = await http.post(replicas.mcp(n % 3), headers=headers, json=tampered)
                refusals.append(reply.json())
            # The real state with another person's token: refused by the seal's principal binding,
            # before any tool code could look for that person's card.
            for n, token in enumerate((DEMO_MEMBER_TOKEN, DEMO_OUTSIDER_TOKEN, "not-a-door-token")):
                stolen = {k: v for k, v in headers.items() if k.lower() != "authorization"}
                stolen["Authorization"] = f"Bearer {token}"
                reply = await http.post(replicas.mcp(n % 3), headers=stolen, json=message)
                refusals.append(reply.json())
        return ElicitResult(action="decline")

    async with (
        httpx2.AsyncClient(transport=transport, headers=BEARER, timeout=60) as http,
        Client(streamable_http_client(replicas.mcp(0), http_client=http), elicitation_callback=forge) as client,
    ):
        result = await client.call_tool(*scale(6))

    assert len(refusals) == 12 + 3
    for reply in refusals:
        assert reply["error"]["message"] == "Invalid or expired requestState", reply
    assert result.structured_content is not None and result.structured_content["status"] == "declined"
    assert replicas.changes() == 0


async def test_a_replica_killed_while_it_executes_is_settled_by_a_live_one_within_60_s(own_replicas: Replicas) -> None:
    replicas = own_replicas

    def kill_replica_0_when_sent() -> None:
        wait_until(lambda: replicas.faults_left() == 0, "the PATCH to reach Door")
        replicas.servers[0].kill()

    async def hold_then_kill() -> None:
        replicas.fault(route=PATCH_ROUTE, status=None, latency_ms=1500, count=1)
        threading.Thread(target=kill_replica_0_when_sent, daemon=True).start()

    with pytest.raises(Exception):  # noqa: B017 (the replica died under the call: any transport error)
        with anyio.fail_after(30):
            async with (
                httpx2.AsyncClient(verify=verifying_tls(), headers=BEARER, timeout=60) as http,
                Client(
                    streamable_http_client(replicas.mcp(0), http_client=http),
                    elicitation_callback=Person("accept", hold_then_kill),
                ) as client,
            ):
                await client.call_tool(*scale(3))
    (card,) = replicas.cards()
    assert card["status"] == "executing"
    killed_at = time.monotonic()

    await anyio.to_thread.run_sync(
        lambda: wait_until(lambda: replicas.cards()[0]["status"] != "executing", "a live replica to settle it", 60)
    )
    assert time.monotonic() - killed_at < 60
    async with (
        httpx2.AsyncClient(verify=verifying_tls(), headers=BEARER, timeout=60) as http,
        Client(streamable_http_client(replicas.mcp(1), http_client=http)) as client,
    ):
        shown = await client.call_tool("get_card", {"card_id": card["id"]})
    assert shown.structured_content is not None
    final = shown.structured_content["card"]
    assert final["status"] in ("executed", "outcome_unknown")  # its request had left: never "nothing changed"
    assert replicas.changes() <= 1
    if final["status"] == "executed":
        assert replicas.changes() == 1
    assert "recovered" in [event["event"] for event in shown.structured_content["audit"]]


async def test_every_replica_reports_ready_and_live_without_a_token(replicas: Replicas) -> None:
    with httpx2.Client(verify=verifying_tls(), timeout=10) as http:
        for server in replicas.servers:
            ready = http.get(f"http://127.0.0.1:{server.port}/healthz")
            assert (ready.status_code, ready.json()) == (200, {"status": "ok", "store": "postgresql"})
            assert http.get(f"http://127.0.0.1:{server.port}/livez").status_code == 200


VIA = "    use-server r{n} if {{ urlp(via) -m str r{n} }}\n"


def haproxy_config(replicas: Replicas, *, oauth: bool = False) -> str:
    """docs/deploy.md's HAProxy configuration as written, its addresses replaced by the test's loopback
    ones; with OAuth without the ``via`` lines, as its comment says."""
    text = (Path(__file__).parents[2] / "docs" / "deploy.md").read_text()
    config = text.split("```haproxy\n", 1)[1].split("```", 1)[0]
    config = config.replace("bind 0.0.0.0:8800", f"bind 127.0.0.1:{replicas.balancer_port}")
    for n in (1, 2, 3):
        config = config.replace(f"10.0.0.1{n}:8765", f"127.0.0.1:{replicas.named[f'r{n}'].port}")
        if oauth:
            assert VIA.format(n=n) in config, config
            config = config.replace(VIA.format(n=n), "")
    assert "10.0.0." not in config
    return config


@contextmanager
def haproxy(replicas: Replicas, folder: Path, config: str) -> Iterator[str]:
    """HAProxy (Debian's haproxy, installed by .ci/run) in front of the three replicas with ``config``,
    once its health checks pass; yields its ``/mcp`` URL."""
    port = replicas.balancer_port
    path = folder / "haproxy.cfg"
    path.write_text(config)
    executable = shutil.which("haproxy") or "/usr/sbin/haproxy"
    log = folder / "haproxy.log"
    with log.open("wb") as stderr:  # a file, not a pipe nobody reads
        process = subprocess.Popen([executable, "-db", "-f", str(path)], stdout=subprocess.DEVNULL, stderr=stderr)
    try:

        def every_replica_checked_up() -> bool:
            assert process.poll() is None, log.read_text() or "haproxy exited"
            try:
                with httpx2.Client(verify=verifying_tls(), timeout=2) as http:
                    seen = {http.get(f"http://127.0.0.1:{port}/healthz").status_code for _ in range(6)}
                return seen == {200}
            except httpx2.HTTPError:
                return False

        wait_until(every_replica_checked_up, "HAProxy to pass its health checks")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def balanced(replicas: Replicas, tmp_path: Path) -> Iterator[str]:
    """HAProxy in front of the three replicas, with docs/deploy.md's config."""
    with haproxy(replicas, tmp_path, haproxy_config(replicas)) as url:
        yield url


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_documented_haproxy_config_carries_a_card_to_approval_across_the_replicas(
    balanced: str, replicas: Replicas, mode: str
) -> None:
    """Through the balancer, both protocol generations plan, ask and approve; 2025-11-25 sessions
    stick to their replica, 2026-07-28 rounds land wherever round robin sends them."""
    person = Person()
    async with (
        httpx2.AsyncClient(verify=verifying_tls(), headers=BEARER, timeout=60) as http,
        Client(streamable_http_client(balanced, http_client=http), mode=mode, elicitation_callback=person) as client,
    ):
        first = await client.call_tool("list_node_pools", {"cluster": "payments-prod"})
        assert not first.is_error
        result = await client.call_tool(*scale(3))
    assert result.structured_content is not None, result.content
    assert (result.structured_content["status"], result.structured_content["changed"]) == ("executed", True)
    assert len(person.messages) == 1 and replicas.changes() == 1


async def test_an_approval_page_link_through_the_balancer_reaches_the_replica_that_asked(
    balanced: str, replicas: Replicas
) -> None:
    """A URL-mode client's link names the balancer and its replica (``?via=``): the balancer sends it home.
    The same link misrouted to another replica changes nothing and stays usable."""
    opener = Browser()
    async with (
        httpx2.AsyncClient(verify=verifying_tls(), headers=BEARER, timeout=60) as http,
        UrlOnlyClient(streamable_http_client(balanced, http_client=http), elicitation_callback=opener) as client,
    ):
        url, said = await opened_link(client, opener)
    base = f"http://127.0.0.1:{replicas.balancer_port}/approve/"
    assert url.startswith(base) and url not in said
    asked_by = parse_qs(urlsplit(url).query)["via"][0]
    other = next(server for name, server in replicas.named.items() if name != asked_by)
    balancer_host = {"Host": f"127.0.0.1:{replicas.balancer_port}"}
    async with httpx2.AsyncClient(verify=verifying_tls(), timeout=30) as browser:
        page = await browser.get(url.replace(f":{replicas.balancer_port}/", f":{other.port}/"), headers=balancer_host)
        misrouted = await browser.post(
            url.replace(f":{replicas.balancer_port}/", f":{other.port}/"),
            data={"csrf": form_token(page.text), "decision": "approve"},
            headers={**balancer_host, "Origin": origin(url)},
        )
    assert misrouted.status_code == 409 and "Open the newest link" in misrouted.text
    assert replicas.changes() == 0

    approved = await press(url, "approve")  # through the balancer, as the person's browser goes
    assert approved.status_code == 200 and "Status: executed" in approved.text
    assert replicas.changes() == 1
    (card,) = replicas.cards()
    assert card["status"] == "executed"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_app_card_shown_by_one_replica_is_decided_on_another_once(replicas: Replicas, mode: str) -> None:
    """The view's one-time secret is checked against the shared store: any replica decides it, once."""
    outcomes = []
    for n, replica in enumerate((0, 2, 1)):
        async with (
            httpx2.AsyncClient(verify=verifying_tls(), headers=BEARER, timeout=60) as http,
            Client(
                streamable_http_client(replicas.mcp(replica), http_client=http),
                mode=mode,
                extensions=[APPS],
                elicitation_callback=Person(),
            ) as client,
        ):
            if n == 0:
                _, card_id, secret = await show(client)
                assert replicas.changes() == 0
            else:
                outcomes.append(await decide(client, card_id, secret))

    first, replayed = outcomes
    assert not first.is_error and first.structured_content is not None, first
    assert (first.structured_content["status"], first.structured_content["changed"]) == ("executed", True)
    assert replayed.is_error  # the secret was spent on replica 2
    assert replicas.changes() == 1
