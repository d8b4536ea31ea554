"""A plan approved on the approval page, through a real `maya-tools serve` and a real
`maya-tools reference-backend` whose manual clock the test holds (the new workers stay Pending) and
then moves: the page answers once the approval is recorded, with the steps, and its progress view
reloads itself (no script) until the plan ends. That view decides nothing and spends nothing."""

from __future__ import annotations

import re
from pathlib import Path

import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

from backend_client.tls import verifying_tls
from maya_tools.channels.page import HEADERS
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.conftest import MODES
from tests.maya_tools.live import running, wait_until
from tests.maya_tools.test_approval_page import Browser, UrlOnlyClient, origin
from tests.maya_tools.test_plans_live import FAST, MOVE, DoorClock, plan_card, step_status

pytestmark = [pytest.mark.anyio, pytest.mark.http]

REFRESH = re.compile(r'<meta http-equiv="refresh" content="5; url=(/approve/[^"]+/progress)">')


@pytest.mark.parametrize("mode", MODES)
async def test_a_plan_approved_on_the_page_shows_its_steps_live_until_it_ends(tmp_path: Path, mode: str) -> None:
    headers = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
    browser = Browser("approve")
    with running(tmp_path, **FAST) as live, DoorClock(live) as clock:
        async with (
            httpx2.AsyncClient(verify=verifying_tls(), headers=headers, timeout=60) as http,
            UrlOnlyClient(
                streamable_http_client(live.url, http_client=http), mode=mode, elicitation_callback=browser
            ) as client,
        ):
            result = await client.call_tool(*MOVE)
        data = result.structured_content
        assert data is not None and data["status"] == "executing", result.content
        assert "the plan is running" in data["message"] and f"follow={data['card']['id']}" in data["message"]
        [url] = browser.urls
        [answered] = browser.pages
        assert answered.status_code == 200 and "Status: executing" in answered.text, answered.text
        found = REFRESH.search(answered.text)
        assert found is not None, answered.text
        progress = origin(url) + found.group(1)
        assert progress == url + "/progress"

        async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as page:
            wait_until(lambda: step_status(live, 2) == "waiting", "the wait", timeout=60)
            waiting = await page.get(progress)
            assert waiting.status_code == 200 and REFRESH.search(waiting.text), waiting.text
            assert "step 2 of 3 is waiting" in waiting.text and 'class="step done"' in waiting.text
            assert "<script" not in waiting.text and 'method="post"' not in waiting.text
            assert {k: waiting.headers.get(k, "") for k in HEADERS} == HEADERS
            # Neither a wrong secret nor a POST reaches the plan; the view spends and decides nothing.
            forged = await page.get(url[:-4] + ("aaaa" if not url.endswith("aaaa") else "bbbb") + "/progress")
            posted = await page.post(progress, data={"decision": "decline"})
            assert (forged.status_code, posted.status_code) == (404, 405)
            assert "not shown here" in forged.text
            clock.start()  # the new workers come up; the plan removes the old pool and ends
            wait_until(lambda: plan_card(live.card_store)["status"] != "executing", "the plan to end", timeout=60)
            ended = await page.get(progress)
        assert ended.status_code == 200 and "Status: executed" in ended.text, ended.text
        assert REFRESH.search(ended.text) is None and "Every step is done" in ended.text
        assert ended.text.count('class="step done"') == 3
        assert (live.changes("pool.create"), live.changes("pool.delete")) == (1, 1)
