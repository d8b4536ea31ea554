"""What the interpreter says when it calls no tool: help, questions and refusals."""

from __future__ import annotations

from typing import NamedTuple

EXAMPLES = (
    "show clusters",
    "list pools on payments-prod",
    "list nodes on payments-prod (in pool workers)",
    "scale workers on payments-prod to 4",
    "turn on autoscaling for workers on payments-prod between 2 and 6",
    "turn off autoscaling for workers on payments-prod",
    "add a pool named batch on payments-prod with one dks.m5.xlarge",
    "remove pool batch from payments-prod",
    "replace node payments-prod-workers-abc12 on payments-prod",
    "relabel pool workers on payments-prod with team=payments",
)

HELP = (
    "I am Maya's offline interpreter (no model is connected), so I understand only these requests:\n"
    + "\n".join(f"  • {example}" for example in EXAMPLES)
    + "\nAlso: show cluster Y (status, capacity), show operations on Y, list machine tiers, show card ID. "
    "Words can come in any order, names may be shortened (prod) or mistyped, and a follow-up can say "
    "'it', 'that pool' or 'the same cluster'.\n"
    "Every change shows you a confirmation card first; only your y at its prompt makes it happen."
)
NOT_UNDERSTOOD = "I did not understand that as one of my requests. Here is what I can do.\n"


def not_understood(understood: tuple[str, str, str | None, list[str]]) -> str:
    """What was understood, then two or three sentences with those names that would work."""
    cluster, pool, node, parts = understood
    said = f"I understood {', '.join(parts)}, but not what to do with it." if parts else "I did not understand that."
    examples = [f"list nodes in {pool} on {cluster}", f"scale {pool} on {cluster} to 3"]
    examples.append(f"replace node {node}" if node else f"show cluster {cluster}")
    return f"{said} Requests that would work: " + "; ".join(f"'{e}'" for e in examples) + ". Here is what I can do.\n"


EXAMPLE_OF = {
    "scale": "scale workers on payments-prod to 4",
    "autoscale_on": "turn on autoscaling for workers on payments-prod between 2 and 6",
    "autoscale_off": "turn off autoscaling for workers on payments-prod",
    "add": "add a pool named batch on payments-prod with one dks.m5.xlarge",
    "remove": "remove pool batch from payments-prod",
    "replace": "replace node payments-prod-workers-abc12 on payments-prod",
    "relabel": "relabel pool workers on payments-prod with team=payments",
    "list_pools": "list pools on payments-prod",
    "list_nodes": "list nodes on payments-prod",
    "get_cluster": "show cluster payments-prod",
    "operations": "show operations on payments-prod",
}

STRAY_ANSWER = (
    "No card is waiting for an answer, so that changed nothing. A card asks its own [y/N] question "
    "right below it when it is shown; to make a change, ask for it (for example: scale workers on "
    "payments-prod to 4) and answer the card's question."
)
APPROVE = (
    "I cannot approve a card, and nothing you or I type in this conversation can: a card is approved "
    "only by you, answering y at the card's own prompt when it is shown. Ask for the change again "
    "and answer that prompt."
)
EVERYTHING = (
    "I will not do that: I change one node pool or one node at a time, each after you approve its own "
    "card, and I cannot delete clusters. Nothing was changed. To remove a pool, say: remove pool X from Y "
    "(a cluster keeps at least one pool, R-DEL-01)."
)
NEW_CLUSTER = (
    "Creating or deleting clusters is not something maya-tools does: it changes node pools and nodes "
    "of existing clusters. Use the Door console for clusters."
)


def tier_change(what: str, size: str) -> str:
    return (
        f"A pool's machine tier cannot be changed (R-PATCH-10), so I cannot move {what} to {size}. Instead: "
        f"add a new pool with {size} (add a pool named X on Y with N {size}), wait until it is up, then remove "
        "the old pool."
    )


def too_many(count: int, limit: int) -> str:
    return (
        f"A pool holds 0–{limit} workers (R-PATCH-06, R-ADD-04), so I cannot ask for {count}. Nothing was "
        f"changed; ask again with a count up to {limit}."
    )


