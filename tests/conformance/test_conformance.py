"""The MCP conformance suite's server scenarios that apply to this server pass against a real
``maya-tools serve --transport streamable-http``, at each protocol generation the server speaks;
every scenario of the pinned suite is classified.

The suite (npm ``@modelcontextprotocol/conformance``, pinned in ``package.json``) runs a scenario at
the wire of the version it is given (``--spec-version``): the initialize handshake and a session for
2025-11-25, per-request ``_meta`` without a session for 2026-07-28. A scenario that both versions
list runs twice, since passing on one wire says nothing about the other. The suite cannot send a
header, so it reaches the server through ``tests.conformance.proxy``, which adds the Door bearer the
HTTP server requires.
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

VERSIONS = ("2025-11-25", "2026-07-28")
"""The protocol generations the server speaks; an applicable scenario runs at each one it lists."""

APPLICABLE = {
    "server-initialize": "the initialize handshake (2025-11-25)",
    "server-session-lifecycle": "initialized, DELETE ends the session, a request on it is then 404 (2025-11-25)",
    "server-stateless": "server/discover, per-request _meta, version and header errors, the methods "
    "2026-07-28 removed answer 404 and -32601, subscriptions/listen (SEP-2575)",
    "ping": "ping (2025-11-25)",
    "tools-list": "every tool has a name, a description and an input schema",
    "resources-list": "every resource has a uri and a name",
    "prompts-list": "every prompt has a name and a description",
    "server-sse-multiple-streams": "concurrent POST SSE streams (SEP-1699)",
    "dns-rebinding-protection": "a foreign Host/Origin is refused with a 4xx, a loopback one accepted",
    "sep-2164-resource-not-found": "an unknown resource is -32602 with data.uri, never empty contents (2026-07-28)",
    "caching": "ttlMs and cacheScope on every list and on resources/read (SEP-2549, 2026-07-28)",
    "http-header-validation": "Mcp-Method and Mcp-Name must match the body, else 400 and -32020 (SEP-2243, 2026-07-28)",
    "input-required-result-unsupported-methods": "tools/list and prompts/list never answer input_required (SEP-2322)",
}
"""Scenarios that test this server's own protocol behaviour: each must pass, every check, but for
the checks below."""

_NEEDS_SUITE_TOOL = (
    "needs the suite's diagnostic tool `{}`, which this server does not have; the suite says 'Not testable'"
)

NOT_TESTABLE = {
    "sep-2575-server-rejects-undeclared-capability": _NEEDS_SUITE_TOOL.format("test_missing_capability")
    + " (no tool here needs a client capability: without elicitation a change is a pending card, fail closed)",
    "sep-2575-missing-capability-http-400": _NEEDS_SUITE_TOOL.format("test_missing_capability"),
    "sep-2575-http-server-no-independent-requests-on-stream": _NEEDS_SUITE_TOOL.format("test_streaming_elicitation")
    + " (a card's elicitation rides an input_required result: tests/maya_tools/ checks it with the SDK Client)",
    "sep-2575-server-no-log-without-loglevel": _NEEDS_SUITE_TOOL.format("test_logging_tool"),
}
"""Checks of an applicable scenario that may fail only as the suite's own 'Not testable: …'."""

SUITE_DEFECTS = {
    check: f"a defect of the suite: it mutates the list by calling its tool `{hook}` and takes any answer but -32601 "
    "for a mutation, but an unknown tool is a protocol error -32602 (2026-07-28 server/tools, Error "
    "Handling), so it waits for a list_changed that nothing caused; this server's lists never change"
    for check, hook in (
        ("sep-2575-server-sends-prompts-list-changed-on-subscription", "test_trigger_prompt_change"),
        ("sep-2575-server-sends-tools-list-changed-on-subscription", "test_trigger_tool_change"),
    )
}
"""Checks of an applicable scenario that may end in WARNING only, for the reason given."""

_SUITE_TOOL = "calls a tool the suite's reference server defines (`{}`), which this server does not have"
_SUITE_RESOURCE = "reads a resource the suite's reference server defines (`{}`), which this server does not have"
_SUITE_PROMPT = "gets a prompt the suite's reference server defines (`{}`), which this server does not have"
_EXTENSION = "tests the `{}` extension, which the server does not declare"

