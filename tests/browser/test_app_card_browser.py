"""The MCP Apps card view in headless Chromium, in a host built on the ext-apps host bridge.

``host.html`` renders the view (``resources/read`` of ``ui://maya-tools/card.html``) in a sandboxed
iframe through ``AppBridge`` and answers the view's ``tools/call`` by forwarding it, through an MCP
client that declared the Apps extension, to a real ``maya-tools serve --transport streamable-http``.
Clicks on the view's buttons are real clicks. Door's operations, read back through the server's own
tools, show the change applied exactly once, or not at all.
Re-take the screenshots in docs/img (light, dark, decided, no-Apps host, a plan followed):
MAYA_UPDATE_SCREENSHOTS=1 pytest tests/browser/test_app_card_browser.py
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult
from playwright.async_api import Browser, FrameLocator, Locator, Page, Route, expect
from playwright.async_api import TimeoutError as PlaywrightTimeout

from backend_client.tls import verifying_tls
from maya_tools.channels.app_secret import APP_URI, META_KEY
from maya_tools.server import build_server
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_NODE_NAME
from tests.browser.conftest import WIDTH
from tests.browser.test_approval_page_browser import Scheme, pool_updates, screenshot
from tests.maya_tools.live import running
from tests.maya_tools.test_app_card import APPS, SCALE
from tests.maya_tools.test_plans_live import FAST, MOVE, DoorClock
from tests.maya_tools.test_transports import SERVER_LOGS

pytestmark = [pytest.mark.anyio, pytest.mark.http]

HERE = Path(__file__).resolve().parent
HOST = "http://host.test/"  # served by the test itself (page.route), never over the network
CONSOLE: list[str] = []


@asynccontextmanager
async def apps_client(http_url: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
    async with (
        # A plan's decide_card answers when the plan ends: longer than httpx's default 5 s.
        httpx2.AsyncClient(verify=verifying_tls(), headers=headers, timeout=60) as http,
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
    chromium: Browser,
    client: Client,
    scheme: Scheme = "light",
    forge: bool = False,
    page_clock: bool = False,
    failing: frozenset[str] = frozenset(),
    server_tools: bool = True,
    ready: str = "#approve",
    tool: tuple[str, dict[str, Any]] = SCALE,
) -> tuple[Page, FrameLocator, list[str]]:
    """The host's part of a change tool call: call it, read its view, render it with the result.
    With ``page_clock`` the page's timers are playwright's, for the test to run; calls of the tools
    in ``failing`` are answered with an error instead of reaching the server; without
    ``server_tools`` the host tells the view it passes no tools/call on. Waits for ``ready`` to show."""
    result = await client.call_tool(*tool)
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
        if params["name"] in failing:
            return {"isError": True, "content": [{"type": "text", "text": "the host could not reach the server"}]}
        return wire(await client.call_tool(params["name"], params.get("arguments") or {}))

    context = await chromium.new_context(viewport={"width": WIDTH, "height": 640}, color_scheme=scheme)
    page = await context.new_page()
    CONSOLE.clear()  # what the host page and the view print, for a failing test to show
    page.on("console", lambda message: CONSOLE.append(f"{message.type}: {message.text[:300]}"))
    page.on("pageerror", lambda error: CONSOLE.append(f"uncaught: {error}"))
    await page.route(f"{HOST}**", serve_host)
    await page.expose_function("hostCallTool", call_tool)
    if page_clock:
        await page.clock.install()
    await page.goto(HOST + "host.html")
    await page.evaluate(
        "(args) => window.startHost(args)",
        {"html": html, "toolInput": tool[1], "toolResult": shown, "theme": scheme, "serverTools": server_tools},
    )
    view = page.frame_locator("iframe")
    await view.locator(ready).wait_for()
    return page, view, calls


async def shot(page: Page, name: str) -> None:
    """Size the window to the host page first, so the screenshot does not resize it under the view."""
    height = await page.evaluate("document.documentElement.scrollHeight")
    await page.set_viewport_size({"width": WIDTH, "height": height})
    await screenshot(page, name)


async def outcome(view: FrameLocator, calls: list[str], http_url: str | None = None) -> tuple[bool, str]:
    """Wait for the view to settle; whether it shows success, and what it says. If it never settles,
    fail with what the view shows, the tools the host forwarded, and the server's log."""
    settled = view.locator("#outcome.ok, #outcome.bad")
    try:
        await settled.wait_for()
    except PlaywrightTimeout:
        shown = await view.locator("body").inner_text(timeout=5_000)
        log = SERVER_LOGS[http_url].read_text()[-4_000:] if http_url in SERVER_LOGS else "(in-process server)"
        console = "\n  ".join(CONSOLE[-40:])  # the bridges' debug lines trace every message between host and view
        raise AssertionError(
            f"the view never settled.\nview: {shown}\nforwarded: {calls}\nconsole:\n  {console}\nserver log: {log}"
        ) from None
    assert await view.locator("#approve").is_disabled() and await view.locator("#decline").is_disabled()
    await expect(view.locator("#buttons")).to_be_hidden()
    return "ok" in (await settled.get_attribute("class") or ""), await settled.inner_text()


