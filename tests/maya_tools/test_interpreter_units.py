"""Issue 26, point 10: a number's unit. A number said with a unit that does not count nodes ("16 GiB",
"8 vCPU", "4 cores", "$5", "5 dollars", "3 per hour", "50%", "200 ms", "10 minutes") is never a
count; memory or vCPU per node asks for a machine tier (change_pool_tier), never for that many nodes.
Numbers × units × sentences, then hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from maya_tools.chat.evaluation import load_cases
from maya_tools.chat.interpreter import Interpreter, Reply, ToolCall, World
from maya_tools.chat.interpreter.units import amounts, mark

WORLD = World.from_json(load_cases(name="eval_dev_outsider.json").world)
P = "payments-prod"
COUNTS = ("count", "min_nodes", "max_nodes")

# Each unit as people write it after (or before) a number.
UNITS = [
    "{n} GiB",
    "{n}GB",
    "{n} gb",
    "{n} gigs",
    "{n} MiB",
    "{n} vCPU",
    "{n} vcpus",
    "{n} cores",
    "{n} CPUs",
    "${n}",
    "$ {n}",
    "{n} dollars",
    "{n} bucks",
    "€{n}",
    "{n} per hour",
    "{n}/h",
    "{n}%",
    "{n} percent",
    "{n} ms",
    "{n} seconds",
    "{n} minutes",
    "{n} hours",
    "{n} days",
]
SENTENCES = [
    "scale workers to {q}",
    "give the workers {q} per node",
    "workers {q}",
    "set workers to {q}",
    "bump workers to {q}",
    "make general on staging {q}",
    "workers should be {q}",
    "workers -> {q}",
    "resize the workers pool to {q}",
    "never let batch go above {q}",
    "batch between 1 and {q}",
]


def said(text: str, *earlier: str) -> ToolCall | Reply:
    interpreter = Interpreter(WORLD)
    for turn in earlier:
        interpreter.interpret(turn)
    return interpreter.interpret(text)


def counts(got: ToolCall | Reply) -> set[object]:
    return {got.arguments.get(k) for k in COUNTS} - {None} if isinstance(got, ToolCall) else set()


@pytest.mark.parametrize("sentence", SENTENCES)
@pytest.mark.parametrize("unit", UNITS)
@pytest.mark.parametrize("n", [3, 5, 16, 32, 50])
def test_a_number_with_a_unit_that_does_not_count_nodes_is_never_a_count(sentence: str, unit: str, n: int) -> None:
    text = sentence.format(q=unit.format(n=n))
    assert n not in counts(said(text)), text


@pytest.mark.parametrize("sentence", SENTENCES)
def test_the_same_number_with_a_node_word_is_a_count(sentence: str) -> None:
    """The test above is about the unit: the same sentences with "5 nodes" do count 5."""
    assert 5 in counts(said(sentence.format(q="5 nodes"))), sentence


def test_memory_per_node_asks_which_tier_has_it_and_never_scales() -> None:
    got = said("give the workers 16 GiB per node")
    assert isinstance(got, Reply) and got.kind == "clarify"
    assert "change_pool_tier" in got.text and "not a node count" in got.text
    assert "dks.c5.2xlarge or dks.m5.xlarge" in got.text  # the two catalog tiers with 16 GiB
    assert "dks.c5.xlarge" in got.text  # what workers runs now


def test_its_answer_completes_the_tier_change() -> None:
    interpreter = Interpreter(WORLD)
    assert isinstance(interpreter.interpret("give the workers 16 GiB per node"), Reply)
    assert interpreter.interpret("m5 xlarge") == ToolCall(
        "change_pool_tier", {"cluster": P, "pool": "workers", "size": "dks.m5.xlarge"}
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("give workers 32 GB per node", ToolCall("change_pool_tier", {"cluster": P, "pool": "workers", "size": "dks.r5.xlarge"})),
        ("give workers 8 vcpu", ToolCall("change_pool_tier", {"cluster": P, "pool": "workers", "size": "dks.c5.2xlarge"})),
        ("workers need 32 GB of ram", "The tier with 32 GiB is dks.r5.xlarge: should workers move to it?"),
        ("give batch 16 GiB per node", "already runs dks.m5.xlarge, which has 16 GiB per node"),
        ("give workers 64 GB per node", "No machine tier in the catalog has 64 GiB per node"),
        ("scale workers to 4 nodes with 16 GiB each", "Do you mean 4 nodes of dks.c5.xlarge"),
        ("scale workers to 4 nodes, 4 cores each", ToolCall("scale_node_pool", {"cluster": P, "pool": "workers", "count": 4})),
        ("increase workers by 50%", ToolCall("scale_node_pool", {"cluster": P, "pool": "workers", "count": 3})),
        ("latency is 200 ms on workers, add 2 nodes", ToolCall("scale_node_pool", {"cluster": P, "pool": "workers", "count": 4})),
        ("what tiers have 16 gb of ram", ToolCall("list_machine_tiers", {})),
        ("workers cost $5 per hour, is that right?", ToolCall("list_machine_tiers", {})),  # the price is the catalog's
    ],
)
def test_an_amount_names_a_tier_or_is_asked_about(text: str, expected: ToolCall | str) -> None:
    """One catalog tier said with a verb or "per node" is that tier's card; without, or with two, it is asked."""
    got = said(text)
    if isinstance(expected, ToolCall):
        assert got == expected
    else:
        assert isinstance(got, Reply) and expected in got.text, got


