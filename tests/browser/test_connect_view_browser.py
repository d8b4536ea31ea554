"""Connecting Door in one step on an Apps-only host (Claude, ChatGPT: MCP Apps, no URL elicitation), in
headless Chromium and the project's Apps test host (``host.html``, the ext-apps host bridge).

The server is the in-process OAuth wiring of ``tests/maya_tools/channels/test_connect_door.py``: the
person is verified for real by the test provider and connects on the real ``/connect`` page. The change
tool's result has no card, only the person's connect link in ``_meta``; the card view shows what is
needed, opens the link through the host (``ui/open-link``), and after the person connected, its Try
again calls the tool through the host and shows the card, ready to approve.
Re-take the screenshot: MAYA_UPDATE_SCREENSHOTS=1 pytest tests/browser/test_connect_view_browser.py
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from playwright.async_api import Browser

from maya_tools.channels.app_secret import APP_URI
from maya_tools.channels.connect import CONNECT_META
from reference_backend.clock import ManualClock
from tests.browser.conftest import WIDTH
from tests.browser.test_app_card_browser import CONSOLE, HOST, serve_host, shot, wire
from tests.maya_tools.channels.conftest import http, provider, tokens  # noqa: F401 (fixtures)
from tests.maya_tools.channels.test_connect_door import (  # noqa: F401 (fixtures)
    SCALE,
    OAuthWiring,
    link_wait_seconds,
    wiring,
)
from tests.maya_tools.test_app_card import APPS
from tests.oidc import ADMIN

pytestmark = pytest.mark.anyio


async def test_an_apps_only_host_connects_door_from_the_view_and_the_retry_shows_the_card(
    chromium: Browser,
    wiring: OAuthWiring,  # noqa: F811
    tokens: dict[str, str],  # noqa: F811
    clock: ManualClock,
) -> None:
    async with wiring.signed_in(ADMIN), Client(wiring.server, extensions=[APPS]) as client:
        result = await client.call_tool(*SCALE)
        link = (result.meta or {}).get(CONNECT_META, {}).get("url")
        assert result.is_error and link is not None, result
        [content] = (await client.read_resource(APP_URI)).contents
        html = getattr(content, "text", "")

        calls: list[str] = []
        opened: list[str] = []

        async def call_tool(params: dict[str, Any]) -> dict[str, Any]:
            calls.append(params["name"])
            async with wiring.signed_in(ADMIN):  # playwright's callback task does not inherit the test's
                return wire(await client.call_tool(params["name"], params.get("arguments") or {}))

        async def open_link(params: dict[str, Any]) -> dict[str, Any]:
            opened.append(params["url"])
            return {}

        context = await chromium.new_context(viewport={"width": WIDTH, "height": 640}, color_scheme="light")
        page = await context.new_page()
        CONSOLE.clear()
        page.on("console", lambda message: CONSOLE.append(f"{message.type}: {message.text[:300]}"))
        await page.route(f"{HOST}**", serve_host)
        await page.expose_function("hostCallTool", call_tool)
        await page.expose_function("hostOpenLink", open_link)
        await page.clock.install(time=clock.now())  # the view counts down to the card's expiry in Door's time
        await page.goto(HOST + "host.html")
        await page.evaluate(
            "(args) => window.startHost(args)",
            {"html": html, "toolInput": SCALE[1], "toolResult": wire(result), "theme": "light", "serverTools": True},
        )
        view = page.frame_locator("iframe")
        await view.locator("#connect-open").wait_for()
        said = await view.locator("#connect").inner_text()
        assert "Connect your Door account" in said and "Nothing was sent to Door" in said
        assert link not in said, "the link is opened, not shown"

        await view.locator("#connect-open").click()
        await view.locator("#connect-said.ok").wait_for()
        assert opened == [link], "the view opened the person's own link through the host's ui/open-link"
        await shot(page, "app-connect.png")

        early = view.locator("#connect-retry")
        await early.click()  # before connecting: the view says so and stays
        await view.locator("#connect-said.bad").wait_for()
        assert "Not connected yet" in await view.locator("#connect-said").inner_text()

        connected = await wiring.connect_in_browser(ADMIN, link, tokens["admin"])
        assert connected.status_code == 200 and "Your Door token is connected" in connected.text
        await view.locator("#connect-retry").click()
        await view.locator("#approve").wait_for()
        # The card, with the view's one-time secret: Approve is live (approving through OAuth is
        # tests/maya_tools/channels/test_channels_served.py's; this wiring stands in for serve's lookup only).
        assert await view.locator("#connect").is_hidden() and await view.locator("#approve").is_enabled()
        assert "count" in await view.locator("#diff").inner_text()
        await context.close()
    assert calls == [SCALE[0], SCALE[0]], calls