async def said_once(view: FrameLocator, words: str) -> None:
    """The view says ``words`` in one place only (the outcome is not repeated by the time left or elsewhere)."""
    shown = await view.locator("body").inner_text()
    times = shown.lower().count(words.lower())
    assert times == 1, f"{words!r} is said {times} times:\n{shown}"


async def test_approve_in_the_view_applies_the_change_once_and_shows_the_outcome(
    http_url: str, chromium: Browser
) -> None:
    async with apps_client(http_url) as client:
        page, view, calls = await show_card(chromium, client)
        await shot(page, "app-card-light.png")
        assert await pool_updates(client) == 0
        await view.get_by_role("button", name="Approve").click()
        ok, said = await outcome(view, calls, http_url)
        assert ok and "Door accepted" in said, said
        await said_once(view, "accepted")
        # Then it follows Door's operation (the server's backend runs 100× real time) until it settles.
        await expect(view.locator("#progress")).to_have_attribute("data-state", "succeeded", timeout=30_000)
        await expect(view.locator("#progress")).to_have_text("Updating pool workers: done (4/4 workers Running)")
        await expect(view.locator("#progress-bar")).to_be_hidden()
        await shot(page, "app-card-decided.png")
        assert await pool_updates(client) == 1
        assert calls[0] == "decide_card" and set(calls[1:]) == {"get_cluster_operations"}, calls


async def test_decline_in_the_view_changes_nothing(http_url: str, chromium: Browser) -> None:
    async with apps_client(http_url) as client:
        page, view, calls = await show_card(chromium, client, "dark")
        await shot(page, "app-card-dark.png")
        await view.get_by_role("button", name="Decline").click()
        ok, said = await outcome(view, calls, http_url)
        assert not ok and "declined" in said.lower(), said
        await said_once(view, "declined")
        assert await pool_updates(client) == 0
        assert calls == ["decide_card"]


async def test_a_forged_secret_in_the_view_changes_nothing(http_url: str, chromium: Browser) -> None:
    async with apps_client(http_url) as client:
        _, view, calls = await show_card(chromium, client, forge=True)
        await view.get_by_role("button", name="Approve").click()
        ok, said = await outcome(view, calls, http_url)
        assert not ok and "executed" not in said.lower(), said
        assert await pool_updates(client) == 0
        assert calls == ["decide_card"], "the forged secret did reach the server, and was refused"


async def test_the_view_lists_a_plan_s_steps_and_follows_them_until_the_plan_ends(
    tmp_path: Path, chromium: Browser
) -> None:
    """A real serve before a real reference backend whose clock the test holds: the new workers stay
    Pending, so the view shows the plan at its wait; once the clock moves, the plan ends, and the
    view says so once. Door sees the add and the delete once each."""
    with running(tmp_path, **FAST) as live, DoorClock(live) as clock:
        async with apps_client(live.url) as client:
            page, view, calls = await show_card(chromium, client, tool=MOVE)
            steps = view.locator("#steps tr")
            await expect(steps).to_have_count(3)
            await expect(steps.nth(0)).to_contain_text("Add pool workers-c5-2xlarge")
            await expect(steps.nth(2)).to_have_attribute("data-status", "pending")
            await expect(view.locator("#peak")).to_contain_text("At the peak (both pools): ")
            await expect(view.locator("#request")).to_contain_text("3. DELETE /v1/public/clusters/")
            await view.get_by_role("button", name="Approve").click()
            await expect(steps.nth(1)).to_have_attribute("data-status", "waiting", timeout=30_000)
            await expect(steps.nth(0)).to_have_attribute("data-status", "done")
            await expect(steps.nth(0).locator("td").nth(2)).to_have_text(re.compile(r"^[0-9a-f-]{36}$"))
            await expect(view.locator("#progress")).to_have_text(re.compile(r"^Step 2 of 3: .+: waiting$"))
            await expect(view.locator("#outcome")).to_be_hidden()
            await expect(view.locator("#buttons")).to_be_hidden()
            await expect(view.locator("#time")).to_be_hidden()
            await shot(page, "app-card-plan.png")
            clock.start()  # the new workers come up: the plan goes on to remove the old pool
            ok, said = await outcome(view, calls, live.url)
            assert ok and said.startswith("Approved once; the plan ran. Every step is done."), said
            await said_once(view, "every step is done")
            for n in range(3):
                await expect(steps.nth(n)).to_have_attribute("data-status", "done")
            await expect(view.locator("#progress-box")).to_be_hidden()
        assert (live.changes("pool.create"), live.changes("pool.delete")) == (1, 1)
        assert calls.count("decide_card") == 1 and set(calls) == {"decide_card", "get_card"}, calls


