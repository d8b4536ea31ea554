"""Every answer under the page's prefix carries the page's headers (no-store, no framing, the CSP, no
``Referer``): the page itself, its refusals, and the 404 and 405 answers for whatever else is asked
there, on the stdio page server (loopback) and next to ``/mcp`` over streamable HTTP."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer

from backend_client.tls import verifying_tls
from maya_tools.channels.page import HEADERS
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.test_approval_page import SCALE, Browser, UrlOnlyClient, form_token, origin
from tests.maya_tools.test_transports import http_server

pytestmark = pytest.mark.anyio

Request = tuple[str, str, dict[str, Any], int]


def every_kind_of_request(url: str, token: str) -> list[Request]:
    """(method, url, httpx2 arguments, the status expected): everything a browser or a prober may ask
    under the prefix while the link is valid, the last one spending it."""
    root = origin(url)
    card = url.rsplit("/", 1)[0]
    same = {"Origin": root, "Sec-Fetch-Site": "same-origin"}
    return [
        ("GET", url, {}, 200),
        ("HEAD", url, {}, 200),
        ("GET", url + "?via=elsewhere", {}, 200),
        ("GET", url[:-4] + ("aaaa" if not url.endswith("aaaa") else "bbbb"), {}, 404),
        ("GET", f"{root}/approve", {}, 404),
        ("GET", f"{root}/approve?secret=x", {}, 404),
        ("GET", f"{root}/approve/", {}, 404),
        ("GET", card, {}, 404),
        ("GET", url + "/", {}, 404),
        ("GET", url + "/extra", {}, 404),
        ("PUT", url, {}, 405),
        ("DELETE", url, {}, 405),
        ("PATCH", url, {}, 405),
        ("OPTIONS", url, {}, 405),
        ("DELETE", f"{root}/approve", {}, 404),
        ("POST", url, {"data": {"decision": "approve"}, "headers": same}, 403),
        ("POST", url, {"data": {"csrf": token, "decision": "approve"}, "headers": {"Origin": "https://evil"}}, 403),
        ("POST", url, {"data": {"csrf": token, "decision": "maybe"}, "headers": same}, 400),
        ("POST", url, {"data": {"csrf": token, "decision": "decline"}, "headers": same}, 200),
        ("POST", url, {"data": {"csrf": token, "decision": "decline"}, "headers": same}, 404),
        ("GET", url, {}, 404),
    ]


async def ask_all(requests: list[Request], http: httpx2.AsyncClient) -> list[tuple[str, str, int, dict[str, str]]]:
    """Every request from ``http``, the browser the page's form token was made for (its cookie)."""
    seen = []
    for method, url, kwargs, _ in requests:
        answer = await http.request(method, url, **kwargs)
        seen.append((method, url, answer.status_code, {k: answer.headers.get(k, "") for k in HEADERS}))
    return seen


def check(requests: list[Request], seen: list[tuple[str, str, int, dict[str, str]]]) -> None:
    assert [(m, u, status) for m, u, status, _ in seen] == [(m, u, status) for m, u, _, status in requests]
    wrong = [(m, u, headers) for m, u, _, headers in seen if headers != HEADERS]
    assert wrong == [], "answers without the page's headers"


async def link_and_token(make_client: Callable[[Browser], UrlOnlyClient], http: httpx2.AsyncClient) -> tuple[str, str]:
    browser = Browser()
    async with make_client(browser) as client:
        result = await client.call_tool(*SCALE)
    assert result.structured_content is not None and result.structured_content["status"] == "pending"
    [url] = browser.urls
    return url, form_token((await http.get(url)).text)


async def test_every_answer_of_the_stdio_page_server_has_the_pages_headers(server: MCPServer[Any]) -> None:
    browser = Browser()
    async with (
        UrlOnlyClient(server, mode="legacy", elicitation_callback=browser) as client,  # the page lives with it
        httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as http,
    ):
        await client.call_tool(*SCALE)
        first = browser.urls[-1]
        token = form_token((await http.get(first)).text)
        server.pages._asked.clear()  # the asker's token is no longer in this process (as after a restart)
        same = {"Origin": origin(first), "Sec-Fetch-Site": "same-origin"}
        elsewhere = await http.post(first, data={"csrf": token, "decision": "approve"}, headers=same)
        await client.call_tool(*SCALE)  # asked again: a new link, held by this process
        url = browser.urls[-1]
        requests = every_kind_of_request(url, form_token((await http.get(url)).text))
        seen = await ask_all(requests, http)
    assert elsewhere.status_code == 409 and {k: elsewhere.headers.get(k, "") for k in HEADERS} == HEADERS
    check(requests, seen)


@pytest.mark.http
async def test_every_answer_under_the_prefix_over_streamable_http_has_the_pages_headers(tmp_path: Path) -> None:
    with http_server(tmp_path) as mcp_url:
        async with (
            httpx2.AsyncClient(verify=verifying_tls(), headers={"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}) as http,
            httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as page,
        ):
            url, token = await link_and_token(
                lambda browser: UrlOnlyClient(
                    streamable_http_client(mcp_url, http_client=http), mode="legacy", elicitation_callback=browser
                ),
                page,
            )
            requests = every_kind_of_request(url, token)
            seen = await ask_all(requests, page)
        async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as raw:
            mcp = await raw.post(mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    check(requests, seen)
    assert mcp.status_code == 401, "/mcp still needs a bearer"
