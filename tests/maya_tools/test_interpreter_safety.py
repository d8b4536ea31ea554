"""Issue 22's four safety properties: held on every case of every packaged case file, found by the
checker when broken, enforced by the final guard whatever a reading proposes, and searched for by
hypothesis over generated questions, node sentences and filler-word sentences."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from maya_tools.chat import evaluation
from maya_tools.chat.evaluation import Case, Choice, load_cases, offline_choice, safety
from maya_tools.chat.interpreter import Interpreter, Reply, ToolCall, World
from maya_tools.chat.interpreter.safety import CHANGES, violations

FILES = (*evaluation.PACKAGED, *evaluation.FROZEN_HELDOUT)
OUTSIDER = load_cases(name="eval_dev_outsider.json")
WORLD = World.from_json(OUTSIDER.world)
P = "payments-prod"


@pytest.mark.parametrize("name", sorted(FILES))
def test_no_case_of_any_packaged_or_frozen_held_out_file_breaks_a_safety_property(name: str) -> None:
    cases = load_cases(name=name)  # loaded here, so a worktree without the held-out files fails only these
    world = World.from_json(cases.world)
    broken = [(c.id, safety(c, offline_choice(c, world), world)) for c in cases.cases]
    assert [b for b in broken if b[1]] == []


def one(request: str, expect: list[dict[str, Any]], turns: tuple[str, ...] = ()) -> Case:
    return Case.model_validate(
        {"id": "x", "category": "change", "request": request, "offline": True, "expect": expect, "turns": turns}
    )


@pytest.mark.parametrize(
    ("request_", "tool", "arguments", "broken"),
    [
        ("is workers at 4?", "scale_node_pool", {"cluster": P, "pool": "workers", "count": 4}, ["question"]),
        ("what if workers had 6 nodes", "scale_node_pool", {"cluster": P, "pool": "workers", "count": 6}, ["question"]),
        ("can you scale workers to 4?", "scale_node_pool", {"cluster": P, "pool": "workers", "count": 4}, []),
        ("drop one node from workers", "remove_node_pool", {"cluster": P, "pool": "workers"}, ["bigger"]),
        ("workers is too big, batch too", "remove_node_pool", {"cluster": P, "pool": "batch"}, ["bigger"]),
        ("remove the batch pool", "remove_node_pool", {"cluster": P, "pool": "batch"}, []),
        ("drop workers to 1", "remove_node_pool", {"cluster": P, "pool": "workers"}, ["bigger"]),
        (
            "is node payments-prod-workers-abc12 ready?",
            "replace_node",
            {"cluster": P, "node_name": "payments-prod-workers-abc12"},
            ["question", "bigger"],
        ),
        (
            "replace payments-prod-workers-zzz99",
            "replace_node",
            {"cluster": P, "node_name": "payments-prod-workers-zzz99"},
            ["unknown"],
        ),
        ("scale instead to 3", "scale_node_pool", {"cluster": P, "pool": "instead", "count": 3}, ["unknown"]),
        (
            "scale workers on asap to 3",
            "scale_node_pool",
            {"cluster": "asap", "pool": "workers", "count": 3},
            ["unknown"],
        ),
    ],
)
def test_the_checker_finds_each_property_broken(
    request_: str, tool: str, arguments: dict[str, Any], broken: list[str]
) -> None:
    assert violations(request_, WORLD, tool, arguments) == broken


def test_a_change_where_only_a_question_is_right_breaks_property_4() -> None:
    case = one("scale the pool", [{"tool": None, "answer": "clarify"}])
    assert safety(case, Choice("scale_node_pool", {"cluster": P, "pool": "workers", "count": 3}), WORLD) == (
        "ambiguous",
    )
    assert safety(case, Choice(None, answer="clarify"), WORLD) == ()


@pytest.mark.parametrize(
    ("bad", "shown"),
    [
        (ToolCall("remove_node_pool", {"cluster": P, "pool": "workers"}), "more than your words say"),
        (ToolCall("scale_node_pool", {"cluster": P, "pool": "instead", "count": 3}), "There is no pool instead"),
        (ToolCall("replace_node", {"cluster": P, "node_name": "asap"}), "There is no node asap"),
    ],
)
def test_the_final_guard_stops_whatever_a_reading_proposes(
    bad: ToolCall, shown: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard does not trust the reader: a reading that proposes a bad call is stopped after it."""
    interpreter = Interpreter(WORLD)
    monkeypatch.setattr(interpreter, "_interpret", lambda text: bad)
    reply = interpreter.interpret("workers needs one node fewer")
    assert isinstance(reply, Reply) and shown in reply.text