@pytest.fixture
def door_clock() -> ManualClock:
    """Door's clock, moved only by the test; it starts now, so the card's time left reads as in life."""
    return ManualClock(start=datetime.now(UTC))


@asynccontextmanager
async def in_process_client(
    tmp_path: Path, door_clock: ManualClock, apps: bool = True, mode: Literal["legacy", "auto"] = "auto"
) -> AsyncIterator[Client]:
    """A client of the server in this process (an Apps client unless ``apps`` is false), on an embedded
    backend whose clock the test drives."""
    settings = Settings(card_store=str(tmp_path / "cards.sqlite3"), door_token=DEMO_ADMIN_TOKEN, approver="tester")
    server = build_server(settings, backend=ReferenceBackend(clock=door_clock, seed="demo"))
    async with Client(server, mode=mode, extensions=[APPS] if apps else []) as client:
        yield client


async def approved_and_following(chromium: Browser, client: Client) -> tuple[Page, FrameLocator, Locator]:
    page, view, _ = await show_card(chromium, client, page_clock=True)
    await view.get_by_role("button", name="Approve").click()
    step = view.locator("#progress")
    await expect(step).to_have_attribute("data-state", "running")
    await expect(step).to_have_text("Updating pool workers: in progress (2/4 workers Running)")
    await expect(view.locator("#progress-bar")).to_be_visible()
    return page, view, step


async def reads(step: Locator) -> int:
    """How many times the view has read Door's operations (it counts them as it starts each read)."""
    return int(await step.get_attribute("data-reads") or 0)


async def test_the_view_follows_door_s_operation_step_by_step_until_it_settles_then_stops_reading(
    tmp_path: Path, door_clock: ManualClock, chromium: Browser
) -> None:
    async with in_process_client(tmp_path, door_clock) as client:
        page, view, step = await approved_and_following(chromium, client)
        door_clock.advance(110)  # the new workers are provisioned, not yet Ready
        await page.clock.run_for(2_000)
        await expect(step).to_have_text("Updating pool workers: in progress (2/4 workers Running)")
        door_clock.advance(30)
        await page.clock.run_for(2_000)
        await expect(step).to_have_attribute("data-state", "succeeded")
        await expect(step).to_have_text("Updating pool workers: done (4/4 workers Running)")
        await expect(view.locator("#progress-bar")).to_be_hidden()
        settled = await reads(step)
        await page.clock.run_for(20 * 60_000)
        assert await reads(step) == settled, "a settled operation is not read again"


async def test_the_view_stops_reading_when_the_host_tears_it_down(
    tmp_path: Path, door_clock: ManualClock, chromium: Browser
) -> None:
    async with in_process_client(tmp_path, door_clock) as client:
        page, _, step = await approved_and_following(chromium, client)
        await page.clock.run_for(2_000)
        await expect(step).to_have_attribute("data-reads", "2")  # still following while shown
        await page.evaluate("window.teardown()")
        await page.clock.run_for(20 * 60_000)
        assert await reads(step) == 2


async def test_the_view_stops_following_after_fifteen_minutes(
    tmp_path: Path, door_clock: ManualClock, chromium: Browser
) -> None:
    """Door's operation never ends here (its clock stands still): the view gives up, and says so."""
    async with in_process_client(tmp_path, door_clock) as client:
        page, _, step = await approved_and_following(chromium, client)
        await page.clock.fast_forward(15 * 60_000)
        await expect(step).to_have_text(
            "Still running after 15 minutes; stopped following. Follow it with get_cluster_operations."
        )
        stopped = await reads(step)
        await page.clock.run_for(20 * 60_000)
        assert await reads(step) == stopped


async def test_the_view_gives_up_after_three_failed_reads_and_says_so(
    tmp_path: Path, door_clock: ManualClock, chromium: Browser
) -> None:
    async with in_process_client(tmp_path, door_clock) as client:
        page, view, calls = await show_card(
            chromium, client, page_clock=True, failing=frozenset({"get_cluster_operations"})
        )
        await view.get_by_role("button", name="Approve").click()
        ok, said = await outcome(view, calls)
        assert ok and "Door accepted" in said, "the approval stands; only following it failed"
        step = view.locator("#progress")
        for tries in (1, 2):
            await expect(step).to_have_text(f"Could not read Door's progress ({tries} of 3 tries); trying again.")
            await page.clock.run_for(2_000)
        await expect(step).to_have_text("Could not read Door's progress; follow it with get_cluster_operations.")
        await page.clock.run_for(20 * 60_000)
        assert await step.get_attribute("data-reads") == "3"


