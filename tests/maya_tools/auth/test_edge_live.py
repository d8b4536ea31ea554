"""The HTTP edge of a real ``maya-tools serve`` (issue 26, points 5 and 7), in both protocol generations.

- Bad JSON is a ``400`` JSON-RPC error, never a ``5xx``: nested 2,000 levels deep, ``1e400``, a
  10,000-digit integer, invalid UTF-8, empty, a wrong content type, JSON that is not an object, under
  ``--auth oauth`` with a valid token, under ``--auth door-token``, and without any bearer (401 first).
- Every message that carries a decision needs ``maya.change``: on 2025-11-25 the JSON-RPC *response*
  to the server's ``elicitation/create``, sent with the same person's ``maya.read``-only token, is
  refused (403 naming ``maya.change``), nothing runs and Door sees no ``PATCH``, while the same answer
  with the change token approves; on 2026-07-28 the answer rides the ``tools/call`` retry
  (``inputResponses`` + ``requestState``), refused to a read-only token the same way; ``decide_card``
  and ``stop_plan`` are no read tools.

The provider is the real test provider, Door a real ``reference-backend`` whose request log says
what it received (``World`` of ``test_serve_oauth``); the legacy elicitation round is driven by hand
over real HTTP so that the test holds the server's request open while it answers.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from backend_client.tls import verifying_tls
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.auth.test_resource import SwitchingPerson
from tests.maya_tools.auth.test_serve_oauth import World
from tests.maya_tools.live import REF_ADMIN, Live, Proc, base_env, free_port
from tests.oidc import ADMIN, SERVER_CLIENT_ID, SERVER_CLIENT_SECRET, OpenIDProvider

pytestmark = [pytest.mark.anyio, pytest.mark.http]

GENERATIONS = {"legacy": "2025-11-25", "modern": "2026-07-28"}
READ_ONLY = ("openid", "email", "maya.read")
SCALE = {"cluster": "payments-prod", "pool": "workers", "count": 3}
ACCEPT = {"accept": "application/json, text/event-stream"}
LIST = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":%s}}'
BAD: dict[str, tuple[bytes, str, int]] = {
    "nested 2000 deep": (b"[" * 2000 + b"]" * 2000, "application/json", -32700),
    "objects nested 2000 deep": (b'{"a":' * 2000 + b"1" + b"}" * 2000, "application/json", -32700),
    "1e400": (LIST % b"1e400", "application/json", -32700),
    "a 10,000-digit integer": (LIST % (b"9" * 10_000), "application/json", -32700),
    "NaN": (LIST % b"NaN", "application/json", -32700),
    "invalid UTF-8": (LIST % b'"\xff\xfe"', "application/json", -32700),
    "a lone surrogate": (LIST % b'"\\ud800"', "application/json", -32700),
    "empty": (b"", "application/json", -32700),
    "Infinity": (LIST % b"Infinity", "application/json", -32700),
    "a wrong content type": (LIST % b"1", "text/plain", -32700),
    "a number": (b"42", "application/json", -32600),
    "a string": (b'"tools/list"', "application/json", -32600),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A real ``serve --auth oauth`` (its own card store and credential key), the test provider, and a
    real ``reference-backend`` on a manual clock as Door."""
    tmp = tmp_path_factory.mktemp("edge")
    port, door_port = free_port(), free_port()
    public_url = f"http://127.0.0.1:{port}"
    key = secrets.token_hex(32)
    door_argv = ["reference-backend", "--port", str(door_port), "--state", str(tmp / "door.sqlite3")]
    door = Proc([*door_argv, "--admin-token", REF_ADMIN, "--manual-clock"], door_port, base_env())
    with OpenIDProvider([public_url + "/mcp"], redirect_uris=[public_url + "/auth/callback"]).running() as provider:
        env = {
            **base_env(),
            "DOOR_API_URL": f"http://127.0.0.1:{door_port}",
            "MAYA_CARD_STORE": str(tmp / "cards.sqlite3"),
            "MAYA_OAUTH_ISSUER": provider.issuer,
            "MAYA_PUBLIC_URL": public_url,
            "MAYA_OAUTH_CLIENT_ID": SERVER_CLIENT_ID,
            "MAYA_OAUTH_CLIENT_SECRET": SERVER_CLIENT_SECRET,
            "MAYA_CREDENTIAL_KEY": key,
        }
        server = Proc(["serve", "--transport", "streamable-http", "--port", str(port)], port, env)
        try:
            made = World(provider, server, door, public_url, tmp / "cards.sqlite3", key)
            anyio.run(made.connect_door, ADMIN, DEMO_ADMIN_TOKEN)
            yield made
        finally:
            server.stop()
            door.stop()


