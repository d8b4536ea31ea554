"""The `requestState` principal binding holds on its own (issue 19), through a real `maya-tools serve`.

`test_hijack_live.py` replays the victim's state with another bearer and checks that nothing
executes; but without the binding the replay is not refused, it runs the tool again for the attacker
(a Door read with their token, a card of theirs, a new question), which still executes nothing. Here
the replay comes from a fresh client of another principal, with no session of the victim's, so no
session check stands in the way, and the test asks what the binding promises
(`maya_tools/channels/request_state.py`): the round is refused before any tool code runs.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitResult

from backend_client.tls import verifying_tls
from confirmation_cards import SqliteCardStore, token_fingerprint
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN, DEMO_OUTSIDER_TOKEN
from tests.maya_tools.live import Live
from tests.maya_tools.test_hijack_live import Recording

pytestmark = [pytest.mark.anyio, pytest.mark.http]

SCALE = ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3})
COLLEAGUE = "colleague-admin-token"  # another super_admin of the victim's organisation: Door lets them scale it
ATTACKERS = [COLLEAGUE, DEMO_MEMBER_TOKEN, DEMO_OUTSIDER_TOKEN, "not-a-door-token"]
REFUSAL = {"code": -32602, "message": "Invalid or expired requestState", "data": {"reason": "invalid_request_state"}}


def door_seen_since(live: Live, seq: int) -> list[dict[str, Any]]:
    """What Door answered after ``seq`` (method, path, status; never a token)."""
    response = live.admin("GET", "/_reference/requests", params={"since": seq})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def door_seq(live: Live) -> int:
    response = live.admin("GET", "/_reference/requests", params={"since": 0})
    assert response.status_code == 200, response.text
    return int(response.json()["next"])


async def cards_by_principal(live: Live) -> dict[str | None, int]:
    store = SqliteCardStore(live.card_store)
    try:
        cards = await store.list()
    finally:
        await store.close()
    counts: dict[str | None, int] = {}
    for card in cards:
        counts[card.principal] = counts.get(card.principal, 0) + 1
    return counts


async def test_the_victims_request_state_from_another_principals_fresh_client_is_refused_before_any_tool_code(
    shared_live: Live,
) -> None:
    live = shared_live
    added = live.admin(
        "PUT",
        f"/_reference/tokens/{COLLEAGUE}",
        json={"organisation": "payments", "role": "super_admin", "user": "cole"},
    )
    assert added.status_code == 200, added.text
    victim = Recording()
    replies: list[httpx2.Response] = []
    seen: list[dict[str, Any]] = []
    cards: list[dict[str | None, int]] = []

    async def victim_person(context: Any, params: Any) -> ElicitResult:
        (call,) = [r for r in victim.sent if b'"tools/call"' in r.content]
        asked = next(json.loads(body) for body in reversed(victim.bodies) if b"requestState" in body)["result"]
        message = json.loads(call.content)
        message["params"] = {
            **message["params"],
            "requestState": asked["requestState"],
            "inputResponses": {
                key: {"action": "accept", "content": {"approve": True}} for key in asked["inputRequests"]
            },
        }
        # Only what any client sends: no session of the victim's, no cookie, the attacker's own bearer.
        headers = {
            k: v
            for k, v in call.headers.items()
            if k.lower() not in {"authorization", "content-length", "host", "mcp-session-id", "cookie"}
        }
        cards.append(await cards_by_principal(live))
        before = await anyio.to_thread.run_sync(door_seq, live)
        for token in ATTACKERS:
            async with httpx2.AsyncClient(verify=verifying_tls(), timeout=30) as attacker:
                replies.append(
                    await attacker.post(live.url, headers={**headers, "Authorization": f"Bearer {token}"}, json=message)
                )
        seen.extend(await anyio.to_thread.run_sync(door_seen_since, live, before))
        cards.append(await cards_by_principal(live))
        return ElicitResult(action="decline")

    async with (
        httpx2.AsyncClient(
            transport=victim, headers={"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}, timeout=30
        ) as http,
        Client(streamable_http_client(live.url, http_client=http), elicitation_callback=victim_person) as client,
    ):
        result = await client.call_tool(*SCALE)

    before, after = cards
    assert after == before, "a replay planned a card: the tool ran for the attacker"
    assert seen == [], "a replay ran tool code: Door was read with the attacker's token"
    answers = [(r.status_code, r.json().get("error")) for r in replies]
    assert answers == [(400, REFUSAL)] * len(ATTACKERS), [r.text[:200] for r in replies]
    assert before.get(token_fingerprint(DEMO_ADMIN_TOKEN), 0) >= 1
    assert not any(token_fingerprint(t) in after for t in ATTACKERS)
    assert result.structured_content is not None and result.structured_content["status"] == "declined"
    assert live.changes() == 0