def one_of(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)


def describe(call: object) -> str:
    """A call in words, for "I read that as ..."."""
    tool = getattr(call, "tool", "")
    args: dict[str, object] = getattr(call, "arguments", {})
    where = f" on {args.get('cluster')}" if args.get("cluster") else ""
    if tool == "remove_node_pool":
        return f"removing the whole pool {args.get('pool')}{where}"
    if tool == "replace_node":
        return f"replacing node {args.get('node_name')}{where}"
    if tool == "scale_node_pool":
        return f"a change of pool {args.get('pool')}{where}"
    return f"{tool}{where}"


def examples_for(cluster: str, pool: str) -> str:
    """Two or three sentences that would work, with the names the person is talking about."""
    on = f" on {cluster}" if cluster else ""
    return (
        f"Say, for example: 'scale {pool}{on} to 3', 'remove 1 node from {pool}{on}', or 'remove pool {pool}"
        f" from {cluster or 'CLUSTER'}' if you mean the whole pool."
    )


REBOOT = (
    "I cannot reboot or restart a node; I can replace it (Door drains it and adds a fresh one, the pool "
    "keeps its count, R-RNODE-02). Say, for example: 'replace node payments-prod-workers-abc12', or "
    "'list nodes on payments-prod' to see them."
)


def already_fixed(pool: str, cluster: str, count: int) -> str:
    return (
        f"Pool {pool} on {cluster} does not autoscale: it has a fixed {count} node{'' if count == 1 else 's'}, so there is nothing to turn "
        f"off. Do you mean another count ('scale {pool} on {cluster} to {count + 1}') or autoscaling with bounds "
        f"('let {pool} on {cluster} autoscale between 1 and {count + 2}')?"
    )


def other_tier(pool: str, cluster: str, size: str, other: str) -> str:
    return (
        f"Pool {pool} on {cluster} runs {size}, and a pool has one machine tier, so it cannot get {other} nodes. "
        f"Do you mean more {size} nodes ('scale {pool} on {cluster} to N'), a new pool ('add a pool named X on "
        f"{cluster} with 2 {other}'), or moving {pool} to another tier ('change {pool} to {other}')?"
    )


def one_at_a_time(first: str, second: str) -> str:
    return (
        f"That asks for two changes, '{first}' and '{second}', and I make one card at a time, so I changed nothing. "
        f"Send them one by one: first '{first}', then '{second}'."
    )


def fraction(said: str, whole: int) -> str:
    return (
        f"A pool has a whole number of nodes, so I cannot ask for {said}, and I changed nothing. Do you mean "
        f"{whole} or {whole + 1}?"
    )


def zero_new(name: str) -> str:
    return (
        f"A new pool without autoscaling starts with at least 1 node (R-ADD-05), so pool {name} cannot start with 0. "
        f"How many nodes should it have, or between how many should it autoscale (for example: between 0 and 3)?"
    )


def zero_fixed(pool: str, cluster: str) -> str:
    return (
        f"Pool {pool} on {cluster} does not autoscale, and count 0 needs autoscaling on (R-PATCH-04, R-ADD-05). "
        f"Nothing was changed. Turn autoscaling on with bounds from 0 ('let {pool} on {cluster} autoscale between "
        f"0 and 3'), say a count from 1, or remove the pool ('remove pool {pool} from {cluster}')."
    )


def below_one(pool: str, cluster: str, now: int | None, count: int) -> str:
    return (
        f"That would leave pool {pool} on {cluster} with {count} nodes (it has {now}); a pool without autoscaling "
        f"keeps at least 1 (R-ADD-05, R-PATCH-06). Nothing was changed: say a count from 1, remove the pool "
        f"('remove pool {pool} from {cluster}'), or turn autoscaling on with a floor of 0."
    )


def last_pool(pool: str, cluster: str) -> str:
    return (
        f"Pool {pool} is the last pool of {cluster}, and a cluster keeps at least one pool (R-DEL-01), so I "
        f"will not remove it. Nothing was changed: add another pool first, or scale {pool} down instead."
    )


