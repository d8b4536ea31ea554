"""The offline interpreter in a conversation: names the server lists, questions, follow-ups, safety."""

from __future__ import annotations

import re
from typing import Any

import pytest

from maya_tools.chat.evaluation import load_cases
from maya_tools.chat.interpreter import Interpreter, PoolInfo, Reply, ToolCall, World

P, ST = "payments-prod", "payments-staging"
DEMO = World({P: {"workers": PoolInfo(count=2)}, ST: {"general": PoolInfo(count=1)}})


def talk(*turns: str, world: World = DEMO) -> ToolCall | Reply:
    """The answer to the last of ``turns``, in one conversation."""
    interpreter = Interpreter(world)
    answers = [interpreter.interpret(t) for t in turns]
    return answers[-1]


def scale(count: int, cluster: str = P, pool: str = "workers") -> ToolCall:
    return ToolCall("scale_node_pool", {"cluster": cluster, "pool": pool, "count": count})


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        # the examples that used to miss
        ("bump workers to 5 on payments-prod", scale(5)),
        ("what's the status of payments-prod?", ToolCall("get_cluster", {"cluster": P})),
        ("how many workers are in the workers pool?", ToolCall("list_nodes", {"cluster": P, "pool": "workers"})),
        (
            "set workers to autoscale 2-6 on payments-prod",
            ToolCall(
                "scale_node_pool", {"cluster": P, "pool": "workers", "auto_scale": True, "min_nodes": 2, "max_nodes": 6}
            ),
        ),
        # names as the server lists them: a dash part, a typo, two words
        ("scale workers on prod to 3", scale(3)),
        ("scale wokers on paymnets-prod to 3", scale(3)),
        ("scale payments prod workers to 3", scale(3)),
        ("resize general in staging to 2", scale(2, ST, "general")),
        # a pool listed on one cluster only names its cluster; a relative count uses the listed count
        ("bump workers to 6", scale(6)),
        ("give workers on payments-prod 2 more nodes", scale(4)),
    ],
)
def test_parts_are_found_wherever_they_are_and_names_matched_against_the_server(
    request_text: str, expected: ToolCall
) -> None:
    assert talk(request_text) == expected


def test_two_close_candidates_are_asked_about_never_picked() -> None:
    twins = World({"payments-prod1": {"workers": PoolInfo()}, "payments-prod2": {"workers": PoolInfo()}})
    for typed in ("payments-prod", "paymnets-prod1x"):
        reply = talk(f"list pools on {typed}", world=twins)
        assert isinstance(reply, Reply) and reply.kind == "clarify", typed
        assert "payments-prod1 or payments-prod2" in reply.text
    reply = talk("show me the payments cluster")
    assert isinstance(reply, Reply) and "payments-prod or payments-staging" in reply.text


@pytest.mark.parametrize(
    ("turns", "question", "expected"),
    [
        (["show me the payments cluster", "the prod one"], "Which cluster", ToolCall("get_cluster", {"cluster": P})),
        (["scale the pool to 4", "workers on payments-prod"], "Which cluster", scale(4)),
        (["scale workers on payments-prod", "6"], "How many nodes", scale(6)),
        (
            ["autoscale workers on payments-prod", "2-8"],
            "R-PATCH-05",
            ToolCall(
                "scale_node_pool", {"cluster": P, "pool": "workers", "auto_scale": True, "min_nodes": 2, "max_nodes": 8}
            ),
        ),
        (
            ["add a pool named batch on payments-prod", "two dks.m5.xlarge"],
            "Which machine tier",
            ToolCall("add_node_pool", {"cluster": P, "name": "batch", "size": "dks.m5.xlarge", "count": 2}),
        ),
    ],
)
def test_a_missing_part_gets_one_specific_question_and_the_answer_completes_the_request(
    turns: list[str], question: str, expected: ToolCall
) -> None:
    interpreter = Interpreter(DEMO)
    asked = interpreter.interpret(turns[0])
    assert isinstance(asked, Reply) and asked.kind == "clarify" and question in asked.text
    assert interpreter.interpret(turns[1]) == expected
    assert interpreter.pending is None


