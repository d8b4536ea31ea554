"""The offline interpreter: every documented phrasing and its variants, table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from maya_tools.chat.interpreter import EXAMPLES, HELP, NUMBER_WORDS, Reply, ToolCall, interpret, number

P = "payments-prod"
NODE = "payments-prod-workers-abc12"

CALLS: list[tuple[str, str, dict[str, Any]]] = [
    # the API page's three Maya examples
    ("Scale the workers pool on payments-prod to 4.", "scale_node_pool", {"cluster": P, "pool": "workers", "count": 4}),
    (
        "Add a node pool named batch on payments-prod with one dks.m5.xlarge.",
        "add_node_pool",
        {"cluster": P, "name": "batch", "size": "dks.m5.xlarge", "count": 1},
    ),
    (f"Replace node {NODE} on payments-prod.", "replace_node", {"cluster": P, "node_name": NODE}),
    # scale X on Y to N
    ("scale workers on payments-prod to 3", "scale_node_pool", {"cluster": P, "pool": "workers", "count": 3}),
    (
        "scale pool workers on payments-prod to five nodes",
        "scale_node_pool",
        {"cluster": P, "pool": "workers", "count": 5},
    ),
    (
        "Please resize the workers pool in payments-prod to 2 workers!",
        "scale_node_pool",
        {"cluster": P, "pool": "workers", "count": 2},
    ),
    (
        "can you scale down workers on payments-prod to one node?",
        "scale_node_pool",
        {"cluster": P, "pool": "workers", "count": 1},
    ),
    (
        "scale up the workers pool on cluster payments-prod to twelve",
        "scale_node_pool",
        {"cluster": P, "pool": "workers", "count": 12},
    ),
    ("scale workers to 6 on payments-prod", "scale_node_pool", {"cluster": P, "pool": "workers", "count": 6}),
    ("Maya, scale “workers” on `payments-prod` to 4", "scale_node_pool", {"cluster": P, "pool": "workers", "count": 4}),
    ("SCALE WORKERS ON PAYMENTS-PROD TO 4", "scale_node_pool", {"cluster": P, "pool": "workers", "count": 4}),
    ("scale workers on payments-prod to 0", "scale_node_pool", {"cluster": P, "pool": "workers", "count": 0}),
    # autoscaling on / off
    (
        "turn on autoscaling for workers on payments-prod between 2 and 6",
        "scale_node_pool",
        {"cluster": P, "pool": "workers", "auto_scale": True, "min_nodes": 2, "max_nodes": 6},
    ),
    (
        "Enable autoscaling for the workers pool on payments-prod from 1 to 8 nodes",
        "scale_node_pool",
        {"cluster": P, "pool": "workers", "auto_scale": True, "min_nodes": 1, "max_nodes": 8},
    ),
    (
        "autoscale workers on payments-prod between two and ten",
        "scale_node_pool",
        {"cluster": P, "pool": "workers", "auto_scale": True, "min_nodes": 2, "max_nodes": 10},
    ),
    (
        "turn on autoscaling on pool workers in payments-prod with a minimum of 3 and a maximum of 9",
        "scale_node_pool",
        {"cluster": P, "pool": "workers", "auto_scale": True, "min_nodes": 3, "max_nodes": 9},
    ),
    (
        "turn off autoscaling for workers on payments-prod",
        "scale_node_pool",
        {"cluster": P, "pool": "workers", "auto_scale": False},
    ),
    (
        "turn off autoscaling for workers on payments-prod at 3",
        "scale_node_pool",
        {"cluster": P, "pool": "workers", "auto_scale": False, "count": 3},
    ),
    (
        "disable autoscaling for the workers pool on payments-prod and keep it at 4 nodes",
        "scale_node_pool",
        {"cluster": P, "pool": "workers", "auto_scale": False, "count": 4},
    ),
    # add a pool named X on Y with N SIZE
    (
        "add a pool called gpu to payments-prod with 2x dks.r5.xlarge",
        "add_node_pool",
        {"cluster": P, "name": "gpu", "size": "dks.r5.xlarge", "count": 2},
    ),
    (
        "create a pool named spare on payments-prod with three nodes of dks.c5.large",
        "add_node_pool",
        {"cluster": P, "name": "spare", "size": "dks.c5.large", "count": 3},
    ),
    (
        "add a new node pool named etl on payments-prod with 2 dks.m5.large workers",
        "add_node_pool",
        {"cluster": P, "name": "etl", "size": "dks.m5.large", "count": 2},
    ),
    (
        "add pool batch on payments-prod with a single DKS.M5.XLARGE",
        "add_node_pool",
        {"cluster": P, "name": "batch", "size": "dks.m5.xlarge", "count": 1},
    ),
    # remove pool X from Y
    ("remove pool batch from payments-prod", "remove_node_pool", {"cluster": P, "pool": "batch"}),
    ("delete the batch pool from payments-prod", "remove_node_pool", {"cluster": P, "pool": "batch"}),
    ("drop node pool batch on payments-prod", "remove_node_pool", {"cluster": P, "pool": "batch"}),
    ("remove batch from payments-prod", "remove_node_pool", {"cluster": P, "pool": "batch"}),
    ("remove pool all-jobs from payments-prod", "remove_node_pool", {"cluster": P, "pool": "all-jobs"}),
    # replace node X on Y
    (f"recycle node {NODE} on payments-prod", "replace_node", {"cluster": P, "node_name": NODE}),
    (
        "change the workers pool on payments-prod to dks.c5.2xlarge",
        "change_pool_tier",
        {"cluster": P, "pool": "workers", "size": "dks.c5.2xlarge"},
    ),
    (f"replace the worker node {NODE} in payments-prod", "replace_node", {"cluster": P, "node_name": NODE}),
    # reads
    ("list pools on payments-prod", "list_node_pools", {"cluster": P}),
    ("show me the node pools of payments-prod", "list_node_pools", {"cluster": P}),
    ("which pools does payments-prod have", "list_node_pools", {"cluster": P}),
    ("list nodes on payments-prod", "list_nodes", {"cluster": P}),
    ("show the nodes of pool workers on payments-prod", "list_nodes", {"cluster": P, "pool": "workers"}),
    ("list nodes on payments-prod in pool workers", "list_nodes", {"cluster": P, "pool": "workers"}),
    ("show workers in payments-prod", "list_nodes", {"cluster": P}),
    ("show clusters", "list_clusters", {}),
    ("list my clusters", "list_clusters", {}),
    ("which clusters do I have?", "list_clusters", {}),
    ("show cluster payments-prod", "get_cluster", {"cluster": P}),
    ("show operations on payments-prod", "get_cluster_operations", {"cluster": P}),
    ("list machine tiers", "list_machine_tiers", {}),
    ("show card card_AbC123", "get_card", {"card_id": "card_AbC123"}),
    # relabel pool X on Y with k=v
    (
        "relabel pool workers on payments-prod with team=payments",
        "relabel_node_pool",
        {"cluster": P, "pool": "workers", "labels": {"team": "payments"}},
    ),
    (
        "relabel the workers pool on payments-prod with labels team=payments, env=prod",
        "relabel_node_pool",
        {"cluster": P, "pool": "workers", "labels": {"team": "payments", "env": "prod"}},
    ),
    (
        "tag pool workers on payments-prod with cost-center=42",
        "relabel_node_pool",
        {"cluster": P, "pool": "workers", "tags": {"cost-center": "42"}},
    ),
]


@pytest.mark.parametrize(("request_text", "tool", "arguments"), CALLS, ids=[c[0][:50] for c in CALLS])
def test_each_phrasing_maps_to_its_tool_and_arguments(request_text: str, tool: str, arguments: dict[str, Any]) -> None:
    assert interpret(request_text) == ToolCall(tool, arguments)


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_the_help_shows_is_understood(example: str) -> None:
    assert isinstance(interpret(example.replace(" (in pool workers)", "")), ToolCall)


@pytest.mark.parametrize(("word", "value"), sorted(NUMBER_WORDS.items()))
def test_counts_can_be_words(word: str, value: int) -> None:
    assert number(word) == value
    assert interpret(f"scale workers on payments-prod to {word}") == ToolCall(
        "scale_node_pool", {"cluster": P, "pool": "workers", "count": value}
    )


REPLIES: list[tuple[str, str, str]] = [
    ("what's the weather", "help", "I understand only these requests"),
    ("write me a poem about kubernetes", "help", "scale workers on payments-prod to 4"),
    ("", "help", "I understand only these requests"),
    ("help", "help", "I understand only these requests"),
    ("approve the card for me", "refuse", "only by you"),
    ("I already said yes, approve card card_abc123", "refuse", "only by you"),
    ("call scale_node_pool with confirm=true", "refuse", "only by you"),
    ("delete everything", "refuse", "one node pool or one node at a time"),
    ("delete cluster payments-prod", "refuse", "cannot delete clusters"),
    ("create a new cluster called analytics", "out_of_scope", "Door console"),
    # deleting a node is not replacing it (issue 22, property 2): say what would work
    (f"delete node {NODE} from payments-prod", "clarify", f"replace node {NODE}"),
    ("scale workers on payments-prod to 500", "refuse", "R-PATCH-06"),
    ("turn on autoscaling for workers on payments-prod between 2 and 300", "refuse", "R-PATCH-06"),
    ("turn off autoscaling for workers on payments-prod at 300", "refuse", "R-PATCH-06"),
    ("add a pool named big on payments-prod with 300 dks.m5.xlarge", "refuse", "R-ADD-04"),
    ("remove everything from payments-prod", "refuse", "one node pool or one node at a time"),
    ("remove all from payments-prod", "refuse", "one node pool or one node at a time"),
    ("delete all the pools on payments-prod", "refuse", "one node pool or one node at a time"),
    ("scale workers on payments-prod to 4 and approve it", "refuse", "only by you"),
    ("scale workers to 4", "clarify", "the cluster"),
    ("scale workers to 0", "clarify", "the cluster"),
    ("add a pool on payments-prod", "clarify", "add a pool named batch"),
    ("turn on autoscaling for workers on payments-prod", "clarify", "R-PATCH-05"),
    ("make it bigger", "clarify", "scale workers on payments-prod to 4"),
    ("remove the pool", "clarify", "remove pool batch from payments-prod"),
    # a y/N answer typed at the chat's prompt, with no card asking: it must not read as out of scope
    ("y", "clarify", "No card is waiting for an answer, so that changed nothing"),
    ("Yes.", "clarify", "No card is waiting for an answer"),
    ("n", "clarify", "No card is waiting for an answer"),
    ("no", "clarify", "No card is waiting for an answer"),
]


@pytest.mark.parametrize(("request_text", "kind", "says"), REPLIES, ids=[r[0][:40] or "empty" for r in REPLIES])
def test_requests_it_should_not_act_on_get_a_reply(request_text: str, kind: str, says: str) -> None:
    reply = interpret(request_text)
    assert isinstance(reply, Reply)
    assert reply.kind == kind
    assert says in reply.text


def test_the_help_names_what_it_understands() -> None:
    for form in (
        "scale",
        "autoscaling",
        "add a pool",
        "remove pool",
        "replace node",
        "list pools",
        "clusters",
        "relabel",
    ):
        assert form in HELP


@pytest.mark.parametrize(
    "cluster",
    [
        {"pools": {"workers": {}, "batch": {}}, "nodes": ["w-1", "b-1"]},
        {"pools": {"workers": {}, "batch": {}}, "nodes": {"workers": ["w-1"], "batch": ["b-1"]}},
        {"pools": {"workers": {"nodes": ["w-1"]}, "batch": {"nodes": ["b-1"]}}},
    ],
    ids=["list", "map-by-pool", "per-pool"],
)
def test_a_worlds_nodes_are_read_however_the_file_lists_them_and_pools_are_never_nodes(
    cluster: dict[str, object],
) -> None:
    from maya_tools.chat.interpreter.names import World

    world = World.from_json({"clusters": {"prod": cluster}})
    assert world.all_nodes("prod") == ("w-1", "b-1")
