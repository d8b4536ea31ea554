"""Channel 3: a client with URL-mode elicitation only gets a one-time link to the approval page.

The tests follow the link with a real HTTP client (httpx2) against the page's loopback server and
post the page's own form, as a browser without JavaScript would.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from mcp_types import (
    ElicitationCapability,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
    UrlElicitationCapability,
)

from backend_client.tls import verifying_tls
from confirmation_cards import CardStatus, SqliteCardStore
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.conftest import MODES, operations
from tests.maya_tools.test_transports import http_server

pytestmark = pytest.mark.anyio

SCALE = ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 4})


class UrlOnlyClient(Client):
    """An MCP client that declares URL-mode elicitation and no forms."""

    async def _build_session(self, exit_stack: AsyncExitStack) -> ClientSession:
        session = await super()._build_session(exit_stack)
        build = session._build_capabilities

        def url_only(version: str) -> Any:
            return build(version).model_copy(
                update={"elicitation": ElicitationCapability(url=UrlElicitationCapability())}
            )

        session._build_capabilities = url_only  # type: ignore[method-assign]
        return session


class Browser:
    """The person at the URL elicitation: opens the link and, if told, presses a button on the page."""

    def __init__(self, press: str | None = None) -> None:
        self.press = press
        self.urls: list[str] = []
        self.pages: list[httpx2.Response] = []

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        assert isinstance(params, ElicitRequestURLParams), "a URL-only client is never sent a form"
        self.urls.append(params.url)
        if self.press is not None:
            self.pages.append(await press(params.url, self.press))
        return ElicitResult(action="accept")


def form_token(html: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert found is not None, html
    return found.group(1)


def origin(url: str) -> str:
    return "/".join(url.split("/")[:3])


async def press(url: str, button: str, **changes: Any) -> httpx2.Response:
    """GET the page, then POST its form with ``button`` as a same-origin browser would."""
    async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as http:
        page = await http.get(url)
        assert page.status_code == 200, page.text
        data = {"csrf": form_token(page.text), "decision": button}
        headers = {"Origin": origin(url), "Sec-Fetch-Site": "same-origin"}
        data.update(changes.pop("data", {}))
        headers.update(changes.pop("headers", {}))
        return await http.post(url, data={k: v for k, v in data.items() if v is not None}, headers=headers)


async def opened_link(client: Client, browser: Browser, call: tuple[str, dict[str, Any]] = SCALE) -> tuple[str, str]:
    """Call a change tool; ``browser`` (the client's elicitation callback) opens the link and, unless
    told to press, decides nothing. The link comes mid-call on 2025-11-25 and in an ``input_required``
    round on 2026-07-28; either way the call ends with the card pending. Returns the link and all the
    model may read of the result."""
    result = await client.call_tool(*call)
    data = result.structured_content
    assert data is not None and data["status"] == "pending" and data["changed"] is False, result
    return browser.urls[-1], str(result.model_dump())


def secret_of(url: str) -> str:
    return url.rsplit("/", 1)[1]


@pytest.mark.parametrize("mode", MODES)
async def test_a_url_only_client_approves_on_the_page_and_door_applies_the_change_once(
    server: MCPServer[Any], door: httpx2.AsyncClient, card_store: Path, mode: str
) -> None:
    browser = Browser("approve")
    async with UrlOnlyClient(server, mode=mode, elicitation_callback=browser) as client:
        result = await client.call_tool(*SCALE)
        data = result.structured_content
        assert data is not None and data["status"] == "executed" and data["changed"] is True
        [url] = browser.urls
        [page] = browser.pages
        said = str(result.model_dump())
        read = await client.call_tool("get_card", {"card_id": data["card"]["id"]})
        cards = read.model_dump()
    assert not read.is_error and "executed" in str(cards), cards
    assert url not in said and secret_of(url) not in said, "the link goes only through the elicitation"
    assert secret_of(url) not in str(cards)
    assert page.status_code == 200 and "Status: executed" in page.text
    assert [op["kind"] for op in await operations(door)] == ["pool.update"]
    store = SqliteCardStore(card_store)
    [card] = await store.list()
    assert card.status is CardStatus.EXECUTED
    approved = [e for e in await store.audit(card.id) if e.event == "approved"]
    assert len(approved) == 1 and approved[0].by is not None
    assert "approval page" in approved[0].by and (card.principal or "?") in approved[0].by


@pytest.mark.parametrize("mode", MODES)
async def test_decline_on_the_page_changes_nothing(
    server: MCPServer[Any], door: httpx2.AsyncClient, card_store: Path, mode: str
) -> None:
    browser = Browser("decline")
    async with UrlOnlyClient(server, mode=mode, elicitation_callback=browser) as client:
        result = await client.call_tool(*SCALE)
    data = result.structured_content
    assert data is not None and data["status"] == "declined" and data["changed"] is False
    [page] = browser.pages
    assert page.status_code == 200 and "Status: declined" in page.text
    assert await operations(door) == []
    assert [c.status for c in (await SqliteCardStore(card_store).list())] == [CardStatus.DECLINED]


@pytest.mark.parametrize("mode", MODES)
async def test_a_link_the_person_refuses_to_open_declines_the_card(
    server: MCPServer[Any], card_store: Path, mode: str
) -> None:
    class Refuses(Browser):
        async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
            await super().__call__(context, params)
            return ElicitResult(action="decline")

    browser = Refuses()
    async with UrlOnlyClient(server, mode=mode, elicitation_callback=browser) as client:
        result = await client.call_tool(*SCALE)
        async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as http:
            page = await http.get(browser.urls[0])
    data = result.structured_content
    assert data is not None and data["status"] == "declined" and data["changed"] is False
    assert page.status_code == 404, "a declined card's link shows nothing"


@pytest.mark.parametrize("mode", MODES)
async def test_an_opened_link_not_yet_decided_leaves_the_card_pending_until_it_expires(
    server: MCPServer[Any], door: httpx2.AsyncClient, mode: str
) -> None:
    browser = Browser()
    async with UrlOnlyClient(server, mode=mode, elicitation_callback=browser) as client:
        result = await client.call_tool(*SCALE)
    data = result.structured_content
    assert data is not None and data["status"] == "pending" and data["changed"] is False
    assert "approval page" in data["message"] and "expires unapproved at" in data["message"]
    assert browser.urls[0] not in str(result.model_dump())
    assert await operations(door) == []


async def test_a_link_decides_once_and_a_reload_a_second_post_or_an_altered_secret_do_nothing(
    server: MCPServer[Any], door: httpx2.AsyncClient
) -> None:
    browser = Browser()
    async with UrlOnlyClient(server, elicitation_callback=browser) as client:
        url, _ = await opened_link(client, browser)
        async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as http:
            page = await http.get(url)
            token = form_token(page.text)
            same = {"Origin": origin(url)}
            forged = url[:-4] + ("aaaa" if not url.endswith("aaaa") else "bbbb")
            assert (await http.get(forged)).status_code == 404
            assert (
                await http.post(forged, data={"csrf": token, "decision": "approve"}, headers=same)
            ).status_code == 404
            first = await http.post(url, data={"csrf": token, "decision": "approve"}, headers=same)
            assert first.status_code == 200 and "Status: executed" in first.text
            again = await http.post(url, data={"csrf": token, "decision": "approve"}, headers=same)
            reload = await http.get(url)
    assert again.status_code == 404 and reload.status_code == 404
    assert "executed" not in reload.text
    assert [op["kind"] for op in await operations(door)] == ["pool.update"]


@pytest.mark.parametrize(
    "forgery",
    [
        {"data": {"csrf": None}},
        {"data": {"csrf": "0" * 64}},
        {"headers": {"Origin": "https://evil.example"}},
        {"headers": {"Sec-Fetch-Site": "cross-site"}},
        {"headers": {"Host": "evil.example"}},
    ],
    ids=["no form token", "wrong form token", "another origin", "cross-site fetch", "another host"],
)
async def test_a_cross_site_post_changes_nothing_and_leaves_the_link_usable(
    server: MCPServer[Any], door: httpx2.AsyncClient, forgery: dict[str, Any]
) -> None:
    browser = Browser()
    async with UrlOnlyClient(server, elicitation_callback=browser) as client:
        url, _ = await opened_link(client, browser)
        refused = await press(url, "approve", **forgery)
        assert refused.status_code in (403, 404) and "executed" not in refused.text
        assert await operations(door) == []
        approved = await press(url, "approve")
    assert "Status: executed" in approved.text
    assert [op["kind"] for op in await operations(door)] == ["pool.update"]


async def test_the_page_cannot_be_framed_or_cached_and_loads_nothing_else(server: MCPServer[Any]) -> None:
    browser = Browser()
    async with UrlOnlyClient(server, elicitation_callback=browser) as client:
        url, _ = await opened_link(client, browser)
        async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as http:
            page = await http.get(url)
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert "<script" not in page.text and "http" not in page.text.split("<body>")[1].replace(url, "")
    assert 'method="post"' in page.text and "Approve" in page.text and "Decline" in page.text


@pytest.fixture
def http_url(tmp_path: Path) -> Iterator[str]:
    """A real `maya-tools serve --transport streamable-http` process on a free loopback port."""
    with http_server(tmp_path) as url:
        yield url


@pytest.mark.http
async def test_over_streamable_http_the_same_server_serves_the_page_without_a_bearer(http_url: str) -> None:
    """The link points at the server's own host and port; the page needs no bearer, /mcp still does."""
    headers = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
    browser = Browser()
    async with (
        httpx2.AsyncClient(verify=verifying_tls(), headers=headers) as http,
        UrlOnlyClient(streamable_http_client(http_url, http_client=http), elicitation_callback=browser) as client,
    ):
        url, said = await opened_link(client, browser)
        assert url.startswith(http_url.removesuffix("/mcp") + "/approve/") and url not in said
        page = await press(url, "approve")
        card_id = re.search(r"card_[\w-]+", said)
        assert card_id is not None, said
        cards = await client.call_tool("get_card", {"card_id": card_id.group()})
    assert not cards.is_error and "executed" in str(cards.model_dump()), cards
    assert page.status_code == 200 and "Status: executed" in page.text
    assert DEMO_ADMIN_TOKEN not in page.text and secret_of(url) not in str(cards.model_dump())
    async with httpx2.AsyncClient(verify=verifying_tls()) as raw:
        assert (await raw.post(http_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).status_code == 401


async def test_door_strings_on_the_page_are_inert_text(
    server: MCPServer[Any], door: httpx2.AsyncClient, clock: Any
) -> None:
    """A label carrying markup shows escaped: no element, no attribute, no script reaches the page."""
    from reference_backend.seed import DEMO_CLUSTER_ID
    from tests.conftest import auth

    hostile = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    response = await door.patch(
        f"/v1/public/clusters/{DEMO_CLUSTER_ID}/node-pools/workers",
        json={"labels": {"note": hostile}},
        headers=auth(DEMO_ADMIN_TOKEN),
    )
    assert response.status_code == 202
    clock.advance(600)  # the relabel operation finishes, so the pool is idle again
    browser = Browser()
    async with UrlOnlyClient(server, elicitation_callback=browser) as client:  # the page lives with the server
        relabel = ("relabel_node_pool", {"cluster": "payments-prod", "pool": "workers", "labels": {"note": "calm"}})
        url, _ = await opened_link(client, browser, relabel)
        async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as http:
            page = await http.get(url)
    assert page.status_code == 200
    assert (
        "<script>" not in page.text
        and "<img" not in page.text
        and "onerror=alert" not in page.text.replace("onerror=alert(2)&gt;", "")
    )
    assert "&lt;script&gt;" in page.text


async def test_the_link_of_an_expired_card_decides_nothing(
    server: MCPServer[Any], door: httpx2.AsyncClient, clock: Any, card_store: Path
) -> None:
    browser = Browser()
    async with UrlOnlyClient(server, elicitation_callback=browser) as client:  # the page lives with the server
        url, _ = await opened_link(client, browser)
        async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as http:
            fresh = await http.get(url)
            clock.advance(601)  # past the card's ten minutes
            page = await http.get(url)
            posted = await http.post(
                url,
                data={"csrf": form_token(fresh.text), "decision": "approve"},
                headers={"Origin": origin(url), "Sec-Fetch-Site": "same-origin"},
            )
    assert page.status_code in (404, 410) or "expired" in page.text.lower()
    assert posted.status_code in (403, 404, 410)
    assert await operations(door) == []
    [card] = await SqliteCardStore(card_store).list()
    assert card.status in (CardStatus.PENDING, CardStatus.EXPIRED)
