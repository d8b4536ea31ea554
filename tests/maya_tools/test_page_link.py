"""The approval page's link on each protocol version (``maya_tools/channels/page_link.py``): on 2026-07-28 an
``input_required`` round whose retry reports what the page decided, on 2025-11-25 an
``elicitation/create`` request mid-call, and never the retired ``-32042`` error."""

from __future__ import annotations

import json
from typing import Any, Literal

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from mcp_types import (
    URL_ELICITATION_REQUIRED,
    CallToolResult,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
)

from backend_client.tls import verifying_tls
from maya_tools.channels.page_link import PAGE_KEY
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.conftest import MODES, operations
from tests.maya_tools.live import Live
from tests.maya_tools.test_approval_page import SCALE, Browser, UrlOnlyClient, press, secret_of
from tests.maya_tools.wire import Wire

pytestmark = pytest.mark.anyio

PROTOCOL = {"legacy": "2025-11-25", "auto": "2026-07-28"}


@pytest.mark.http
@pytest.mark.parametrize("mode", MODES)
async def test_on_the_wire_the_link_never_rides_the_retired_32042_error(shared_live: Live, mode: str) -> None:
    """Through a real `maya-tools serve`: the person opens the link and approves on the page; the
    call ends executed, Door applied the change once, and no JSON-RPC error -32042 crossed the wire."""
    wire = Wire()
    browser = Browser("approve")
    bearer = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
    async with (
        httpx2.AsyncClient(transport=wire, headers=bearer, timeout=30) as http,
        UrlOnlyClient(
            streamable_http_client(shared_live.url, http_client=http), mode=mode, elicitation_callback=browser
        ) as client,
    ):
        assert client.session.protocol_version == PROTOCOL[mode]
        result = await client.call_tool(*SCALE)
    data = result.structured_content
    assert data is not None and data["status"] == "executed" and data["changed"] is True, result
    assert shared_live.changes() == 1
    assert URL_ELICITATION_REQUIRED not in wire.error_codes()
    [url] = browser.urls
    received = wire.received()
    rounds = [m["result"] for m in received if m.get("result", {}).get("resultType") == "input_required"]
    asked = [m for m in received if m.get("method") == "elicitation/create"]
    if mode == "legacy":
        assert rounds == [] and [a["params"]["mode"] for a in asked] == ["url"]
        [carrier] = asked
        assert carrier["params"]["url"] == url
    else:
        assert asked == [], "2026-07-28 sends no server-to-client request"
        [carrier] = rounds
        assert list(carrier["inputRequests"]) == [PAGE_KEY]
        request = carrier["inputRequests"][PAGE_KEY]
        assert request["method"] == "elicitation/create" and request["params"]["mode"] == "url"
        assert request["params"]["url"] == url and secret_of(url) not in carrier["requestState"]
        [retry] = [m for m in wire.sent if m.get("method") == "tools/call" and "inputResponses" in m["params"]]
        assert retry["params"]["inputResponses"] == {PAGE_KEY: {"action": "accept"}}
        assert retry["params"]["requestState"] == carrier["requestState"]
    elsewhere = [m for m in received if m is not carrier and m.get("result") is not carrier]
    assert secret_of(url) not in json.dumps(elsewhere), "the link travels in the elicitation request only"


async def first_round(client: Client) -> tuple[InputRequiredResult, str]:
    first = await client.session.call_tool(*SCALE, allow_input_required=True)
    assert isinstance(first, InputRequiredResult), first
    assert first.input_requests is not None and list(first.input_requests) == [PAGE_KEY]
    params = first.input_requests[PAGE_KEY].params
    assert isinstance(params, ElicitRequestURLParams)
    return first, params.url


async def retry(
    client: Client, first: InputRequiredResult, action: Literal["accept", "decline", "cancel"] = "accept"
) -> CallToolResult:
    answered = await client.session.call_tool(
        *SCALE,
        input_responses={PAGE_KEY: ElicitResult(action=action)},
        request_state=first.request_state,
        allow_input_required=True,
    )
    assert isinstance(answered, CallToolResult), answered
    return answered


async def test_the_retry_reports_pending_then_what_the_page_decided_and_a_replay_executes_nothing(
    server: MCPServer[Any], door: httpx2.AsyncClient
) -> None:
    async with UrlOnlyClient(server, elicitation_callback=Browser()) as client:
        first, url = await first_round(client)
        waiting = await retry(client, first)
        assert waiting.structured_content is not None
        assert waiting.structured_content["status"] == "pending" and "expires unapproved at" in str(waiting.content)
        assert await operations(door) == []
        page = await press(url, "approve")
        assert "Status: executed" in page.text
        done = await retry(client, first)
        again = await retry(client, first)
    assert done.structured_content is not None and again.structured_content is not None
    assert done.structured_content["status"] == "executed" and done.structured_content["changed"] is True
    assert again.structured_content["status"] == "executed"
    assert [op["kind"] for op in await operations(door)] == ["pool.update"], "executed once, replay or not"
    for result in (waiting, done, again):
        assert secret_of(url) not in str(result.model_dump())


async def test_a_refused_link_declines_and_a_later_accept_cannot_revive_the_card(
    server: MCPServer[Any], door: httpx2.AsyncClient
) -> None:
    async with UrlOnlyClient(server, elicitation_callback=Browser()) as client:
        first, url = await first_round(client)
        declined = await retry(client, first, "decline")
        revived = await retry(client, first, "accept")
        async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as http:
            page = await http.get(url)
    assert declined.structured_content is not None and declined.structured_content["status"] == "declined"
    assert revived.structured_content is not None and revived.structured_content["status"] == "declined"
    assert page.status_code == 404 and await operations(door) == []


async def test_an_answer_to_an_earlier_card_s_link_is_not_taken_for_the_card_now_pending(
    server: MCPServer[Any], door: httpx2.AsyncClient
) -> None:
    """The round's requestState names its card: once that card is decided and the same request makes a
    new card, the old round's answer does not stand for the new one, which is asked about anew."""
    async with UrlOnlyClient(server, elicitation_callback=Browser()) as client:
        first, url = await first_round(client)
        await press(url, "decline")
        _, newer = await first_round(client)  # the same request again: a new card, a new link
        stale = await client.session.call_tool(
            *SCALE,
            input_responses={PAGE_KEY: ElicitResult(action="accept")},
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert newer != url
    assert isinstance(stale, InputRequiredResult), "the new card is asked about, not answered by the old link"
    assert await operations(door) == []