@pytest.fixture(scope="module")
def tokens(world: World) -> dict[str, str]:
    """ada's change token and her read-only token, both issued by the provider for this server."""

    async def issue() -> dict[str, str]:
        async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10.0) as http:
            change = await world.provider.access_token(http, ADMIN)
            read = await world.provider.access_token(http, ADMIN, scopes=READ_ONLY)
        return {"change": change, "read": read}

    return anyio.run(issue)


@pytest.fixture
def fresh(world: World) -> World:
    response = world.admin("POST", "/_reference/reset", json={"seed": "demo"})
    assert response.status_code == 200, response.text
    with sqlite3.connect(world.card_store) as db:
        db.execute("DELETE FROM cards")
    return world


def http_client(token: str | None = None) -> httpx2.AsyncClient:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx2.AsyncClient(verify=verifying_tls(), timeout=30.0, headers=headers)


def cards(world: World) -> list[dict[str, Any]]:
    with sqlite3.connect(f"file:{world.card_store}?mode=ro", uri=True) as db:
        return [json.loads(row[0]) for row in db.execute("SELECT data FROM cards")]


def last_seq(world: World) -> int:
    return int(world.admin("GET", "/_reference/requests").json()["next"])


def patches(world: World, since: int) -> list[dict[str, Any]]:
    """Every request but a read that Door received after ``since`` (accepted or not)."""
    return [r for r in world.door_requests() if r["seq"] > since and r["method"] not in ("GET", "HEAD")]


def assert_bad(response: httpx2.Response, code: int) -> None:
    assert response.status_code == 400, (response.status_code, response.text[:300])
    answer = response.json()
    assert answer["jsonrpc"] == "2.0" and answer["id"] is None
    assert answer["error"]["code"] == code, answer
    assert answer["error"]["message"].startswith("Parse error" if code == -32700 else "Invalid Request"), answer


# --- bad JSON ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", GENERATIONS)
@pytest.mark.parametrize("what", BAD)
async def test_bad_json_is_a_400_json_rpc_error_under_oauth(
    world: World, tokens: dict[str, str], what: str, mode: str
) -> None:
    body, content_type, code = BAD[what]
    headers = {**ACCEPT, "content-type": content_type, "mcp-protocol-version": GENERATIONS[mode]}
    async with http_client(tokens["change"]) as http:
        response = await http.post(world.mcp_url, content=body, headers=headers)

    assert_bad(response, code)


@pytest.mark.parametrize("mode", GENERATIONS)
async def test_bad_json_without_a_bearer_is_the_401_challenge_not_a_5xx(world: World, mode: str) -> None:
    headers = {**ACCEPT, "content-type": "application/json", "mcp-protocol-version": GENERATIONS[mode]}
    async with http_client() as http:
        response = await http.post(world.mcp_url, content=BAD["nested 2000 deep"][0], headers=headers)

    assert response.status_code == 401
    assert 'scope="maya.read maya.change"' in response.headers["www-authenticate"]


@pytest.mark.parametrize("mode", GENERATIONS)
@pytest.mark.parametrize("what", BAD)
async def test_bad_json_is_a_400_json_rpc_error_under_door_token(shared_live: Live, what: str, mode: str) -> None:
    body, content_type, code = BAD[what]
    headers = {**ACCEPT, "content-type": content_type, "mcp-protocol-version": GENERATIONS[mode]}
    async with http_client(DEMO_ADMIN_TOKEN) as http:
        response = await http.post(shared_live.url, content=body, headers=headers)

    assert_bad(response, code)


