"""``serve --auth oauth``'s own HTTP app (in process, the real bearer check and per-request Door-token
lookup): on 2026-07-28 a retry that answers the connect link with ``accept`` waits for the person, and
once they connected, the very request that waited calls Door with their new Door token
(``hold_door_token`` puts it in the request's scope, where ``Runtime.token_for`` finds it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, ElicitRequestURLParams, ElicitResult, InputRequiredResult

from maya_tools.channels import link_wait
from maya_tools.channels.connect import CONNECT_KEY
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.auth.served import RESOURCE, Served, served
from tests.maya_tools.channels.test_connect_door import UrlOnly
from tests.oidc import ADMIN, OpenIDProvider

pytestmark = pytest.mark.anyio

READ = ("list_node_pools", {"cluster": "payments-prod"})


@pytest.fixture
async def site(provider: OpenIDProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Served]:
    backend = ReferenceBackend(clock=ManualClock(), seed="demo")
    async with served(provider, backend, tmp_path / "cards.sqlite3", monkeypatch, link_wait_seconds=600.0) as running:
        yield running


async def test_the_retry_that_waited_calls_door_with_the_token_connected_meanwhile(
    site: Served, provider: OpenIDProvider, client_http: httpx2.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(link_wait, "POLL_SECONDS", 600.0)  # only /connect's own signal wakes the retry
    links = site.runtime.links
    waits = anyio.Event()
    take = links._take

    def taking(key: str) -> anyio.Event:
        event = take(key)
        waits.set()  # the retry has begun to wait on the link
        return event

    monkeypatch.setattr(links, "_take", taking)
    token = await provider.access_token(client_http, ADMIN)
    with anyio.fail_after(30):
        async with (
            site.http(token) as http,
            UrlOnly(streamable_http_client(RESOURCE, http_client=http)) as client,
            anyio.create_task_group() as group,
        ):
            first = await client.session.call_tool(*READ, allow_input_required=True)
            assert isinstance(first, InputRequiredResult) and first.input_requests is not None, first
            params = first.input_requests[CONNECT_KEY].params
            assert isinstance(params, ElicitRequestURLParams)
            for_id = parse_qs(urlsplit(params.url).query)["for"][0]
            assert site.door_bearers == [], "nothing reaches Door before the person connects"

            async def person() -> None:
                # What /connect does once the pasted token checks out: store it, then mark the link done.
                await waits.wait()
                await site.connect_door(ADMIN, DEMO_ADMIN_TOKEN)
                assert site.runtime.connect_requests is not None
                assert await site.runtime.connect_requests.complete(for_id)

            group.start_soon(person)
            listed = await client.session.call_tool(
                *READ,
                input_responses={CONNECT_KEY: ElicitResult(action="accept")},
                request_state=first.request_state,
                allow_input_required=True,
            )
    assert isinstance(listed, CallToolResult) and not listed.is_error, listed
    assert "workers" in str(listed.content)
    assert site.door_bearers and set(site.door_bearers) == {f"Bearer {DEMO_ADMIN_TOKEN}"}
    assert token not in " ".join(site.door_bearers), "the MCP access token never reaches Door"
