"""No secret at rest through a real ``maya-tools serve --auth oauth`` (issue 26, point 6): the flows of
``tests/maya_tools/auth/test_at_rest.py`` against a real server process and a real
``maya-tools reference-backend``, then the server's SQLite file searched byte by byte for every
secret the browsers and the MCP client handled. (What only the server sees, the PKCE verifier and
the ID token, the in-process test catches at the sign-in's own HTTP client.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client.extension import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp_types import ElicitRequestParams, ElicitRequestURLParams, ElicitResult

from maya_tools.channels.app_secret import META_KEY
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.auth.test_at_rest import Handled, found_in
from tests.maya_tools.auth.test_serve_oauth import Memory, World
from tests.maya_tools.channels.live import LiveBrowser, csrf_of, signed_in_client
from tests.maya_tools.channels.test_connect_door import UrlOnly
from tests.maya_tools.conftest import Person
from tests.maya_tools.test_plans_owner_live import site, world  # noqa: F401 (a real serve per test)
from tests.oidc import ADMIN

# ruff: noqa: F811 (``world`` is test_plans_owner_live's fixture, imported by name)

pytestmark = [pytest.mark.anyio, pytest.mark.http]

MODES = ["legacy", "modern"]
SCALE = ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3})
APPS = advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})


def watched(world: World, handled: Handled) -> LiveBrowser:
    """A browser whose every answer (its cookies, its redirects' codes and states) ``handled`` reads."""
    browser = LiveBrowser(world, ADMIN)

    async def received(response: httpx2.Response) -> None:
        handled.from_url(str(response.url))
        handled.from_headers(list(response.headers.multi_items()))

    browser.http.event_hooks["response"].append(received)
    return browser


def store_text(store: Path) -> str:
    files = sorted(store.parent.glob(store.name + "*"))
    assert files, store
    return "\n".join(path.read_bytes().decode("latin-1") for path in files)


class SignedOutOpener:
    def __init__(self, world: World, handled: Handled) -> None:
        self.world, self.handled = world, handled
        self.done: list[httpx2.Response] = []

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        assert isinstance(params, ElicitRequestURLParams)
        path = params.url.removeprefix(self.world.public_url)
        self.handled.add("approval link secret", path.split("/")[3].split("?")[0])
        browser = watched(self.world, self.handled)
        try:
            first = await browser.get(path)
            assert first.status_code == 303 and "/auth/login" in first.headers["location"], first.text[:300]
            assert (await browser.get(first.headers["location"])).status_code == 303
            self.handled.texts.append(store_text(self.world.card_store))  # a sign-in is pending
            page = await browser.visit(path)
            self.done.append(await browser.post(path, {"csrf": csrf_of(page), "decision": "approve"}))
        finally:
            await browser.aclose()
        return ElicitResult(action="accept")


@pytest.mark.parametrize("mode", MODES)
async def test_a_real_serve_keeps_no_secret_in_its_sqlite_file(world: World, mode: str) -> None:
    handled = Handled()
    handled.add("Door token", DEMO_ADMIN_TOKEN)
    browser = watched(world, handled)
    try:
        connected = await browser.connect(DEMO_ADMIN_TOKEN)
        handled.add("form token", csrf_of(connected))
    finally:
        await browser.aclose()
    handled.texts.append(store_text(world.card_store))

    memory, opener = Memory(), SignedOutOpener(world, handled)
    async with signed_in_client(world, ADMIN, mode, memory, client_class=UrlOnly, elicitation_callback=opener) as c:
        asked = await c.call_tool(*SCALE)
    [approved] = opener.done
    assert approved.status_code == 200 and "executed" in approved.text, approved.text[:400]
    assert asked.structured_content is not None and asked.structured_content["status"] == "executed", asked
    handled.texts.append(store_text(world.card_store))

    world.admin("POST", "/_reference/clock/advance", json={"seconds": 600})  # the first change is done
    async with signed_in_client(
        world, ADMIN, mode, memory, extensions=[APPS], elicitation_callback=Person("accept")
    ) as apps:
        shown = await apps.call_tool("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 4})
        assert shown.meta is not None and META_KEY in shown.meta, shown
        approval = shown.meta[META_KEY]
        handled.add("app secret", approval["secret"])
        decided = await apps.call_tool(
            "decide_card", {"card_id": approval["cardId"], "secret": approval["secret"], "decision": "approve"}
        )
    assert decided.structured_content is not None and decided.structured_content["status"] == "executed", decided
    assert memory.tokens is not None
    handled.add("access_token", memory.tokens.access_token)
    handled.add("refresh_token", memory.tokens.refresh_token)
    handled.texts.append(store_text(world.card_store))

    kinds = {"approval link secret", "app secret", "Door token", "code", "state", "nonce", "access_token"}
    assert kinds | {"form token", "cookie maya-login", "cookie maya-session"} <= set(handled.kinds), handled.kinds
    assert approval["cardId"] in handled.texts[-1], "the search reads the store's rows"
    assert found_in(handled) == []