# --- decisions need maya.change ------------------------------------------------------------------


class LegacyRound:
    """A 2025-11-25 session opened by hand, whose ``tools/call`` the test holds open on its SSE stream."""

    def __init__(self, world: World, http: httpx2.AsyncClient, session: str) -> None:
        self.world, self.http, self.session = world, http, session
        self.asked = anyio.Event()
        self.answered = anyio.Event()
        self.elicitation: dict[str, Any] = {}
        self.result: dict[str, Any] = {}

    def headers(self, token: str) -> dict[str, str]:
        return {
            **ACCEPT,
            "authorization": f"Bearer {token}",
            "mcp-session-id": self.session,
            "mcp-protocol-version": "2025-11-25",
        }

    async def call(self, token: str, tool: str, arguments: dict[str, Any]) -> None:
        request = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        async with self.http.stream("POST", self.world.mcp_url, json=request, headers=self.headers(token)) as stream:
            assert stream.status_code == 200, await stream.aread()
            async for line in stream.aiter_lines():
                if not line.startswith("data:") or not line[5:].strip():
                    continue
                message = json.loads(line[5:])
                if message.get("method") == "elicitation/create":
                    self.elicitation = message
                    self.asked.set()
                elif message.get("id") == 7:
                    self.result = message
                    self.answered.set()
                    return

    async def answer(self, token: str, answer: dict[str, Any]) -> httpx2.Response:
        response = {"jsonrpc": "2.0", "id": self.elicitation["id"], "result": answer}
        return await self.http.post(self.world.mcp_url, json=response, headers=self.headers(token))


async def open_legacy(world: World, http: httpx2.AsyncClient, token: str) -> str:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "edge-test", "version": "1"},
        },
    }
    opened = await http.post(world.mcp_url, json=initialize, headers={**ACCEPT, "authorization": f"Bearer {token}"})
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers = {
        **ACCEPT,
        "authorization": f"Bearer {token}",
        "mcp-session-id": session,
        "mcp-protocol-version": "2025-11-25",
    }
    assert (await http.post(world.mcp_url, json=initialized, headers=headers)).status_code == 202
    return session


APPROVE = {"action": "accept", "content": {"approve": True}}


async def test_legacy_an_elicitation_answer_sent_with_a_read_only_token_is_refused_and_nothing_runs(
    fresh: World, tokens: dict[str, str]
) -> None:
    since = last_seq(fresh)
    async with http_client() as http:
        session = await open_legacy(fresh, http, tokens["change"])
        round_ = LegacyRound(fresh, http, session)
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(round_.call, tokens["change"], "scale_node_pool", SCALE)
                await round_.asked.wait()

                refused = await round_.answer(tokens["read"], APPROVE)

                assert refused.status_code == 403, refused.text
                challenge = refused.headers["www-authenticate"]
                assert challenge.startswith('Bearer error="insufficient_scope"'), challenge
                assert "needs scope maya.change" in challenge and 'scope="maya.read maya.change"' in challenge
                (card,) = cards(fresh)
                assert card["status"] == "pending"  # the refused answer reached nothing
                assert patches(fresh, since) == []  # and Door saw no change
                assert not round_.answered.is_set()

                # the same answer with the change token of the same person approves: the scope refused it
                taken = await round_.answer(tokens["change"], APPROVE)
                assert taken.status_code == 202, taken.text
                await round_.answered.wait()

    assert round_.result["result"]["structuredContent"]["status"] == "executed", round_.result
    assert [r["method"] for r in patches(fresh, since)] == ["PATCH"]