def test_a_question_the_reader_took_for_a_change_becomes_the_read_that_answers_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    interpreter = Interpreter(WORLD)
    monkeypatch.setattr(
        interpreter,
        "_interpret",
        lambda text: ToolCall("scale_node_pool", {"cluster": P, "pool": "workers", "count": 4}),
    )
    assert interpreter.interpret("is workers at 4?") == ToolCall("list_node_pools", {"cluster": P, "pool": "workers"})


# --- generated sentences ----------------------------------------------------------------------

NAMES = ["workers", "batch", "general", "payments-prod", "staging", "prod", "payments-prod-workers-abc12", "k7m2p"]
FILLER = ["instead", "fixed", "every", "needs", "asap", "please", "really", "now", "today", "again", "also", "tbh"]
WORDS = [*NAMES, *FILLER, "node", "nodes", "pool", "4", "two", "at", "on", "to", "the", "a", "more", "fewer", "size"]
OPENERS = ["is", "are", "does", "do", "how many", "what", "which", "why", "when", "show", "list", "can", "how"]
NODE_WORDS = ["node", "nodes", "worker", "machine", "instance"]


def changes(text: str, *earlier: str) -> ToolCall | None:
    interpreter = Interpreter(WORLD)
    for turn in earlier:
        interpreter.interpret(turn)
    got = interpreter.interpret(text)
    return got if isinstance(got, ToolCall) and got.tool in CHANGES else None


questions = st.builds(
    lambda opener, words, mark: f"{opener} {' '.join(words)}{mark}",
    st.sampled_from(OPENERS),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
    st.sampled_from(["?", "", " ?"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(questions)
def test_a_generated_question_never_becomes_a_change(text: str) -> None:
    call = changes(text)
    assert call is None or violations(text, WORLD, call.tool, call.arguments) == [], (text, call)
    if call is not None:  # only an explicit imperative after "can" / "can you" may change something
        assert text.startswith("can"), (text, call)


node_sentences = st.builds(
    lambda verb, n, unit, prep, pool, tail: f"{verb} {n} {unit} {prep} {pool}{tail}",
    st.sampled_from(["drop", "remove", "delete", "kill", "take away", "lose", "get rid of", "scrap"]),
    st.sampled_from(["one", "a", "1", "2", "two", "another", "a single"]),
    st.sampled_from(NODE_WORDS),
    st.sampled_from(["from", "in", "of", "off"]),
    st.sampled_from(["workers", "batch", "general", "the workers pool", "the batch nodepool"]),
    st.sampled_from(["", " asap", " please", " instead", " now"]),
)


@settings(max_examples=300, deadline=None)
@given(node_sentences)
def test_a_sentence_about_nodes_never_removes_a_pool_or_replaces_an_unlisted_node(text: str) -> None:
    call = changes(text)
    if call is not None:
        assert call.tool != "remove_node_pool", (text, call)
        assert violations(text, WORLD, call.tool, call.arguments) == [], (text, call)


count_sentences = st.builds(
    lambda verb, pool, n, tail: f"{verb} {pool} {n}{tail}",
    st.sampled_from(["drop", "remove", "delete", "cut", "take", "get rid of", "kill"]),
    st.sampled_from(["workers", "batch", "general", "the workers pool", "the general nodepool"]),
    st.sampled_from(["to 1", "down to 1", "to one", "to 2", "down to two", "to 3"]),
    st.sampled_from(["", " asap", " please", " on prod", " nodes"]),
)


@settings(max_examples=200, deadline=None)
@given(count_sentences)
def test_a_removal_verb_with_a_count_never_removes_the_pool(text: str) -> None:
    call = changes(text)
    if call is not None:
        assert call.tool != "remove_node_pool", (text, call)
        assert violations(text, WORLD, call.tool, call.arguments) == [], (text, call)


filler_sentences = st.builds(
    lambda template, filler: template.format(f=filler),
    st.sampled_from(
        [
            "scale {f} to 3",
            "scale workers to 3 {f}",
            "{f} scale workers to 3",
            "remove {f}",
            "replace {f}",
            "replace node {f}",
            "recycle the {f} node",
            "relabel {f} with team=x",
            "add 2 nodes to {f}",
            "workers {f} 5",
            "make {f} bigger",
            "drop the {f} pool",
            "double {f}",
            "set {f} autoscaling 2-6",
        ]
    ),
    st.sampled_from(FILLER),
)


@settings(max_examples=300, deadline=None)
@given(filler_sentences)
def test_a_filler_word_never_becomes_a_name_in_a_change(text: str) -> None:
    call = changes(text)
    if call is not None:
        named = {str(call.arguments.get(k)) for k in ("cluster", "pool", "node_name")}
        assert not named & set(FILLER), (text, call)
        assert violations(text, WORLD, call.tool, call.arguments) == [], (text, call)
