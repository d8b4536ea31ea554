"""The MCP conformance suite's server scenarios that apply to this server pass against a real
``maya-tools serve --transport streamable-http``; every scenario of the pinned suite is classified.

The suite (npm ``@modelcontextprotocol/conformance``, pinned in ``package.json``) speaks the
2025-11-25 generation (it knows no later one) and cannot send a header, so it reaches the server
through ``tests.conformance.proxy``, which adds the Door bearer the HTTP server requires. The
2026-07-28 generation is covered by the SDK ``Client`` tests (``tests/maya_tools/test_transports.py``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from tests.conformance.proxy import bearer_proxy
from tests.conformance.suite import TOKEN, http_server, tool

pytestmark = [pytest.mark.anyio, pytest.mark.http]

APPLICABLE = {
    "server-initialize": "the initialize handshake",
    "ping": "ping",
    "tools-list": "every tool has a name, a description and an input schema",
    "resources-list": "every resource has a uri and a name",
    "prompts-list": "every prompt has a name and a description",
    "server-sse-multiple-streams": "concurrent POST SSE streams on one session (SEP-1699)",
    "dns-rebinding-protection": "a foreign Host/Origin is refused with a 4xx, a loopback one accepted",
}
"""Scenarios that test this server's own protocol behaviour: each must pass, every check."""

_SUITE_TOOL = "calls a tool the suite's reference server defines (`{}`), which this server does not have"
_SUITE_RESOURCE = "reads a resource the suite's reference server defines (`{}`), which this server does not have"
_SUITE_PROMPT = "gets a prompt the suite's reference server defines (`{}`), which this server does not have"

NOT_APPLICABLE = {
    "logging-set-level": "the server declares no `logging` capability; -32601 is the answer the spec gives",
    "completion-complete": "the server declares no `completions` capability (and the suite completes its own prompt)",
    "resources-subscribe": "the server declares `resources.subscribe: false` (and the suite watches its own resource)",
    "resources-unsubscribe": "the server declares `resources.subscribe: false` (and the suite watches its own resource)",
    "tools-call-simple-text": _SUITE_TOOL.format("test_simple_text")
    + "; it passes only because an unknown tool's error result carries text",
    "tools-call-error": _SUITE_TOOL.format("test_error_handling")
    + "; it passes only because an unknown tool's result has isError",
    "tools-call-image": _SUITE_TOOL.format("test_image_content"),
    "tools-call-audio": _SUITE_TOOL.format("test_audio_content"),
    "tools-call-embedded-resource": _SUITE_TOOL.format("test_embedded_resource"),
    "tools-call-mixed-content": _SUITE_TOOL.format("test_multiple_content_types"),
    "tools-call-with-logging": _SUITE_TOOL.format("test_tool_with_logging"),
    "tools-call-with-progress": _SUITE_TOOL.format("test_tool_with_progress"),
    "tools-call-sampling": _SUITE_TOOL.format("test_sampling"),
    "tools-call-elicitation": _SUITE_TOOL.format("test_elicitation"),
    "elicitation-sep1034-defaults": _SUITE_TOOL.format("test_elicitation_sep1034_defaults"),
    "elicitation-sep1330-enums": _SUITE_TOOL.format("test_elicitation_sep1330_enums"),
    "json-schema-2020-12": _SUITE_TOOL.format("json_schema_2020_12_tool"),
    "server-sse-polling": _SUITE_TOOL.format("test_reconnection"),
    "resources-read-text": _SUITE_RESOURCE.format("test://static-text"),
    "resources-read-binary": _SUITE_RESOURCE.format("test://static-binary"),
    "resources-templates-read": _SUITE_RESOURCE.format("test://template/{id}/data"),
    "prompts-get-simple": _SUITE_PROMPT.format("test_simple_prompt"),
    "prompts-get-with-args": _SUITE_PROMPT.format("test_prompt_with_arguments"),
    "prompts-get-embedded-resource": _SUITE_PROMPT.format("test_prompt_with_embedded_resource"),
    "prompts-get-with-image": _SUITE_PROMPT.format("test_prompt_with_image"),
}
"""Scenarios written for the suite's own reference server, or for a capability this server does not
declare; they are not run."""

PASSING = {"SUCCESS", "INFO"}
"""A check's statuses that pass; FAILURE and WARNING do not."""

SCENARIO_TIMEOUT = 120.0


def listed_scenarios(listing: str) -> set[str]:
    """The server scenarios of ``conformance list --server``: lines ``  - <name> [<versions>]``."""
    return set(re.findall(r"^\s+- (\S+)", listing, flags=re.MULTILINE))


@pytest.fixture
def conformance() -> list[str]:
    """The suite's CLI, installed from the lockfile (``npm ci``) on first use."""
    return tool("conformance")


async def test_every_server_scenario_of_the_pinned_suite_is_classified(conformance: list[str]) -> None:
    assert not APPLICABLE.keys() & NOT_APPLICABLE.keys()
    done = await anyio.run_process([*conformance, "list", "--server"], check=False)
    assert done.returncode == 0, done.stderr.decode()
    scenarios = listed_scenarios(done.stdout.decode())
    unclassified = scenarios - APPLICABLE.keys() - NOT_APPLICABLE.keys()
    assert not unclassified, f"new conformance scenarios: add each to APPLICABLE or NOT_APPLICABLE, {unclassified}"
    assert scenarios == APPLICABLE.keys() | NOT_APPLICABLE.keys(), "a classified scenario left the suite"


async def run_scenario(conformance: list[str], scenario: str, url: str, out: Path) -> list[dict[str, object]]:
    """The checks of one scenario run against ``url``, from the ``checks.json`` it saves under ``out``."""
    argv = [*conformance, "server", "--url", url, "--scenario", scenario, "--output-dir", str(out)]
    with anyio.fail_after(SCENARIO_TIMEOUT):
        done = await anyio.run_process(argv, check=False)
    saved = [path async for path in anyio.Path(out).glob(f"server-{scenario}-*/checks.json")]
    assert len(saved) == 1, f"{scenario} saved {len(saved)} checks ({done.returncode}): {done.stdout.decode()[-2000:]}"
    checks: list[dict[str, object]] = json.loads(await saved[0].read_text())
    return checks


async def test_the_applicable_scenarios_pass_against_a_real_server(conformance: list[str], tmp_path: Path) -> None:
    checks: dict[str, list[dict[str, object]]] = {}

    async def run(scenario: str, url: str) -> None:
        checks[scenario] = await run_scenario(conformance, scenario, url, tmp_path / scenario)

    with http_server(tmp_path) as port:
        async with bearer_proxy(port, TOKEN) as proxy, anyio.create_task_group() as group:
            for scenario in APPLICABLE:
                group.start_soon(run, scenario, f"http://127.0.0.1:{proxy}/mcp")
    failed = [
        f"{scenario}: {check['id']} {check['status']}: {check.get('errorMessage', '')}"
        for scenario, found in checks.items()
        for check in found
        if check["status"] not in PASSING
    ]
    assert checks.keys() == APPLICABLE.keys()
    assert all(checks.values()), "a scenario made no check"
    assert not failed, "\n".join(failed)