async def test_modern_an_elicitation_answer_retried_with_a_read_only_token_is_refused_and_nothing_runs(
    fresh: World, tokens: dict[str, str]
) -> None:
    """2026-07-28: the answer travels in the ``tools/call`` retry (``inputResponses`` with the
    ``requestState`` of the first round); sent with the read-only token it is the step-up 403."""
    since = last_seq(fresh)
    async with http_client(tokens["change"]) as http:
        person = SwitchingPerson(http, tokens["read"])  # answers the form, switching to the read token
        async with Client(
            streamable_http_client(fresh.mcp_url, http_client=http), elicitation_callback=person
        ) as client:
            assert client.session.protocol_version == "2026-07-28"
            with pytest.raises(MCPError):
                await client.call_tool("scale_node_pool", SCALE)

    (card,) = cards(fresh)
    assert card["status"] == "pending"
    assert patches(fresh, since) == []


@pytest.mark.parametrize("mode", GENERATIONS)
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("decide_card", {"card_id": "card_x", "secret": "s", "decision": "approve"}),
        ("stop_plan", {"card_id": "card_x"}),
    ],
)
async def test_decide_card_and_stop_plan_need_maya_change(
    fresh: World, tokens: dict[str, str], mode: str, tool: str, arguments: dict[str, Any]
) -> None:
    since = last_seq(fresh)
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    async with http_client() as http:
        headers = {**ACCEPT, "authorization": f"Bearer {tokens['read']}", "mcp-protocol-version": GENERATIONS[mode]}
        if mode == "legacy":
            headers["mcp-session-id"] = await open_legacy(fresh, http, tokens["read"])
        response = await http.post(fresh.mcp_url, json=call, headers=headers)

    assert response.status_code == 403, response.text
    assert f"Tool {tool} needs scope maya.change" in response.headers["www-authenticate"]
    assert patches(fresh, since) == []


class MovedRetry(httpx2.AsyncBaseTransport):
    """Real HTTP, except that the 2026-07-28 retry carrying the card's answer (``inputResponses``) is
    sent with the read-only token as a call of the read tool ``get_card``, as an attacker would try
    to slip the answer past the scope check."""

    def __init__(self, world: World, read_token: str) -> None:
        self.world, self.read_token = world, read_token
        self.inner = httpx2.AsyncHTTPTransport(verify=verifying_tls())
        self.moved: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        if b"inputResponses" in body:
            message = json.loads(body)
            (card,) = cards(self.world)
            message["params"] = {**message["params"], "name": "get_card", "arguments": {"card_id": card["id"]}}
            content = json.dumps(message).encode()
            kept = ("content-length", "authorization", "mcp-name")
            headers = {k: v for k, v in request.headers.items() if k.lower() not in kept}
            if "mcp-name" in request.headers:  # 2026-07-28 repeats the tool's name in a header
                headers["mcp-name"] = "get_card"
            request = httpx2.Request(
                request.method,
                request.url,
                headers={**headers, "authorization": f"Bearer {self.read_token}"},
                content=content,
            )
        response = await self.inner.handle_async_request(request)
        if b"inputResponses" in body:
            self.moved.append(response.status_code)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_modern_the_answer_moved_onto_a_read_tool_call_is_refused_by_the_seal_and_nothing_runs(
    fresh: World, tokens: dict[str, str]
) -> None:
    """The retry's ``requestState`` is sealed to the tool and arguments of its round (and the person),
    so the answer cannot ride a read tool's call either: the SDK refuses it before any tool code runs."""
    since = last_seq(fresh)
    transport = MovedRetry(fresh, tokens["read"])
    headers = {"authorization": f"Bearer {tokens['change']}"}
    async with httpx2.AsyncClient(transport=transport, headers=headers, timeout=30.0) as http:
        person = SwitchingPerson(http, tokens["change"])  # answers "approve"
        async with Client(
            streamable_http_client(fresh.mcp_url, http_client=http), elicitation_callback=person
        ) as client:
            try:
                result = await client.call_tool("scale_node_pool", SCALE)
            except MCPError as error:
                refused = str(error)
            else:
                assert result.is_error, result
                refused = str(result.content)

    assert transport.moved and all(status >= 400 for status in transport.moved), transport.moved
    assert "requestState" in refused or "request state" in refused.lower(), refused
    (card,) = cards(fresh)
    assert card["status"] == "pending"
    assert patches(fresh, since) == []
