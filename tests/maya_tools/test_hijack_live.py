"""Another principal cannot answer, read or replay anything of yours over streamable HTTP (DESIGN.md
property 12), through a real `maya-tools serve` and a real reference backend."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitResult

from backend_client.tls import verifying_tls
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN, DEMO_OUTSIDER_TOKEN
from tests.maya_tools.live import Live

pytestmark = [pytest.mark.anyio, pytest.mark.http]

SCALE = ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3})
ATTACKERS = ["not-a-door-token", DEMO_MEMBER_TOKEN, DEMO_OUTSIDER_TOKEN]


class Recording(httpx2.AsyncBaseTransport):
    """The victim's own HTTP traffic, kept so the test can hand it to an attacker."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.sent: list[httpx2.Request] = []
        self.bodies: list[bytes] = []
        self.session: str | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(request)
        response = await self.inner.handle_async_request(request)
        self.session = response.headers.get("mcp-session-id") or self.session
        if response.headers.get("content-type", "").startswith("application/json"):
            body = await response.aread()
            self.bodies.append(body)
            return httpx2.Response(response.status_code, headers=response.headers, content=body, request=request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def unknown_session_answer(live: Live) -> tuple[int, str]:
    with httpx2.Client(verify=verifying_tls(), timeout=10) as http:
        answer = http.post(
            live.url,
            headers={
                "Authorization": f"Bearer {DEMO_ADMIN_TOKEN}",
                "Mcp-Session-Id": "no-such-session",
                "Accept": "application/json, text/event-stream",
            },
            json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
        )
    return answer.status_code, answer.text


async def test_another_bearer_with_the_victims_session_id_cannot_answer_read_or_close_it(shared_live: Live) -> None:
    """2025-11-25: the elicitation travels on the victim's session; an attacker's POST of an accepting
    answer, GET of the stream and DELETE of the session are answered like an unknown session."""
    live = shared_live
    victim = Recording()
    attempts: list[tuple[int, str]] = []

    async def victim_person(context: Any, params: Any) -> ElicitResult:
        assert victim.session is not None
        async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as attacker:
            for token in ATTACKERS:
                headers = {
                    "Authorization": f"Bearer {token}",
                    "Mcp-Session-Id": victim.session,
                    "Accept": "application/json, text/event-stream",
                    "Mcp-Protocol-Version": "2025-11-25",
                }
                for request_id in range(4):  # the server's request ids are small integers: guess them all
                    answer = {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "result": {"action": "accept", "content": {"approve": True}},
                    }
                    reply = await attacker.post(live.url, headers=headers, json=answer)
                    attempts.append((reply.status_code, reply.text))
                stream = await attacker.get(live.url, headers=headers)
                attempts.append((stream.status_code, stream.text))
                closed = await attacker.delete(live.url, headers=headers)
                attempts.append((closed.status_code, closed.text))
        return ElicitResult(action="decline")

    async with (
        httpx2.AsyncClient(
            transport=victim, headers={"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}, timeout=30
        ) as http,
        Client(
            streamable_http_client(live.url, http_client=http), mode="legacy", elicitation_callback=victim_person
        ) as client,
    ):
        result = await client.call_tool(*SCALE)

    assert attempts and set(attempts) == {unknown_session_answer(live)}
    assert result.structured_content is not None and result.structured_content["status"] == "declined"
    assert live.changes() == 0


async def test_a_replayed_request_state_with_another_bearer_approves_nothing(shared_live: Live) -> None:
    """2026-07-28: the answering round carries `requestState`; replayed with another bearer and an
    accepting answer, it meets no card of that principal and nothing executes."""
    live = shared_live
    victim = Recording()
    replies: list[httpx2.Response] = []

    async def victim_person(context: Any, params: Any) -> ElicitResult:
        (call,) = [r for r in victim.sent if b'"tools/call"' in r.content]
        asked = next(json.loads(body) for body in reversed(victim.bodies) if b"requestState" in body)
        result = asked["result"]
        params_sent = json.loads(call.content)
        for token in ATTACKERS:
            replay = dict(params_sent)
            replay["params"] = {
                **params_sent["params"],
                "requestState": result["requestState"],
                "inputResponses": {
                    key: {"action": "accept", "content": {"approve": True}} for key in result["inputRequests"]
                },
            }
            headers = {
                k: v for k, v in call.headers.items() if k.lower() not in {"authorization", "content-length", "host"}
            }
            async with httpx2.AsyncClient(verify=verifying_tls(), timeout=30) as attacker:
                replies.append(
                    await attacker.post(live.url, headers={**headers, "Authorization": f"Bearer {token}"}, json=replay)
                )
        return ElicitResult(action="decline")

    async with (
        httpx2.AsyncClient(
            transport=victim, headers={"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}, timeout=30
        ) as http,
        Client(streamable_http_client(live.url, http_client=http), elicitation_callback=victim_person) as client,
    ):
        result = await client.call_tool(*SCALE)

    assert len(replies) == len(ATTACKERS)
    for reply in replies:
        text = reply.text
        assert '"changed":true' not in text.replace(" ", "") and "executed" not in text
        assert not re.search(r'"status"\s*:\s*"executed"', text)
    assert result.structured_content is not None and result.structured_content["status"] == "declined"
    assert live.changes() == 0
