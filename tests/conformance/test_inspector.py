"""The MCP Inspector's CLI (npm ``@modelcontextprotocol/inspector``, pinned in ``package.json``)
against the server over stdio and over streamable HTTP: ``--strict`` reports 0 errors for
``tools/list``, and the resources, the prompts and a read tool's call pass its validation.

The Inspector's ``--strict`` is its tool-schema portability lint, and it accepts the flag with
``--method tools/list`` only ("--strict requires --method tools/list."); for the other methods the
Inspector's client validates each result against the protocol's schemas and exits non-zero on one
that does not match. It speaks the 2025-11-25 generation (its SDK knows no later one).

Its only warnings are about nullable types written ``"type": [X, "null"]``: legal JSON Schema that
``maya_tools/tools/schemas.py`` writes on purpose to keep ``tools/list`` small (a dialect with one
``type`` per schema may not take it); any other kind of warning fails here.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conformance.suite import TOKEN, http_server, server_env, tool

pytestmark = [pytest.mark.anyio, pytest.mark.http]

SNAPSHOT = Path(__file__).resolve().parent.parent / "maya_tools" / "snapshots" / "tools.json"
SUMMARY = re.compile(r"^(\d+) errors?, (\d+) warnings? across \d+ tools?\.$", re.MULTILINE)
NULLABLE_TYPE = re.compile(r"^  Issue: `type` is an array \(\[\"\w+\",\"null\"\]\)\. ", re.MULTILINE)
ISSUE = re.compile(r"^  Issue: ", re.MULTILINE)
CALL_TIMEOUT = 120.0

Inspector = tuple[list[str], list[str]]
"""``mcp-inspector --cli`` and its options, and the target: the server on one transport."""


@pytest.fixture(params=["stdio", "http"])
def inspector(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Inspector]:
    cli = [*tool("mcp-inspector"), "--cli"]
    if request.param == "stdio":
        env = server_env(tmp_path)
        # the Inspector starts the server with a small default environment and the pairs given with -e
        kept = [
            f"{key}={env[key]}"
            for key in ("PYTHONPATH", "MAYA_CARD_STORE", "MAYA_REFERENCE_TIME_SCALE")
            if env.get(key)
        ]
        pairs = [arg for pair in kept for arg in ("-e", pair)]
        yield [*cli, *pairs], [str(Path(sys.executable).parent / "maya-tools"), "serve"]
        return
    with http_server(tmp_path) as port:
        yield [*cli, "--header", f"Authorization: Bearer {TOKEN}"], [f"http://127.0.0.1:{port}/mcp"]


async def inspect(inspector: Inspector, *method: str, home: Path) -> tuple[Any, str]:
    """``mcp-inspector --cli <method…> <target>``: its JSON output and its stderr; fails if it exits non-zero.
    Its catalog and secrets stay in ``home`` and in memory."""
    cli, target = inspector
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "NO_COLOR": "1", "MCP_INSPECTOR_SECRET_STORE": "memory"}
    with anyio.fail_after(CALL_TIMEOUT):
        done = await anyio.run_process([*cli, *method, *target], check=False, env=env)
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, f"{method}: exit {done.returncode}\n{out[-2000:]}\n{err[-3000:]}"
    return json.loads(out), err


async def test_strict_tools_list_reports_no_errors(inspector: Inspector, tmp_path: Path) -> None:
    listed, err = await inspect(inspector, "--strict", "--method", "tools/list", home=tmp_path)
    summary = SUMMARY.search(err)
    assert summary is not None, err[-3000:]
    assert summary.group(1) == "0", err[-3000:]
    assert len(ISSUE.findall(err)) == int(summary.group(2)) == len(NULLABLE_TYPE.findall(err)), err[-3000:]
    snapshot = json.loads(SNAPSHOT.read_text())
    # The snapshot is the list an MCP Apps host sees; the Inspector declares no Apps extension, so the
    # app-only tools are not listed to it (issue 19).
    assert sorted(t["name"] for t in listed["tools"]) == sorted(
        t["name"] for t in snapshot if t["name"] != "decide_card"
    )


async def test_resources_prompts_and_a_read_call_pass_the_inspector(inspector: Inspector, tmp_path: Path) -> None:
    methods = {
        "resources": ("--method", "resources/list"),
        "prompts": ("--method", "prompts/list"),
        "call": ("--method", "tools/call", "--tool-name", "list_clusters"),
    }
    results: dict[str, Any] = {}

    async def run(name: str) -> None:
        results[name], _ = await inspect(inspector, *methods[name], home=tmp_path)

    async with anyio.create_task_group() as group:
        for name in methods:
            group.start_soon(run, name)
    resources, prompts, called = results["resources"], results["prompts"], results["call"]
    assert resources["resources"] and all(r["uri"] and r["name"] for r in resources["resources"])
    assert prompts["prompts"] and all(p["name"] for p in prompts["prompts"])
    assert called.get("isError") is not True, called
    assert [c["name"] for c in called["structuredContent"]["clusters"]], called