NOT_APPLICABLE = {
    "logging-set-level": "the server declares no `logging` capability; -32601 is the answer the spec gives",
    "completion-complete": "the server declares no `completions` capability (and the suite completes its own prompt)",
    "resources-subscribe": "the server declares `resources.subscribe: false` on 2025-11-25 (and the suite watches "
    "its own resource)",
    "resources-unsubscribe": "the server declares `resources.subscribe: false` on 2025-11-25 (and the suite watches "
    "its own resource)",
    "tools-call-simple-text": _SUITE_TOOL.format("test_simple_text"),
    "tools-call-error": _SUITE_TOOL.format("test_error_handling"),
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
    "http-custom-header-server-validation": "needs a tool whose input schema marks a parameter `x-mcp-header` "
    "(SEP-2243's opt-in Mcp-Param headers); no tool here does, and the suite says 'Not testable'",
    "input-required-result-basic-elicitation": _SUITE_TOOL.format("test_input_required_result_elicitation"),
    "input-required-result-basic-sampling": _SUITE_TOOL.format("test_input_required_result_sampling"),
    "input-required-result-basic-list-roots": _SUITE_TOOL.format("test_input_required_result_list_roots"),
    "input-required-result-request-state": _SUITE_TOOL.format("test_input_required_result_request_state"),
    "input-required-result-multiple-input-requests": _SUITE_TOOL.format("test_input_required_result_multiple_inputs"),
    "input-required-result-multi-round": _SUITE_TOOL.format("test_input_required_result_multi_round"),
    "input-required-result-missing-input-response": _SUITE_TOOL.format("test_input_required_result_elicitation"),
    "input-required-result-result-type": _SUITE_TOOL.format("test_input_required_result_elicitation"),
    "input-required-result-tampered-state": _SUITE_TOOL.format("test_input_required_result_tampered_state"),
    "input-required-result-capability-check": _SUITE_TOOL.format("test_input_required_result_capabilities"),
    "input-required-result-ignore-extra-params": _SUITE_TOOL.format("test_input_required_result_elicitation"),
    "input-required-result-validate-input": _SUITE_TOOL.format("test_input_required_result_elicitation")
    + "; it passes only because an unknown tool is a JSON-RPC error",
    "input-required-result-non-tool-request": _SUITE_PROMPT.format("test_input_required_result_prompt"),
    "resources-read-text": _SUITE_RESOURCE.format("test://static-text"),
    "resources-read-binary": _SUITE_RESOURCE.format("test://static-binary"),
    "resources-templates-read": _SUITE_RESOURCE.format("test://template/{id}/data"),
    "prompts-get-simple": _SUITE_PROMPT.format("test_simple_prompt"),
    "prompts-get-with-args": _SUITE_PROMPT.format("test_prompt_with_arguments"),
    "prompts-get-embedded-resource": _SUITE_PROMPT.format("test_prompt_with_embedded_resource"),
    "prompts-get-with-image": _SUITE_PROMPT.format("test_prompt_with_image"),
    **{
        f"tasks-{name}": _EXTENSION.format("io.modelcontextprotocol/tasks")
        + " (the SDK 2.3.0 has no tasks runtime; a card is approved before any long work starts)"
        for name in (
            "lifecycle",
            "capability-negotiation",
            "wire-fields",
            "request-state-removal",
            "mrtr-input",
            "request-headers",
            "dispatch-and-envelope",
            "status-notifications",
            "required-task-error",
            "mrtr-composition",
        )
    },
    **{
        f"sep-2640-skills-{name}": _EXTENSION.format("skills (SEP-2640)")
        for name in ("directory", "enumeration", "manifest")
    },
}
"""Scenarios written for the suite's own reference server, or for a capability or extension this
server does not declare; they are not run."""

PASSING = {"SUCCESS", "INFO"}
"""A check's statuses that pass; FAILURE and WARNING do not."""

SCENARIO_TIMEOUT = 120.0
CONCURRENT = 4
"""Scenarios run at once: each is a Node.js process, and the test machines are small."""

Checks = list[dict[str, object]]


