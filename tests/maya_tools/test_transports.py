"""The server as a real process: over stdio (as an IDE launches it) and over streamable HTTP."""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from backend_client.tls import verifying_tls
from confirmation_cards import token_fingerprint
from maya_tools.server import build_server
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN, DEMO_OUTSIDER_TOKEN
from tests.launch import launch
from tests.maya_tools.conftest import MODES, Person
from tests.maya_tools.live import NO_LINK_WAIT

pytestmark = pytest.mark.anyio

SCALE = ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3})


def server_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DOOR_API_URL", "DOOR_TOKEN"}}
    env.update({"MAYA_CARD_STORE": str(tmp_path / "cards.sqlite3"), "MAYA_REFERENCE_TIME_SCALE": "100", **NO_LINK_WAIT})
    env.update(extra)
    return env


@pytest.mark.parametrize("mode", MODES)
async def test_stdio_server_asks_and_executes_once(tmp_path: Path, mode: str) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "maya_tools.cli", "serve"], env=server_env(tmp_path)
    )
    person = Person("accept")
    async with Client(params, mode=mode, elicitation_callback=person) as client:
        clusters = await client.call_tool("list_clusters", {})
        assert clusters.structured_content is not None
        assert "embedded reference backend" in clusters.structured_content["backend"]
        result = await client.call_tool(*SCALE)
        again = await client.call_tool("get_cluster", {"cluster": "payments-prod"})
    assert result.structured_content is not None and result.structured_content["changed"] is True
    assert len(person.messages) == 1
    assert again.structured_content is not None
    assert [p["count"] for p in again.structured_content["node_pools"] if p["name"] == "workers"] == [3]


