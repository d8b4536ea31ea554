"""The URL approval page in headless Chromium, against a real ``maya-tools serve --transport streamable-http``.

A URL-only MCP client gets the one-time link; Chromium opens it and a person's click on Approve or
Decline is a real click on the page's form. Door's operations, read back through the server's own
tools, show the change applied exactly once, or not at all.
Re-take the screenshots in docs/img: MAYA_UPDATE_SCREENSHOTS=1 pytest tests/browser
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.async_api import Browser, Page

from backend_client.tls import verifying_tls
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.browser.conftest import IMG, WIDTH
from tests.maya_tools.test_approval_page import Browser as LinkOpener
from tests.maya_tools.test_approval_page import UrlOnlyClient, opened_link

pytestmark = [pytest.mark.anyio, pytest.mark.http]

Scheme = Literal["light", "dark"]


@asynccontextmanager
async def url_only_client(http_url: str) -> AsyncIterator[tuple[Client, LinkOpener]]:
    """A URL-only client and the person at its elicitations, who opens the link and leaves it to Chromium."""
    headers = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
    opener = LinkOpener()
    async with (
        httpx2.AsyncClient(verify=verifying_tls(), headers=headers) as http,
        UrlOnlyClient(streamable_http_client(http_url, http_client=http), elicitation_callback=opener) as client,
    ):
        yield client, opener


async def pool_updates(client: Client) -> int:
    """How many changes Door applied to the pool, read through the server's own tool."""
    result = await client.call_tool("get_cluster_operations", {"cluster": "payments-prod"})
    data = result.structured_content
    assert data is not None, result
    return sum(1 for op in data["operations"] if op["kind"] == "pool.update")


async def card_status(client: Client, page: Page) -> str:
    """The card's status as the server's ``get_card`` tells the MCP client (the id as the page shows it)."""
    card_id = await page.locator("code", has_text="card_").first.inner_text()
    card = (await client.call_tool("get_card", {"card_id": card_id})).structured_content
    assert card is not None
    return str(card["card"]["status"])


async def open_page(chromium: Browser, url: str, scheme: Scheme = "light", status: int = 200) -> Page:
    context = await chromium.new_context(viewport={"width": WIDTH, "height": 640}, color_scheme=scheme)
    page = await context.new_page()
    response = await page.goto(url)
    assert response is not None and response.status == status
    return page


async def screenshot(page: Page, name: str) -> None:
    """Take it every run (the page renders in Chromium); write it to docs/img only when asked."""
    wide = await page.evaluate("document.documentElement.scrollWidth")
    assert wide <= WIDTH, f"the page is {wide} px wide in a {WIDTH} px window"
    png = await page.screenshot(full_page=True)
    assert png.startswith(b"\x89PNG")
    target = IMG / name
    if os.environ.get("MAYA_UPDATE_SCREENSHOTS") == "1":
        IMG.mkdir(exist_ok=True)
        target.write_bytes(png)
    assert target.exists(), f"no {target} yet: run with MAYA_UPDATE_SCREENSHOTS=1 once and commit it"


async def test_approve_in_chromium_applies_the_change_once_and_a_reload_or_second_click_does_nothing(
    http_url: str, chromium: Browser
) -> None:
    async with url_only_client(http_url) as (client, opener):
        url, _ = await opened_link(client, opener)
        assert await pool_updates(client) == 0
        page = await open_page(chromium, url)
        await page.get_by_role("heading", level=1).wait_for()
        assert await page.get_by_role("button", name="Approve").is_visible()
        await screenshot(page, "approval-page-light.png")
        async with page.expect_navigation():
            await page.get_by_role("button", name="Approve").click()
        assert "Status: executed" in await page.content()
        await screenshot(page, "approval-page-done-light.png")
        assert await pool_updates(client) == 1
        assert await card_status(client, page) == "executed"

        reloaded = await page.reload()  # whether it posts again or not, the link is used
        assert reloaded is not None
        assert "This approval link is not valid" in await page.content()
        assert await page.get_by_role("button", name="Approve").count() == 0

        again = await open_page(chromium, url, status=404)  # the used link, opened again
        assert await again.get_by_role("button", name="Approve").count() == 0
        assert await pool_updates(client) == 1


async def test_a_form_left_open_in_a_second_tab_cannot_approve_again(http_url: str, chromium: Browser) -> None:
    async with url_only_client(http_url) as (client, opener):
        url, _ = await opened_link(client, opener)
        first, second = await open_page(chromium, url), await open_page(chromium, url)
        async with first.expect_navigation():
            await first.get_by_role("button", name="Approve").click()
        async with second.expect_navigation():
            await second.get_by_role("button", name="Approve").click()
        assert "Status: executed" in await first.content()
        assert "Status: executed" not in await second.content()
        assert await pool_updates(client) == 1


async def test_decline_in_chromium_changes_nothing(http_url: str, chromium: Browser) -> None:
    async with url_only_client(http_url) as (client, opener):
        url, _ = await opened_link(client, opener)
        page = await open_page(chromium, url, "dark")
        await screenshot(page, "approval-page-dark.png")
        async with page.expect_navigation():
            await page.get_by_role("button", name="Decline").click()
        assert "Status: declined" in await page.content()
        await screenshot(page, "approval-page-done-dark.png")
        assert await card_status(client, page) == "declined"
        await page.reload()
        assert await page.get_by_role("button", name="Approve").count() == 0
        assert await pool_updates(client) == 0
