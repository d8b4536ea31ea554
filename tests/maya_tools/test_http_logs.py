"""No approval secret in any log: a real ``maya-tools serve --transport streamable-http`` whose stdout
and stderr both go to one file, a URL-only client whose person opens the link (GET) and presses
Approve (POST), then every other shape of request under the page's prefix. The file must hold the
access log of all of it, and neither the link's secret nor its card path."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from backend_client.tls import verifying_tls
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.launch import launch
from tests.maya_tools.test_app_card import APPS, decide, show
from tests.maya_tools.test_approval_page import SCALE, Browser, UrlOnlyClient, secret_of
from tests.maya_tools.test_transports import free_port, server_env

pytestmark = [pytest.mark.anyio, pytest.mark.http]


@dataclass
class Served:
    url: str
    port: int
    log: Path

    def logged(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def serving(tmp_path: Path, log_level: str) -> Iterator[Served]:
    """``serve`` over streamable HTTP at ``log_level``, its stdout and stderr in one file."""
    port = free_port()
    log = tmp_path / "server.log"
    process = launch(
        ["serve", "--transport", "streamable-http", "--port", str(port), "--log-level", log_level],
        server_env(tmp_path),
        log,
        stdout=True,
    )
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(log.read_text() if log.exists() else "server did not start") from None
                time.sleep(0.05)  # waiting for a process to bind, not for state
        yield Served(f"http://127.0.0.1:{port}/mcp", port, log)
    finally:
        process.terminate()
        process.wait(timeout=10)


def raw_request(port: int, data: bytes) -> bytes:
    """Send bytes no HTTP client would (a malformed request) and read the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize("log_level", ["INFO", "DEBUG"])
async def test_opening_and_deciding_a_link_puts_neither_its_secret_nor_its_card_path_in_any_log(
    tmp_path: Path, log_level: str
) -> None:
    browser = Browser("approve")
    with serving(tmp_path, log_level) as served:
        async with (
            httpx2.AsyncClient(verify=verifying_tls(), headers={"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}) as http,
            UrlOnlyClient(
                streamable_http_client(served.url, http_client=http), mode="legacy", elicitation_callback=browser
            ) as client,
        ):
            result = await client.call_tool(*SCALE)
        [url] = browser.urls
        [page] = browser.pages
        secret = secret_of(url)
        card_path = url.split("/approve/", 1)[1].split("/", 1)[0]
        page_root = url.removesuffix("/" + secret)
        async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as raw:
            for method, target in [
                ("GET", url),  # the spent link, again
                ("GET", f"{url}/extra"),
                ("GET", f"{url}?token={secret}"),
                ("PUT", url),
                ("DELETE", url),
                ("OPTIONS", url),
                ("HEAD", url),
                ("GET", page_root),
                ("GET", f"{served.url.removesuffix('/mcp')}/approve?secret={secret}"),
            ]:
                await raw.request(method, target)
        answer = raw_request(
            served.port, f"GET /approve/{card_path}/{secret} HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n".encode()
        )
        assert answer.startswith(b"HTTP/1.1 400")
        logged = served.logged()
    assert result.structured_content is not None and result.structured_content["status"] == "executed"
    assert page.status_code == 200 and "Status: executed" in page.text
    assert secret not in logged, "the link's secret reached the log"
    assert f"/approve/{card_path}" not in logged, "the card's page path reached the log"
    assert DEMO_ADMIN_TOKEN not in logged
    # the access log is still there, for the page (redacted) and for /mcp (as it was)
    assert '"GET /approve/… HTTP/1.1" 200' in logged and '"POST /approve/… HTTP/1.1" 200' in logged
    assert '"PUT /approve/… HTTP/1.1" 405' in logged and '"GET /approve/… HTTP/1.1" 404' in logged
    assert '"POST /mcp HTTP/1.1" 200' in logged


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_card_views_one_time_secret_is_in_no_log_even_at_debug(tmp_path: Path, mode: str) -> None:
    """The MCP Apps channel's secret travels in a result's ``_meta`` and comes back as ``decide_card``'s
    argument; at DEBUG the SSE layer logs whole frames, which must not carry it."""
    with serving(tmp_path, "DEBUG") as served:
        async with (
            httpx2.AsyncClient(verify=verifying_tls(), headers={"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}) as http,
            Client(streamable_http_client(served.url, http_client=http), mode=mode, extensions=[APPS]) as client,
        ):
            _, card_id, secret = await show(client)
            decided = await decide(client, card_id, secret)
        logged = served.logged()
    assert decided.structured_content is not None and decided.structured_content["status"] == "executed"
    assert "DEBUG mcp" in logged, "the log was at DEBUG"
    assert secret not in logged, "the view's secret reached the log"
