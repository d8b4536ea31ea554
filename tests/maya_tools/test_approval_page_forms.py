"""The approval page's form token is bound to the browser the page was shown in, not to the link
(issue 26, point 12): without OAuth, to the ``maya-page`` cookie the page's GET set, under this
process's own key. Holding the link is not enough to post the form from another browser, and the
old token (an HMAC of the link's secret under a public constant, computable from the link) is refused.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import httpx2
import pytest
from mcp.server.mcpserver import MCPServer

from backend_client.tls import verifying_tls
from maya_tools.channels.page import PAGE_COOKIE
from tests.maya_tools.conftest import operations
from tests.maya_tools.test_approval_page import Browser, UrlOnlyClient, form_token, opened_link, origin, secret_of

pytestmark = pytest.mark.anyio


def old_token(secret: str) -> str:
    """The form token before issue 26: anyone holding the link could compute it."""
    return hmac.new(secret.encode(), b"maya-tools approval form", hashlib.sha256).hexdigest()


async def test_the_link_alone_cannot_post_the_form_from_another_browser(
    server: MCPServer[Any], door: httpx2.AsyncClient
) -> None:
    browser = Browser()
    async with UrlOnlyClient(server, elicitation_callback=browser) as client:
        url, _ = await opened_link(client, browser)
        same = {"Origin": origin(url), "Sec-Fetch-Site": "same-origin"}
        async with (
            httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as shown,
            httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as other,
        ):
            page = await shown.get(url)
            token = form_token(page.text)
            cookie = [c for c in page.headers.get_list("set-cookie") if c.startswith(PAGE_COOKIE + "=")]
            # Another browser with the link and the first browser's form token, but not its cookie.
            no_cookie = await other.post(url, data={"csrf": token, "decision": "approve"}, headers=same)
            # Another browser that opened the page itself: its own cookie, the first browser's token.
            await other.get(url)
            own_cookie = await other.post(url, data={"csrf": token, "decision": "approve"}, headers=same)
            # The page's own browser posting the token anyone holding the link could compute.
            computed = await shown.post(
                url, data={"csrf": old_token(secret_of(url)), "decision": "approve"}, headers=same
            )
            refused_ops = await operations(door)
            approved = await shown.post(url, data={"csrf": token, "decision": "approve"}, headers=same)

    assert len(cookie) == 1 and "httponly" in cookie[0].lower() and "samesite=strict" in cookie[0].lower()
    assert f"Path=/approve/{url.split('/')[-2]};" in cookie[0], cookie
    assert (no_cookie.status_code, own_cookie.status_code, computed.status_code) == (403, 403, 403)
    assert all("executed" not in r.text for r in (no_cookie, own_cookie, computed))
    assert refused_ops == [], "no refused post reached Door"
    assert approved.status_code == 200 and "Status: executed" in approved.text, "the link stayed usable"
    assert [op["kind"] for op in await operations(door)] == ["pool.update"]