async def test_the_title_is_larger_than_the_section_headings(
    tmp_path: Path, door_clock: ManualClock, chromium: Browser
) -> None:
    async with in_process_client(tmp_path, door_clock) as client:
        _, view, _ = await show_card(chromium, client)
        size = "(e) => parseFloat(getComputedStyle(e).fontSize)"
        title = await view.locator("#card h1").evaluate(size)
        headings = await view.locator("#card h2").evaluate_all(f"(all) => all.map({size})")
        assert len(headings) >= 3 and all(title > heading for heading in headings), (title, headings)


async def test_the_countdown_stops_once_the_card_is_decided(
    tmp_path: Path, door_clock: ManualClock, chromium: Browser
) -> None:
    async with in_process_client(tmp_path, door_clock) as client:
        page, view, calls = await show_card(chromium, client, page_clock=True)
        time = view.locator("#time")
        before = await time.inner_text()
        assert before.startswith("Expires in "), before
        await page.clock.run_for(2_000)
        await expect(time).not_to_have_text(before)  # it counts down while the card waits
        await view.get_by_role("button", name="Decline").click()
        await outcome(view, calls)
        await expect(time).to_be_hidden()
        decided = await time.text_content()
        await page.clock.run_for(5_000)
        assert await time.text_content() == decided


async def test_an_expired_card_says_so_once(tmp_path: Path, door_clock: ManualClock, chromium: Browser) -> None:
    async with in_process_client(tmp_path, door_clock) as client:
        page, view, calls = await show_card(chromium, client, page_clock=True)
        await page.clock.fast_forward(11 * 60_000)  # past the card's 10 minutes
        ok, said = await outcome(view, calls)
        assert not ok and said.startswith("Expired: nothing was changed"), said
        await said_once(view, "expired")
        assert calls == []


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_that_declared_no_apps_gets_a_view_that_says_why_it_cannot_approve(
    tmp_path: Path, door_clock: ManualClock, chromium: Browser, mode: Literal["legacy", "auto"]
) -> None:
    """The host renders the view although its MCP client did not declare the Apps extension to the
    server (VS Code, when we last read): the server sent no secret, so the view says why it cannot
    approve and what to do instead, and shows no buttons."""
    async with in_process_client(tmp_path, door_clock, apps=False, mode=mode) as client:
        page, view, calls = await show_card(chromium, client, ready="#cannot")
        cannot = view.locator("#cannot")
        await expect(cannot).to_have_attribute("data-reason", "no-secret")
        await expect(cannot).to_contain_text("did not declare MCP Apps support")
        await expect(cannot).to_contain_text("Approve or decline it where your client asks you")
        await expect(view.locator("#buttons")).to_be_hidden()
        await expect(view.locator("#time")).to_have_text(re.compile(r"^Expires in \d+:\d\d$"))
        if mode == "auto":
            await shot(page, "app-card-no-apps.png")
        assert calls == [] and await pool_updates(client) == 0


async def test_a_host_that_passes_no_tool_calls_gets_a_view_that_says_why_it_cannot_approve(
    tmp_path: Path, door_clock: ManualClock, chromium: Browser
) -> None:
    async with in_process_client(tmp_path, door_clock) as client:
        _, view, calls = await show_card(chromium, client, server_tools=False, ready="#cannot")
        cannot = view.locator("#cannot")
        await expect(cannot).to_have_attribute("data-reason", "no-server-tools")
        await expect(cannot).to_contain_text("does not let its views call the server's tools")
        await expect(view.locator("#buttons")).to_be_hidden()
        assert calls == [] and await pool_updates(client) == 0


async def test_the_view_says_each_warning_whole_with_its_rule_and_a_node_change_in_words(
    http_url: str, chromium: Browser
) -> None:
    """Issue 27: the card view writes what the text card writes, no JSON object in the changes."""
    replace = ("replace_node", {"cluster": "payments-prod", "node_name": DEMO_NODE_NAME})
    async with apps_client(http_url) as client:
        await client.call_tool("list_nodes", {"cluster": "payments-prod", "wait_for_fresh": True})
        page, view, _ = await show_card(chromium, client, tool=replace)
        result = await client.call_tool(*replace)
        card = (result.structured_content or {})["card"]
        warnings = [w["message"] + (f" [{w['rule']}]" if w.get("rule") else "") for w in card["warnings"]]
        assert "[R-RNODE-02]" in " ".join(warnings) and "[R-AUTH-03]" in " ".join(warnings)
        await expect(view.locator("#warnings li")).to_have_text(warnings)
        cells = view.locator("#diff tr").first.locator("td")
        await expect(cells).to_have_text(
            [f"node {DEMO_NODE_NAME}", "Running", "drained and deleted; Door adds a replacement"]
        )
        assert "{" not in await view.locator("#diff").inner_text()
        await page.context.close()