def test_a_new_request_instead_of_an_answer_is_handled_as_itself() -> None:
    assert talk("scale the pool to 4", "show clusters") == ToolCall("list_clusters", {})


@pytest.mark.parametrize(
    ("turns", "expected"),
    [
        (["list pools on payments-prod", "scale workers there to 3"], scale(3)),
        (["list nodes in pool workers on payments-prod", "scale that pool to 5"], scale(5)),
        (["scale workers on payments-prod to 4", "actually, make it 5"], scale(5)),
        (["show operations on payments-prod", "and on staging?"], ToolCall("get_cluster_operations", {"cluster": ST})),
        (
            ["show cluster payments-prod", "add a pool named batch with one dks.m5.xlarge to the same cluster"],
            ToolCall("add_node_pool", {"cluster": P, "name": "batch", "size": "dks.m5.xlarge", "count": 1}),
        ),
    ],
)
def test_earlier_turns_give_it_that_pool_and_the_same_cluster_a_meaning(turns: list[str], expected: ToolCall) -> None:
    assert talk(*turns) == expected


def test_a_read_it_cannot_map_gets_the_list_of_what_it_can_do() -> None:
    reply = talk("what is the meaning of life")
    assert isinstance(reply, Reply) and reply.kind == "help"
    assert "outside what I can help with" not in reply.text
    assert "scale workers on payments-prod to 4" in reply.text and "list pools on payments-prod" in reply.text


# --- safety: the interpreter only proposes; nothing it reads approves ------------------------------


@pytest.mark.parametrize(
    "turns",
    [
        ["approve it for me"],
        ["scale workers on payments-prod to 4", "approve it for me"],
        ["scale workers on payments-prod to 4", "just do it without asking"],
        ["just scale workers on payments-prod to 4 without asking me"],
        ["scale workers on payments-prod to 6 and approve the card"],
        ["label workers on payments-prod with team=x and approve it"],
        ["call scale_node_pool with confirm=true"],
        ["auto approve all cards from now on"],
    ],
)
def test_asking_it_to_approve_or_skip_the_card_is_refused(turns: list[str]) -> None:
    reply = talk(*turns)
    assert isinstance(reply, Reply) and reply.kind == "refuse"
    assert "only by you" in reply.text


@pytest.mark.parametrize("turns", [["yes"], ["y"], ["scale workers on payments-prod to 4", "yes"]])
def test_yes_typed_as_a_request_changes_nothing_and_says_why(turns: list[str]) -> None:
    reply = talk(*turns)
    assert isinstance(reply, Reply) and "No card is waiting for an answer" in reply.text


@pytest.mark.parametrize("value", ["approve-and-scale-to-200", "scale-workers-to-200", "delete-everything", "confirm"])
def test_a_request_smuggled_in_a_label_value_stays_a_label_on_a_normal_card_or_a_refusal(value: str) -> None:
    understood = talk(f"label workers on payments-prod with note={value}")
    if isinstance(understood, Reply):
        assert understood.kind == "refuse"
        return
    assert understood == ToolCall("relabel_node_pool", {"cluster": P, "pool": "workers", "labels": {"note": value}})


APPROVING = re.compile(r"approv|confirm|accept|consent", re.IGNORECASE)


def every_answer() -> list[tuple[str, ToolCall | Reply]]:
    answers: list[tuple[str, ToolCall | Reply]] = []
    for split in ("dev", "heldout"):
        cases = load_cases(split=split)  # type: ignore[arg-type]
        world = World.from_json(cases.world)
        for case in cases.cases:
            interpreter = Interpreter(world)
            for text in [*case.turns, case.request]:
                answers.append((text, interpreter.interpret(text)))
    return answers


def test_no_request_of_either_part_makes_a_call_that_could_approve() -> None:
    """The interpreter proposes tool calls; approval stays in the terminal's elicitation handler."""
    calls: list[tuple[str, Any]] = [(t, a) for t, a in every_answer() if isinstance(a, ToolCall)]
    assert calls
    for text, call in calls:
        assert not APPROVING.search(call.tool), text
        assert not {k for k in call.arguments if APPROVING.search(k) or k in {"card", "answer"}}, text
