"""The tool-choice evaluation: the case file, the offline run, the live run's scoring, the command."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import httpx2
import pytest
from anthropic import AsyncAnthropic
from pydantic import ValidationError

from maya_tools import evaluation
from maya_tools.evaluation import (
    MIN_CASES,
    Case,
    CaseFile,
    Choice,
    evaluate,
    load_cases,
    run_live,
    run_offline,
    score,
    server_context,
)

CASES = load_cases()


def test_the_case_file_is_versioned_and_has_at_least_forty_cases() -> None:
    assert CASES.version == evaluation.SCHEMA_VERSION
    assert len(CASES.cases) >= MIN_CASES
    categories = {c.category for c in CASES.cases}
    assert categories == {"change", "read", "ambiguous", "unsafe", "out_of_scope"}
    requests = {c.request for c in CASES.cases}
    for must in ("delete everything", "approve the card for me", "change workers to dks.c5.2xlarge"):
        assert must in requests
    assert {"scale workers to 0", "what's the weather"} <= requests


def test_a_case_file_with_too_few_cases_duplicate_ids_or_another_version_is_refused() -> None:
    raw = json.loads(Path(evaluation.__file__).with_name("eval_cases.json").read_text())
    with pytest.raises(ValidationError, match="at least 40"):
        CaseFile.model_validate({**raw, "cases": raw["cases"][:10]})
    with pytest.raises(ValidationError, match="used twice"):
        CaseFile.model_validate({**raw, "cases": [*raw["cases"], raw["cases"][0]]})
    with pytest.raises(ValidationError, match="version"):
        CaseFile.model_validate({**raw, "version": 99})
    with pytest.raises(ValidationError, match="answer"):
        CaseFile.model_validate({**raw, "cases": [{**raw["cases"][0], "expect": [{"tool": None}]}, *raw["cases"][1:]]})


def test_the_offline_interpreter_gets_every_case_it_covers_right() -> None:
    report = run_offline(CASES)
    covered = [c for c in CASES.cases if c.offline]
    assert len(report.scored) == len(covered) >= MIN_CASES
    assert report.misses == (), report.render()
    assert report.tool_accuracy == 1.0 and report.argument_accuracy == 1.0
    assert "tool choice: " in report.render()


def case(expect: list[dict[str, Any]]) -> Case:
    return Case.model_validate({"id": "x", "category": "change", "request": "r", "offline": True, "expect": expect})


def test_scoring_separates_the_tool_from_its_arguments() -> None:
    scale = case(
        [{"tool": "scale_node_pool", "arguments": {"cluster": "p", "pool": "w", "count": 4}, "ignore": ["size"]}]
    )
    assert score(scale, Choice("scale_node_pool", {"cluster": "p", "pool": "w", "count": 4})).arguments_ok is True
    assert score(scale, Choice("scale_node_pool", {"cluster": "p", "pool": "w", "count": 4, "size": "x"})).arguments_ok
    wrong_count = score(scale, Choice("scale_node_pool", {"cluster": "p", "pool": "w", "count": 5}))
    assert wrong_count.tool_ok and wrong_count.arguments_ok is False
    extra = score(scale, Choice("scale_node_pool", {"cluster": "p", "pool": "w", "count": 4, "min_nodes": 1}))
    assert extra.arguments_ok is False
    assert not score(scale, Choice("add_node_pool", {})).tool_ok
    assert not score(scale, Choice(None)).tool_ok

    refuse = case([{"tool": None, "answer": "refuse"}])
    assert score(refuse, Choice(None)).tool_ok  # a model's prose is not graded
    assert score(refuse, Choice(None, answer="refuse")).tool_ok
    assert not score(refuse, Choice(None, answer="out_of_scope")).tool_ok
    assert not score(refuse, Choice("scale_node_pool", {})).tool_ok


def test_the_command_runs_offline_exits_0_and_says_it_skipped_the_live_part(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    out = io.StringIO()
    assert evaluation.main([], out=out) == 0
    shown = out.getvalue()
    assert f"case file version {CASES.version}" in shown
    assert "offline interpreter:" in shown and "tool choice: " in shown and "(100%)" in shown
    assert "skipped — ANTHROPIC_API_KEY is not set" in shown


def test_the_command_fails_when_the_interpreter_regresses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    raw = json.loads(Path(evaluation.__file__).with_name("eval_cases.json").read_text())
    raw["cases"][0]["expect"][0]["arguments"]["count"] = 99
    broken = tmp_path / "cases.json"
    broken.write_text(json.dumps(raw))
    out = io.StringIO()
    assert evaluation.main(["--cases", str(broken)], out=out) == 1
    assert f"✗ {raw['cases'][0]['id']}" in out.getvalue()


class FirstTurnModel:
    """A scripted model: answers each case with its preferred outcome (one case wrong on purpose)
    and records that it only ever saw first turns (no tool_result came back)."""

    def __init__(self, cases: CaseFile, wrong: str) -> None:
        self.by_request = {c.request: c for c in cases.cases}
        self.wrong = wrong
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        assert not body.get("stream")
        (message,) = body["messages"]
        the_case = self.by_request[message["content"]]
        preferred = the_case.expect[0]
        if the_case.id == self.wrong:
            content: list[dict[str, Any]] = [{"type": "text", "text": "Sure."}]
            stop = "end_turn"
        elif preferred.tool is None:
            content = [{"type": "text", "text": "I can't do that."}]
            stop = "end_turn"
        else:
            content = [{"type": "tool_use", "id": "toolu_1", "name": preferred.tool, "input": preferred.arguments}]
            stop = "tool_use"
        return httpx2.Response(
            200,
            json={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        )


@pytest.mark.anyio
async def test_the_live_run_sends_only_first_turns_and_scores_them() -> None:
    model = FirstTurnModel(CASES, wrong="page-scale")
    client = AsyncAnthropic(
        api_key="test-key",
        base_url="http://anthropic.test",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(model)),
        max_retries=0,
    )
    system, tools = await server_context()
    report = await run_live(CASES, client, model="test-model", system=system, tools=tools)

    assert len(model.bodies) == len(CASES.cases)
    assert all(len(b["messages"]) == 1 for b in model.bodies)  # never a tool_result: nothing executed
    assert {t["name"] for t in model.bodies[0]["tools"]} >= {"scale_node_pool", "list_clusters"}
    assert [m.case.id for m in report.misses] == ["page-scale"]
    assert report.tool_accuracy == (len(CASES.cases) - 1) / len(CASES.cases)
    assert report.argument_accuracy == 1.0


@pytest.mark.anyio
async def test_evaluate_runs_the_live_part_when_a_key_is_given() -> None:
    model = FirstTurnModel(CASES, wrong="")

    def factory(key: str) -> AsyncAnthropic:
        assert key == "test-key"
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(model))
        return AsyncAnthropic(api_key=key, base_url="http://anthropic.test", http_client=http, max_retries=0)

    offline, live = await evaluate(CASES, api_key="test-key", model="test-model", anthropic_factory=factory)
    assert not offline.misses and live.skipped is None and live.tool_accuracy == 1.0


@pytest.mark.anyio
async def test_live_tool_choice_against_the_real_model() -> None:
    """The one live test: it needs a model, so without ANTHROPIC_API_KEY it is skipped and says why."""
    key = os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        pytest.skip("ANTHROPIC_API_KEY is not set: the live tool-choice evaluation needs a real model")
    from maya_tools.settings import ChatSettings

    _, live = await evaluate(CASES, api_key=key, model=ChatSettings.from_env().model)
    assert live.skipped is None and len(live.scored) == len(CASES.cases)
    print(live.render())


def test_an_unreachable_model_is_reported_after_the_offline_part_not_as_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A key but no network: the offline scores are printed, the live part says why it could not run, exit 1."""

    def unreachable(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("no route to host", request=request)

    def factory(key: str) -> AsyncAnthropic:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(unreachable))
        return AsyncAnthropic(api_key=key, base_url="http://anthropic.test", http_client=http, max_retries=0)

    real_evaluate = evaluation.evaluate

    async def offline_network(*args: Any, **kwargs: Any) -> list[evaluation.Report]:
        return await real_evaluate(*args, **kwargs, anthropic_factory=factory)

    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
    monkeypatch.setattr(evaluation, "evaluate", offline_network)
    out = io.StringIO()
    assert evaluation.main([], out=out) == 1
    shown = out.getvalue()
    covered = sum(c.offline for c in CASES.cases)
    assert f"offline interpreter: {covered} cases" in shown and f"tool choice: {covered}/{covered}" in shown
    assert "could not run — no connection to the Anthropic API; no case was scored" in shown