def read_line(process: subprocess.Popen[bytes], deadline: float) -> bytes:
    """One line of the server's stdout, or fail at the deadline instead of hanging."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
            raise AssertionError("the server did not answer in time")
    return process.stdout.readline()


def test_stdio_server_writes_only_protocol_to_stdout(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "maya_tools.cli", "serve", "--log-level", "DEBUG"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=server_env(tmp_path),
    )
    assert process.stdin is not None and process.stderr is not None
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    deadline = time.monotonic() + 60
    lines: list[bytes] = []
    try:
        process.stdin.write(json.dumps(initialize).encode() + b"\n")
        process.stdin.flush()
        lines.append(read_line(process, deadline))
        for message in (
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_clusters", "arguments": {}}},
        ):
            process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()
        lines.append(read_line(process, deadline))
        process.stdin.close()
        process.wait(timeout=30)
        rest = process.stdout.read() if process.stdout else b""
        err = process.stderr.read()
    finally:
        process.kill()
    lines += [line for line in rest.splitlines() if line.strip()]
    answers = [json.loads(line) for line in lines]
    assert all(answer["jsonrpc"] == "2.0" for answer in answers)
    assert [answer.get("id") for answer in answers if "id" in answer] == [1, 2]
    assert b"embedded reference backend" in err  # the log went to stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SERVER_LOGS: dict[str, Path] = {}
"""The stderr log of each running ``http_server``, by its URL, for a failing test to show."""


@contextmanager
def http_server(tmp_path: Path) -> Iterator[str]:
    """A real `maya-tools serve --transport streamable-http` process (forked from the worker's preloaded
    fork server, ``tests.launch``); its log goes to a file, never to a pipe nobody reads (a log past the
    pipe's 64 KB would block the server on its next line)."""
    port = free_port()
    log_path = tmp_path / "server.log"
    process = launch(["serve", "--transport", "streamable-http", "--port", str(port)], server_env(tmp_path), log_path)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(log_path.read_text() or "server did not start") from None
                time.sleep(0.05)  # waiting for a process to bind, not for state
        SERVER_LOGS[url] = log_path
        yield url
    finally:
        SERVER_LOGS.pop(url, None)
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def http_url(tmp_path: Path) -> Iterator[str]:
    with http_server(tmp_path) as url:
        yield url


async def test_http_request_without_a_bearer_token_is_refused(http_url: str) -> None:
    async with httpx2.AsyncClient(verify=verifying_tls()) as raw:
        response = await raw.post(http_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert response.status_code == 401
    assert "Bearer" in response.headers["www-authenticate"]


@pytest.mark.parametrize("mode", MODES)
async def test_http_calls_door_with_each_callers_own_token(http_url: str, mode: str) -> None:
    """The member's own bearer meets Door's 403 (R-AUTH-03), then is refused up front; the admin's own
    bearer makes the change, and the audit names the admin by token fingerprint and client, never the token."""
    headers = {"Authorization": f"Bearer {DEMO_MEMBER_TOKEN}"}
    async with (
        httpx2.AsyncClient(verify=verifying_tls(), headers=headers) as http,
        Client(
            streamable_http_client(http_url, http_client=http), mode=mode, elicitation_callback=Person("accept")
        ) as client,
    ):
        failed = await client.call_tool(*SCALE)
        refused = await client.call_tool(*SCALE)
    assert failed.structured_content is not None and failed.structured_content["status"] == "failed"
    assert "R-AUTH-03" in failed.structured_content["message"]
    assert refused.is_error and "R-AUTH-03" in refused.content[0].text  # type: ignore[union-attr]

    person = Person("accept")
    headers = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
    async with (
        httpx2.AsyncClient(verify=verifying_tls(), headers=headers) as http,
        Client(streamable_http_client(http_url, http_client=http), mode=mode, elicitation_callback=person) as client,
    ):
        done = await client.call_tool(*SCALE)
        assert done.structured_content is not None and done.structured_content["changed"] is True
        shown = await client.call_tool("get_card", {"card_id": done.structured_content["card"]["id"]})
    assert len(person.messages) == 1
    assert shown.structured_content is not None
    (approved,) = [e for e in shown.structured_content["audit"] if e["event"] == "approved"]
    assert approved["by"].startswith(token_fingerprint(DEMO_ADMIN_TOKEN) + " via mcp ")
    assert DEMO_ADMIN_TOKEN not in json.dumps(shown.structured_content)


@pytest.mark.parametrize("mode", MODES)
async def test_an_http_server_never_falls_back_to_door_token_for_a_request_without_a_bearer(
    backend: ReferenceBackend, mode: str
) -> None:
    """DOOR_TOKEN serves stdio only: over HTTP a request that reached a tool without a bearer calls no Door."""
    settings = Settings(card_store=":memory:", door_token=DEMO_ADMIN_TOKEN)
    server = build_server(settings, transport="streamable-http", backend=backend)
    async with Client(server, mode=mode, elicitation_callback=Person("accept")) as client:  # no HTTP headers
        read = await client.call_tool("list_clusters", {})
        change = await client.call_tool(*SCALE)
    for result in (read, change):
        assert result.is_error and "no Door token" in result.content[0].text  # type: ignore[union-attr]


async def test_over_http_a_card_is_shown_only_to_the_principal_that_planned_it(http_url: str) -> None:
    """get_card for another principal's card answers exactly like an id that never existed."""

    async def call(token: str, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        async with (
            httpx2.AsyncClient(verify=verifying_tls(), headers={"Authorization": f"Bearer {token}"}) as http,
            Client(streamable_http_client(http_url, http_client=http)) as client,  # cannot elicit
        ):
            return await client.call_tool(tool, arguments)

    made = await call(DEMO_ADMIN_TOKEN, *SCALE)
    assert made.structured_content is not None and made.structured_content["status"] == "pending"
    card_id = made.structured_content["card"]["id"]

    owner = await call(DEMO_ADMIN_TOKEN, "get_card", {"card_id": card_id})
    colleague = await call(DEMO_MEMBER_TOKEN, "get_card", {"card_id": card_id})
    outsider = await call(DEMO_OUTSIDER_TOKEN, "get_card", {"card_id": card_id})
    unknown = await call(DEMO_ADMIN_TOKEN, "get_card", {"card_id": "card_" + "x" * 16})

    assert owner.structured_content is not None and owner.structured_content["card"]["id"] == card_id
    said = [
        r.content[0].text.replace(card_id, "ID").replace("card_" + "x" * 16, "ID")
        for r in (colleague, outsider, unknown)
    ]  # type: ignore[union-attr]
    assert all(r.is_error for r in (colleague, outsider, unknown)) and len(set(said)) == 1
    assert "payments-prod" not in said[0]
