"""Issue 22, third round: requests said politely, inside chatter, as commands, with loose names,
bounds and tiers, and follow-ups, read as the person meant; each one failed before this round."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from maya_tools.chat.evaluation import load_cases
from maya_tools.chat.interpreter import Interpreter, Reply, ToolCall, World
from maya_tools.chat.interpreter.chatter import trim
from maya_tools.chat.interpreter.safety import CHANGES, asks, imperative, violations

WORLD = World.from_json(load_cases(name="eval_dev_outsider.json").world)
P, S = "payments-prod", "payments-staging"


def said(*turns: str) -> ToolCall | Reply:
    interpreter = Interpreter(WORLD)
    for turn in turns[:-1]:
        interpreter.interpret(turn)
    return interpreter.interpret(turns[-1])


def call(tool: str, **arguments: Any) -> ToolCall:
    return ToolCall(tool, arguments)


def asked(got: ToolCall | Reply, *words: str) -> bool:
    return isinstance(got, Reply) and got.kind == "clarify" and all(w in got.text for w in words)


@pytest.mark.parametrize(
    ("turns", "expected"),
    [
        # a request inside chatter: greetings, reasons and "is that possible?" are not its parts
        (
            [
                "hi Maya, hope you are well! we are launching next week, so could you please add a pool called "
                "reports to payments-prod with 2 c5 large machines? thanks a lot"
            ],
            call("add_node_pool", cluster=P, name="reports", size="dks.c5.large", count=2),
        ),
        (
            ["we have a sale tomorrow so batch should be able to go up to 12, and down to 2 is fine"],
            call("scale_node_pool", cluster=P, pool="batch", auto_scale=True, min_nodes=2, max_nodes=12),
        ),
        (
            ["make workers twelve nodes, the CFO finally approved the budget"],
            call("scale_node_pool", cluster=P, pool="workers", count=12),
        ),
        (
            ["lower batch's minimum by one so it can go down to zero on weekends"],
            call("scale_node_pool", cluster=P, pool="batch", auto_scale=True, min_nodes=0, max_nodes=4),
        ),
        (
            ["let's autoscale the staging pool from 1 to 3 nodes, we have a lot of PRs this week"],
            call("scale_node_pool", cluster=S, pool="general", auto_scale=True, min_nodes=1, max_nodes=3),
        ),
        # a request asked politely as a question
        (["can workers have one fewer node?"], call("scale_node_pool", cluster=P, pool="workers", count=1)),
        (
            ["on 7c1e5b9a could you relabel the general nodepool to env=staging?"],
            call("relabel_node_pool", cluster=S, pool="general", labels={"env": "staging"}),
        ),
        (
            ["Hi Maya, when you get a moment could you please set the number of workers nodes on payments-prod to 3?"],
            call("scale_node_pool", cluster=P, pool="workers", count=3),
        ),
        # a new pool's parts in any order
        (
            ["Could you please add a new node pool to payments-staging? Name: canary. Machine: c5 xlarge. Count: one."],
            call("add_node_pool", cluster=S, name="canary", size="dks.c5.xlarge", count=1),
        ),
        (
            ["prod needs a pool called cache. r5 xlarge. 2"],
            call("add_node_pool", cluster=P, name="cache", size="dks.r5.xlarge", count=2),
        ),
        (
            ["new pool on prod: etl, m5 large, 3 nodes"],
            call("add_node_pool", cluster=P, name="etl", size="dks.m5.large", count=3),
        ),
        (
            ["staging: add pool workers, c5 xlarge, 2 nodes"],
            call("add_node_pool", cluster=S, name="workers", size="dks.c5.xlarge", count=2),
        ),
        (
            ["add pool etl2 on prod same tier as workers, 2 nodes"],
            call("add_node_pool", cluster=P, name="etl2", size="dks.c5.xlarge", count=2),
        ),
        (
            [
                "I'd like a new pool on prod for the reporting service — call it reporting-svc, dks.m5.xlarge, one node, "
                "no autoscaling please"
            ],
            call("add_node_pool", cluster=P, name="reporting-svc", size="dks.m5.xlarge", count=1),
        ),
        # bounds in more words
        (["batch max +2"], call("scale_node_pool", cluster=P, pool="batch", auto_scale=True, min_nodes=1, max_nodes=6)),
        (
            ["double the batch ceiling"],
            call("scale_node_pool", cluster=P, pool="batch", auto_scale=True, min_nodes=1, max_nodes=8),
        ),
        (
            ["batch should never drop below 2"],
            call("scale_node_pool", cluster=P, pool="batch", auto_scale=True, min_nodes=2, max_nodes=4),
        ),
        (
            ["make the general pool on staging elastic, 1 min 4 max"],
            call("scale_node_pool", cluster=S, pool="general", auto_scale=True, min_nodes=1, max_nodes=4),
        ),
        (
            ["let workers autoscale down to 0 at night, cap at 5"],
            call("scale_node_pool", cluster=P, pool="workers", auto_scale=True, min_nodes=0, max_nodes=5),
        ),
        # tiers said by what they change
        (
            ["more memory for batch pls, same cpu"],
            call("change_pool_tier", cluster=P, pool="batch", size="dks.r5.xlarge"),
        ),
        (
            ["switch batch over to the memory optimised ones (r5)"],
            call("change_pool_tier", cluster=P, pool="batch", size="dks.r5.xlarge"),
        ),
        (["scale workers to c5 2xlarge"], call("change_pool_tier", cluster=P, pool="workers", size="dks.c5.2xlarge")),
        (
            ["upgrade staging general to c5 xlarge but it has to stay called general"],
            call("change_pool_tier", cluster=S, pool="general", size="dks.c5.xlarge", keep_name=True),
        ),
        (
            ["which tiers have 32 gb?", "great, move batch to that one please"],
            call("change_pool_tier", cluster=P, pool="batch", size="dks.r5.xlarge"),
        ),
        (["add 2 c5 nodes to workers"], call("scale_node_pool", cluster=P, pool="workers", count=4)),
        # commands as typed in an IDE
        (
            ["scale_node_pool cluster=payments-prod pool=workers count=5"],
            call("scale_node_pool", cluster=P, pool="workers", count=5),
        ),
        (["remove_node_pool cluster=payments-prod pool=batch"], call("remove_node_pool", cluster=P, pool="batch")),
        (
            ["get_cluster_operations payments-prod follow=payments-prod-batch-q9x4t"],
            call("get_cluster_operations", cluster=P, follow="payments-prod-batch-q9x4t"),
        ),
        (
            ['batch {"auto_scale": true, "min_nodes": 1, "max_nodes": 6}'],
            call("scale_node_pool", cluster=P, pool="batch", auto_scale=True, min_nodes=1, max_nodes=6),
        ),
        (["scale workers --count +2"], call("scale_node_pool", cluster=P, pool="workers", count=4)),
        (
            ["resize workers to m5.xlarge --keep-name"],
            call("change_pool_tier", cluster=P, pool="workers", size="dks.m5.xlarge", keep_name=True),
        ),
        (["workers += 4"], call("scale_node_pool", cluster=P, pool="workers", count=6)),
        (["2x the workers pool"], call("scale_node_pool", cluster=P, pool="workers", count=4)),
        # names shortened
        (["set general on stg to 2 nodes"], call("scale_node_pool", cluster=S, pool="general", count=2)),
        (
            ["3f9c1a2e-7b4d-4c58-9e21-5d6f8a0b1c2d / batch-pool: raise max to 6"],
            call("scale_node_pool", cluster=P, pool="batch", auto_scale=True, min_nodes=1, max_nodes=6),
        ),
        # labels
        (
            ["drop the team label from workers but add owner=sre instead"],
            call("relabel_node_pool", cluster=P, pool="workers", labels={"owner": "sre"}),
        ),
        (
            ["make sure every pool on staging has the label env=staging"],
            call("relabel_node_pool", cluster=S, pool="general", labels={"env": "staging"}),
        ),
        (
            ["relabel workers team=payments tier=frontend", "oh and env=prod too"],
            call(
                "relabel_node_pool",
                cluster=P,
                pool="workers",
                labels={"team": "payments", "tier": "frontend", "env": "prod"},
            ),
        ),
        # follow-ups
        (
            ["scale batch to 3", "sorry, I meant the max"],
            call("scale_node_pool", cluster=P, pool="batch", auto_scale=True, min_nodes=1, max_nodes=3),
        ),
        (
            ["scale batch to 3", "I mean fixed at 3, without autoscaling"],
            call("scale_node_pool", cluster=P, pool="batch", auto_scale=False, count=3),
        ),
        (
            ["add a pool called etl on prod, m5 xlarge, 2 nodes", "make that autoscale 1-5 instead"],
            call(
                "add_node_pool", cluster=P, name="etl", size="dks.m5.xlarge", auto_scale=True, min_nodes=1, max_nodes=5
            ),
        ),
        (
            ["show nodes on staging", "replace that one"],
            call("replace_node", cluster=S, node_name="payments-staging-general-h2j6w"),
        ),
        (
            ["replace payments-prod-workers-abc12", "and the other one too"],
            call("replace_node", cluster=P, node_name="payments-prod-workers-k7m2p"),
        ),
        (["how many nodes in workers?", "ok add 2"], call("scale_node_pool", cluster=P, pool="workers", count=4)),
        (
            ["add pool cache with 2 r5.xlarge to payments-prod", "sorry, staging not prod"],
            call("add_node_pool", cluster=S, name="cache", size="dks.r5.xlarge", count=2),
        ),
        # asides, the only node, specs
        (
            ["we might retire batch next quarter. for now just bump workers to 3"],
            call("scale_node_pool", cluster=P, pool="workers", count=3),
        ),
        (
            ["the node in staging keeps crashing, can you replace it"],
            call("replace_node", cluster=S, node_name="payments-staging-general-h2j6w"),
        ),
        (
            ["upgrade staging to the 4 cpu / 8 gig ones"],
            call("change_pool_tier", cluster=S, pool="general", size="dks.c5.xlarge"),
        ),
        (["make workers one bigger"], call("scale_node_pool", cluster=P, pool="workers", count=3)),
        (
            ["launch in 20 min, need a pool 'checkout-burst' on prod, c5 2xl, autoscale 2 to 10"],
            call(
                "add_node_pool",
                cluster=P,
                name="checkout-burst",
                size="dks.c5.2xlarge",
                auto_scale=True,
                min_nodes=2,
                max_nodes=10,
            ),
        ),
        (
            ["workers autoscaling on, start at 3, max 8, min 2"],
            call("scale_node_pool", cluster=P, pool="workers", auto_scale=True, min_nodes=2, count=3, max_nodes=8),
        ),
        (["workers x3"], call("scale_node_pool", cluster=P, pool="workers", count=6)),
        (["what's the most machines batch is allowed to grow to?"], call("list_node_pools", cluster=P, pool="batch")),
        # reads
        (["could you compare prod and staging for me, how many nodes each one has?"], call("list_clusters")),
        (["what size machines does staging use?"], call("list_node_pools", cluster=S)),
        (["what is the difference between the workers and the batch pools?"], call("list_node_pools", cluster=P)),
        (["do we have a payments-dev cluster?"], call("list_clusters")),
        (["give me an overview of everything"], call("list_clusters")),
        (["status of the last change on staging"], call("get_cluster_operations", cluster=S)),
        (["labels on workers?"], call("list_node_pools", cluster=P, pool="workers")),
    ],
)
def test_a_request_is_read_as_meant(turns: list[str], expected: ToolCall) -> None:
    got = said(*turns)
    assert got == expected, (turns, got)


@pytest.mark.parametrize(
    ("turns", "words"),
    [
        (["create pool workers on payments-prod, c5 2xlarge, 2 nodes"], ("already exists", "R-ADD-02")),
        (["add pool 'idle' on staging, c5 large, 0 nodes"], ("R-ADD-05",)),
        (["add 2 r5 nodes to workers"], ("one machine tier", "dks.c5.xlarge")),
        (["move workers to m5"], ("Which machine tier",)),
        (["move batch to c5 4xlarge"], ("no machine tier dks.c5.4xlarge",)),
        (["can you scale workers on staging to 2? the staging workers, I mean, not prod"], ("no pool workers",)),
        (["check on operation op-7f21"], ("Which cluster",)),
        (["every node in general should be replaced"], ("node",)),
        (["scale workers to 4", "wait, do it on staging instead"], ("no pool workers",)),
        (["add np 'burst' to prod, c5.xlarge, autoscale up to 8"], ("R-ADD-06",)),
    ],
)
def test_a_request_a_rule_or_an_ambiguity_stops_is_asked_about(turns: list[str], words: tuple[str, ...]) -> None:
    got = said(*turns)
    assert asked(got, *words), (turns, got)


@pytest.mark.parametrize(
    "text",
    ["create a new cluster payments-dev", "give me the kubeconfig for staging", "how much did prod cost us last month"],
)
def test_out_of_scope_is_said_as_out_of_scope(text: str) -> None:
    got = said(text)
    assert isinstance(got, Reply) and got.kind in ("out_of_scope", "help"), got


def test_an_explicit_approval_is_still_refused_though_a_budget_approved_is_context() -> None:
    assert said("scale workers to 3 and approve it") == Reply("refuse", said("approve it").text)  # type: ignore[union-attr]
    assert trim("make workers twelve nodes, the CFO finally approved the budget", WORLD) == "make workers twelve nodes"


def test_the_safety_checks_read_the_words_as_typed_never_the_trimmed_reading() -> None:
    # trimming drops "is that possible?", but the message still asks; a polite clause holds the imperative
    text = "we'd like to upgrade workers to m5 xlarge. Is that possible?"
    assert asks(text) and imperative(text)
    assert "possible" not in trim(text, WORLD)
    assert asks("workers is at 4, right?") and not imperative("workers is at 4, right?")
    assert said("workers is at 4, right?") == call("list_node_pools", cluster=P, pool="workers")


CHATTER = ["hi Maya!", "thanks a lot!", "hope you are well.", "Is that possible?", "we have a launch this week."]
QUESTIONS = [
    "is workers at 4?",
    "how many nodes does batch have?",
    "what tier is general on?",
    "does batch autoscale?",
    "which nodes are in workers?",
    "is node payments-prod-workers-abc12 ready?",
    "are there 2 nodes in batch?",
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CHATTER), st.sampled_from(QUESTIONS), st.sampled_from(CHATTER), st.booleans())
def test_chatter_around_a_question_never_makes_it_a_change(before: str, question: str, after: str, both: bool) -> None:
    text = f"{before} {question} {after}" if both else f"{before} {question}"
    got = said(text)
    assert not (isinstance(got, ToolCall) and got.tool in CHANGES), (text, got)
    if isinstance(got, ToolCall):
        assert violations(text, WORLD, got.tool, got.arguments) == []


@pytest.mark.parametrize(
    "text",
    [
        "please scale workers to 4 and also the staging general pool to 2, thanks a lot!",
        "2 extra workers and one extra on general",
        "replace payments-prod-workers-abc12 and then scale batch to 3",
    ],
)
def test_two_changes_in_one_message_are_asked_for_one_at_a_time_never_mixed_into_one_card(text: str) -> None:
    got = said(text)
    assert asked(got, "two changes", "one card at a time"), (text, got)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "autoscale batch between 2 and 6",
            call("scale_node_pool", cluster=P, pool="batch", auto_scale=True, min_nodes=2, max_nodes=6),
        ),
        (
            "make a new node pool on staging named batch-jobs with 2 m5 xlarge and label team=payments",
            call(
                "add_node_pool",
                cluster=S,
                name="batch-jobs",
                size="dks.m5.xlarge",
                count=2,
                labels={"team": "payments"},
            ),
        ),
        ("is workers at 4 and batch at 2?", call("list_node_pools", cluster=P)),
    ],
)
def test_the_parts_of_one_request_joined_by_and_stay_one_request(text: str, expected: ToolCall) -> None:
    assert said(text) == expected


@pytest.mark.parametrize(
    "text", ["scale workers to 2.5 nodes", "add 1.5 nodes to batch", "let batch autoscale 1 to 4.5"]
)
def test_a_fraction_of_a_node_is_asked_about_never_rounded_into_a_card(text: str) -> None:
    assert asked(said(text), "whole number of nodes"), said(text)