def test_an_amount_given_as_the_answer_to_how_many_is_not_the_count() -> None:
    interpreter = Interpreter(WORLD)
    assert isinstance(interpreter.interpret("scale workers"), Reply)
    assert 16 not in counts(interpreter.interpret("16 GiB"))


@pytest.mark.parametrize(
    ("said_", "marked"),
    [
        ("16 gib per node", "_16gib per node"),
        ("$5 per hour", "_5usd per hour"),
        ("50%", "_50pct"),
        ("5 more cores", "_5vcpu more cores"),
        ("1 min 4 max", "1 min 4 max"),  # "min" alone is a floor, not minutes
        ("4 nodes", "4 nodes"),
        ("c5 2xl", "c5 2xl"),
    ],
)
def test_mark_glues_an_amount_to_its_unit_and_leaves_counts_alone(said_: str, marked: str) -> None:
    assert " ".join(mark(said_).split()) == marked


def test_amounts_reads_the_values_back() -> None:
    assert amounts(mark("16.5 GB and 4 cores"), "gib") == [16.5]
    assert amounts(mark("16.5 GB and 4 cores"), "vcpu") == [4.0]


def test_the_final_guard_stops_a_count_said_only_as_an_amount(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the reader proposes: a count that the words give only with a unit is not sent."""
    interpreter = Interpreter(WORLD)
    monkeypatch.setattr(
        interpreter, "_interpret", lambda text: ToolCall("scale_node_pool", {"cluster": P, "pool": "workers", "count": 16})
    )
    got = interpreter.interpret("give the workers 16 GiB per node")
    assert isinstance(got, Reply) and "you said 16 as an amount (16 GiB)" in got.text
    # the same count said as a count passes, and so does one worked out from a relative change
    assert interpreter.interpret("workers to 16 nodes, 16 GiB each") == ToolCall(
        "scale_node_pool", {"cluster": P, "pool": "workers", "count": 16}
    )
    relative = ToolCall("scale_node_pool", {"cluster": P, "pool": "workers", "count": 3}, relative=(2, 3))
    monkeypatch.setattr(interpreter, "_interpret", lambda text: relative)
    assert interpreter.interpret("increase workers by 3%") is relative


# --- generated sentences ----------------------------------------------------------------------

amount_sentences = st.builds(
    lambda sentence, unit, n, opener: (opener + sentence.format(q=unit.format(n=n)), n),
    st.sampled_from(SENTENCES),
    st.sampled_from(UNITS),
    st.integers(min_value=3, max_value=200),  # the listed counts (1, 2) a turn-off keeps are left out
    st.sampled_from(["", "please ", "hey, ", "can you "]),
)


@settings(max_examples=400, deadline=None)
@given(amount_sentences)
def test_no_count_argument_is_ever_a_number_said_with_a_non_count_unit(case: tuple[str, int]) -> None:
    text, n = case
    got = said(text)
    assert n not in counts(got), (text, got)
