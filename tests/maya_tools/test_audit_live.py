"""Real ``maya-tools serve`` processes with ``MAYA_AUDIT_LOG``: on stdio the log on stderr (stdout
stays protocol) and a log that cannot be written (said once, the change goes on); over streamable
HTTP ``/mcp/read-only`` beside ``/mcp`` through the server's own lifespan, and the log's lines equal
to ``maya-tools cards audit --json``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from backend_client.tls import verifying_tls
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_MEMBER_TOKEN
from tests.maya_tools.conftest import MODES, Person
from tests.maya_tools.test_transports import http_server, server_env

pytestmark = pytest.mark.anyio

SCALE = {"cluster": "payments-prod", "pool": "workers", "count": 3}
RELABEL = {"cluster": "payments-prod", "pool": "workers", "labels": {"team": "a"}}


def stdio(tmp_path: Path, audit_log: str) -> tuple[StdioServerParameters, Path]:
    """``serve`` on stdio with its stderr appended to a file the test reads afterwards."""
    err = tmp_path / "stderr.log"
    command = f'exec "{sys.executable}" -m maya_tools.cli serve 2>>"{err}"'
    return StdioServerParameters(
        command="/bin/sh", args=["-c", command], env=server_env(tmp_path, MAYA_AUDIT_LOG=audit_log)
    ), err


def cards_audit(tmp_path: Path) -> list[str]:
    """``maya-tools cards audit --json`` of the server's store, as an operator runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "maya_tools.cli", "cards", "audit", "--since", "2000-01-01", "--json"],
        env=server_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


async def change_and_decline(params: StdioServerParameters, mode: str) -> tuple[dict[str, object], dict[str, object]]:
    person = Person("decline")
    async with Client(params, mode=mode, elicitation_callback=person) as client:
        declined = await client.call_tool("relabel_node_pool", RELABEL)
        person.action = "accept"
        done = await client.call_tool("scale_node_pool", SCALE)
    assert done.structured_content is not None and declined.structured_content is not None
    return done.structured_content, declined.structured_content


@pytest.mark.parametrize("mode", MODES)
async def test_on_stdio_the_log_goes_to_stderr_and_equals_cards_audit(tmp_path: Path, mode: str) -> None:
    params, err = stdio(tmp_path, "-")
    done, declined = await change_and_decline(params, mode)
    assert (done["status"], declined["status"]) == ("executed", "declined")

    logged = [line for line in err.read_text().splitlines() if line.startswith('{"v":1,')]
    assert logged == cards_audit(tmp_path)
    assert [json.loads(line)["event"] for line in logged] == [
        "created", "declined", "created", "approved", "executed"
    ]  # fmt: skip
    assert DEMO_ADMIN_TOKEN not in err.read_text()


@pytest.mark.parametrize("mode", MODES)
async def test_on_stdio_a_log_that_cannot_be_written_is_said_once_and_the_changes_go_on(
    tmp_path: Path, mode: str
) -> None:
    params, err = stdio(tmp_path, "/dev/full")
    done, declined = await change_and_decline(params, mode)

    assert (done["status"], declined["status"]) == ("executed", "declined")
    said = [line for line in err.read_text().splitlines() if "cannot be written" in line]
    assert len(said) == 1, err.read_text()
    assert "The audit log '/dev/full' cannot be written (No space left on device); cards go on" in said[0]
    assert len(cards_audit(tmp_path)) == 5  # the store kept every row


@pytest.mark.parametrize("mode", MODES)
async def test_over_http_mcp_read_only_serves_the_read_tools_and_the_log_equals_cards_audit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    log = tmp_path / "audit.jsonl"
    monkeypatch.setenv("MAYA_AUDIT_LOG", str(log))
    with http_server(tmp_path) as url:

        def client(token: str, path: str, person: Person | None = None) -> tuple[httpx2.AsyncClient, Client]:
            http = httpx2.AsyncClient(verify=verifying_tls(), headers={"Authorization": f"Bearer {token}"})
            return http, Client(
                streamable_http_client(url + path, http_client=http), mode=mode, elicitation_callback=person
            )

        http, reader = client(DEMO_MEMBER_TOKEN, "/read-only")
        async with http, reader:
            tools = (await reader.list_tools()).tools
            listed = await reader.call_tool("list_clusters", {})
            with pytest.raises(MCPError) as unknown:
                await reader.call_tool("scale_node_pool", SCALE)
        http, changer = client(DEMO_ADMIN_TOKEN, "", Person("accept"))
        async with http, changer:
            done = await changer.call_tool("scale_node_pool", SCALE)
    # The server has stopped: its lifespan wrote what the log had queued.

    assert tools and all(tool.annotations and tool.annotations.read_only_hint is True for tool in tools)
    assert not listed.is_error and unknown.value.error.code == -32602
    assert done.structured_content is not None and done.structured_content["status"] == "executed"
    written = log.read_text(encoding="ascii").splitlines()
    assert written == cards_audit(tmp_path)
    assert [json.loads(line)["event"] for line in written] == ["created", "approved", "executed"]
    assert DEMO_ADMIN_TOKEN not in log.read_text() and DEMO_MEMBER_TOKEN not in log.read_text()