def listed_scenarios(listing: str) -> dict[str, set[str]]:
    """The server scenarios of ``conformance list --server`` (lines ``  - <name> [<v1>,<v2>]``), each
    with the versions (or ``extension``) it lists."""
    found = re.findall(r"^\s+- (\S+) \[([^\]]*)\]", listing, flags=re.MULTILINE)
    return {name: set(tags.split(",")) for name, tags in found}


def excused(check: dict[str, object]) -> bool:
    """Whether a check that did not pass is one of ``NOT_TESTABLE`` or ``SUITE_DEFECTS``, failing as said there."""
    if check["id"] in NOT_TESTABLE:
        return check["status"] == "FAILURE" and str(check.get("errorMessage", "")).startswith("Not testable:")
    return check["id"] in SUITE_DEFECTS and check["status"] == "WARNING"


@pytest.fixture
def conformance() -> list[str]:
    """The suite's CLI, installed from the lockfile (``npm ci``) on first use."""
    return tool("conformance")


async def scenarios_of(conformance: list[str]) -> dict[str, set[str]]:
    done = await anyio.run_process([*conformance, "list", "--server"], check=False)
    assert done.returncode == 0, done.stderr.decode()
    return listed_scenarios(done.stdout.decode())


async def test_every_server_scenario_of_the_pinned_suite_is_classified(conformance: list[str]) -> None:
    assert not APPLICABLE.keys() & NOT_APPLICABLE.keys()
    assert not NOT_TESTABLE.keys() & SUITE_DEFECTS.keys()
    scenarios = await scenarios_of(conformance)
    unclassified = scenarios.keys() - APPLICABLE.keys() - NOT_APPLICABLE.keys()
    assert not unclassified, f"new conformance scenarios: add each to APPLICABLE or NOT_APPLICABLE, {unclassified}"
    assert scenarios.keys() == APPLICABLE.keys() | NOT_APPLICABLE.keys(), "a classified scenario left the suite"
    idle = [name for name in APPLICABLE if not scenarios[name] & set(VERSIONS)]
    assert not idle, f"applicable scenarios that run at none of {VERSIONS}: {idle}"


async def run_scenario(conformance: list[str], scenario: str, version: str, url: str, out: Path) -> Checks:
    """The checks of one scenario run at ``version`` against ``url``, from the ``checks.json`` it saves under ``out``."""
    argv = [*conformance, "server", "--url", url, "--scenario", scenario, "--spec-version", version]
    with anyio.fail_after(SCENARIO_TIMEOUT):
        done = await anyio.run_process([*argv, "--output-dir", str(out)], check=False)
    saved = [path async for path in anyio.Path(out).glob(f"server-{scenario}-*/checks.json")]
    assert len(saved) == 1, f"{scenario} saved {len(saved)} checks ({done.returncode}): {done.stdout.decode()[-2000:]}"
    checks: Checks = json.loads(await saved[0].read_text())
    return checks


@pytest.mark.parametrize("version", VERSIONS)
async def test_the_applicable_scenarios_pass_against_a_real_server(
    conformance: list[str], tmp_path: Path, version: str
) -> None:
    listed = await scenarios_of(conformance)
    wanted = [name for name in APPLICABLE if version in listed.get(name, set())]
    checks: dict[str, Checks] = {}
    limiter = anyio.CapacityLimiter(CONCURRENT)

    async def run(scenario: str, url: str) -> None:
        async with limiter:
            checks[scenario] = await run_scenario(conformance, scenario, version, url, tmp_path / scenario)

    with http_server(tmp_path) as port:
        async with bearer_proxy(port, TOKEN) as proxy, anyio.create_task_group() as group:
            for scenario in wanted:
                group.start_soon(run, scenario, f"http://127.0.0.1:{proxy}/mcp")
    failed = [
        f"{scenario}: {check['id']} {check['status']}: {check.get('errorMessage', '')}"
        for scenario, found in checks.items()
        for check in found
        if check["status"] not in PASSING and not excused(check)
    ]
    assert wanted and checks.keys() == set(wanted)
    assert all(checks.values()), "a scenario made no check"
    assert not failed, "\n".join(failed)