def replace_examples(node: str, cluster: str) -> str:
    return (
        f"Say 'replace node {node}' to drain it and add a fresh one (the pool keeps its count, R-RNODE-02), "
        f"'list nodes on {cluster or 'CLUSTER'}' to see them, or 'scale POOL to N' to change the count."
    )


def unknown_tier(size: str, tiers: tuple[str, ...]) -> str:
    return f"There is no machine tier {size} in the catalog (R-ADD-03). Which one do you mean: {one_of(tiers)}?"


def bad_name(name: str | None) -> str:
    return (
        f"A pool's name is a DNS label: lowercase letters, digits and '-', up to 63 characters (R-ADD-01), so "
        f"'{name}' cannot be one. What should the new pool be called (for example: {str(name).lower().replace('_', '-')})?"
    )


def fixed_or_bounds(pool: str, cluster: str, low: int | None, high: int | None, count: int) -> str:
    return (
        f"Pool {pool} on {cluster} autoscales between {low} and {high}, so it has no fixed count. Do you mean "
        f"'turn off autoscaling for {pool} at {count}' (a fixed {count}), or new bounds such as "
        f"'let {pool} autoscale between {low} and {max(count, high or count)}'?"
    )


class Amount(NamedTuple):
    """Memory or vCPU said per node: as said ("16 GiB"), the catalog tiers that have it, and all tiers."""

    said: str
    matching: tuple[str, ...]
    tiers: tuple[str, ...]


def tier_for_amount(pool: str, cluster: str, now: str | None, amount: Amount) -> str:
    said, matching = amount.said, amount.matching
    if not matching:
        return (
            f"No machine tier in the catalog has {said} per node, so I changed nothing. The tiers are "
            f"{one_of(amount.tiers)}: which one should pool {pool} on {cluster} move to (change_pool_tier)?"
        )
    if now in matching:
        return (
            f"Pool {pool} on {cluster} already runs {now}, which has {said} per node, so nothing needs to change. "
            f"Do you mean another tier, or more nodes ('scale {pool} on {cluster} to N')?"
        )
    runs = f" (it runs {now})" if now else ""
    if len(matching) > 1:
        which = f"The tiers with {said} are {one_of(matching)}: which one should {pool} move to?"
    else:
        which = f"The tier with {said} is {matching[0]}: should {pool} move to it?"
    return (
        f"A node's memory and vCPU come with its machine tier, so {said} per node means moving pool {pool} on "
        f"{cluster}{runs} to another tier (change_pool_tier), not a node count; I changed nothing. {which} "
        f"Say, for example: change {pool} to {matching[0]}."
    )


def amount_with_count(pool: str, cluster: str, now: str, said: str, matching: tuple[str, ...], count: int) -> str:
    to = f"'change {pool} to {matching[0]}'" if matching else "'list machine tiers' to pick one"
    return (
        f"Pool {pool} on {cluster} runs {now}, which does not have {said} per node, and a pool has one machine tier, "
        f"so I changed nothing. Do you mean {count} nodes of {now} ('scale {pool} on {cluster} to {count}'), or "
        f"moving {pool} to a tier with {said} ({to})?"
    )


def called_off(dropped: tuple[str, ...], before: bool) -> str:
    """What the person called off, said back: no card is made of it."""
    said = "; ".join(f"'{_cap(d)}'" for d in dropped) or "'that'"
    if before:  # "scale workers to 3. actually, cancel that"
        return (
            f"All right: you called off what you asked before {said}, so I am not proposing any change and no card "
            "was made. A change you approved earlier is not undone by this ('show operations on CLUSTER' shows what "
            "is running). Say what you want instead, if anything."
        )
    return (
        f"All right: you called off {said}, so I am not proposing any change and no card was made. "
        "Say what you want instead, if anything."
    )


def _cap(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def not_a_count(value: int, amount: str, what: str) -> str:
    return (
        f"I read {what} with {value} as a count, but you said {value} as an amount ({amount}), not a number of "
        "nodes, so I changed nothing. How many nodes do you mean? For memory or vCPU per node, say which tier "
        "('list machine tiers' shows them)."
    )
