"""The MCP Apps card view in headless Chromium, in a host built on the ext-apps host bridge.

``host.html`` renders the view (``resources/read`` of ``ui://maya-tools/card.html``) in a sandboxed
iframe through ``AppBridge`` and answers the view's ``tools/call`` by forwarding it, through an MCP
client that declared the Apps extension, to a real ``maya-tools serve --transport streamable-http``.
Clicks on the view's buttons are real clicks. Door's operations, read back through the server's own
tools, show the change applied exactly once, or not at all.
Re-take the screenshots in docs/img: MAYA_UPDATE_SCREENSHOTS=1 pytest tests/browser
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult
from playwright.async_api import Browser, FrameLocator, Page, Route

from maya_tools.app_secret import APP_URI, META_KEY
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.browser.conftest import WIDTH
from tests.browser.test_approval_page_browser import Scheme, pool_updates, screenshot
from tests.maya_tools.test_app_card import APPS, SCALE
from tests.maya_tools.test_transports import http_server

pytestmark = [pytest.mark.anyio, pytest.mark.http]

HERE = Path(__file__).resolve().parent
HOST = "http://host.test/"  # served by the test itself (page.route), never over the network


@pytest.fixture
def http_url(tmp_path: Path) -> Iterator[str]:
    with http_server(tmp_path) as url:
        yield url


@asynccontextmanager
async def apps_client(http_url: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(http_url, http_client=http), extensions=[APPS]) as client,
    ):
        yield client


def wire(result: CallToolResult) -> dict[str, Any]:
    dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


async def serve_host(route: Route) -> None:
    name = route.request.url.removeprefix(HOST) or "host.html"
    if name not in ("host.html", "app-bridge.bundle.js"):
        await route.fulfill(status=404)
        return
    kind = "text/html" if name.endswith(".html") else "text/javascript"
    await route.fulfill(body=(HERE / name).read_bytes(), content_type=kind)


async def show_card(
    chromium: Browser, client: Client, scheme: Scheme = "light", forge: bool = False
) -> tuple[Page, FrameLocator, list[str]]:
    """The host's part of a change tool call: call it, read its view, render it with the result."""
    result = await client.call_tool(*SCALE)
    assert not result.is_error, result
    read = await client.read_resource(APP_URI)
    [content] = read.contents
    html = getattr(content, "text", "")
    shown = wire(result)
    if forge:
        secret = shown["_meta"][META_KEY]["secret"]
        shown["_meta"][META_KEY]["secret"] = ("A" if secret[0] != "A" else "B") + secret[1:]

    calls: list[str] = []

    async def call_tool(params: dict[str, Any]) -> dict[str, Any]:
        calls.append(params["name"])
        return wire(await client.call_tool(params["name"], params.get("arguments") or {}))

    context = await chromium.new_context(viewport={"width": WIDTH, "height": 640}, color_scheme=scheme)
    page = await context.new_page()
    await page.route(f"{HOST}**", serve_host)
    await page.expose_function("hostCallTool", call_tool)
    await page.goto(HOST + "host.html")
    await page.evaluate(
        "(args) => window.startHost(args)",
        {"html": html, "toolInput": SCALE[1], "toolResult": shown, "theme": scheme},
    )
    view = page.frame_locator("iframe")
    await view.get_by_role("button", name="Approve").wait_for()
    return page, view, calls


async def shot(page: Page, name: str) -> None:
    """Size the window to the host page first, so the screenshot does not resize it under the view."""
    height = await page.evaluate("document.documentElement.scrollHeight")
    await page.set_viewport_size({"width": WIDTH, "height": height})
    await screenshot(page, name)


async def outcome(view: FrameLocator) -> tuple[bool, str]:
    """Wait for the view to settle; whether it shows success, and what it says."""
    settled = view.locator("#outcome.ok, #outcome.bad")
    await settled.wait_for()
    assert await view.get_by_role("button", name="Approve").is_disabled()
    assert await view.get_by_role("button", name="Decline").is_disabled()
    return "ok" in (await settled.get_attribute("class") or ""), await settled.inner_text()


async def test_approve_in_the_view_applies_the_change_once_and_shows_the_outcome(
    http_url: str, chromium: Browser
) -> None:
    async with apps_client(http_url) as client:
        page, view, calls = await show_card(chromium, client)
        await shot(page, "app-card-light.png")
        assert await pool_updates(client) == 0
        await view.get_by_role("button", name="Approve").click()
        ok, said = await outcome(view)
        assert ok and "Door accepted" in said, said
        await shot(page, "app-card-done-light.png")
        assert await pool_updates(client) == 1
        assert calls == ["decide_card"]


async def test_decline_in_the_view_changes_nothing(http_url: str, chromium: Browser) -> None:
    async with apps_client(http_url) as client:
        page, view, calls = await show_card(chromium, client, "dark")
        await shot(page, "app-card-dark.png")
        await view.get_by_role("button", name="Decline").click()
        ok, said = await outcome(view)
        assert not ok and "declined" in said.lower(), said
        await shot(page, "app-card-done-dark.png")
        assert await pool_updates(client) == 0
        assert calls == ["decide_card"]


async def test_a_forged_secret_in_the_view_changes_nothing(http_url: str, chromium: Browser) -> None:
    async with apps_client(http_url) as client:
        _, view, calls = await show_card(chromium, client, forge=True)
        await view.get_by_role("button", name="Approve").click()
        ok, said = await outcome(view)
        assert not ok and "executed" not in said.lower(), said
        assert await pool_updates(client) == 0
        assert calls == ["decide_card"], "the forged secret did reach the server, and was refused"
