"""The warnings a card carries: what a careful operator would want to know before approving.

Each is one sentence written to be read whole, in every rendering (text, Markdown, the form, the
approval page, the card view), never cut and never counted. The sentence and its rule tag together
(``shown``) are at most ``WARNING_MAX`` characters however long Door's names are: a name in one is
``named`` (as Door wrote it, cut only beyond ``NAME_LIMIT`` characters, the cap every card applies
to Door's strings; a pool name, a DNS label, is at most 63). Numbers are at most 200 workers and
prices with two decimals. ``tests/confirmation_cards/test_warnings_whole.py`` renders every one.
"""

from __future__ import annotations

from backend_client import rules
from backend_client.models import NodeList, NodePool
from confirmation_cards.models import REQUIRED_ROLE, CardWarning
from confirmation_cards.render import NAME_LIMIT, one_line

WARNING_MAX = 140


def named(name: str) -> str:
    """A Door name inside a warning: one line, at most ``NAME_LIMIT`` characters."""
    return one_line(name, NAME_LIMIT)


def shown(warning: CardWarning) -> str:
    """The warning as every rendering writes it: its sentence, then its rule in brackets."""
    return warning.message + (f" [{warning.rule}]" if warning.rule else "")


def _workers(n: int) -> str:
    return f"{n} worker{'s' if n != 1 else ''}"


def labels_warning() -> CardWarning:
    return CardWarning(
        code="labels_not_node_labels",
        message="pool labels and tags are not Kubernetes node labels: Door keeps them on the pool, so they do "
        "not steer scheduling",
        rule="R-POOL-05",
    )


def autoscale_warning(pool: NodePool) -> CardWarning:
    return CardWarning(
        code="autoscale_may_shrink",
        message=f"with autoscaling from {pool.min_nodes} to {pool.max_nodes}, the pool may shrink to "
        f"{_workers(pool.min_nodes or 0)} on its own",
        rule="R-ADD-06",
    )


def unlisted_node_warning(nodes: NodeList) -> CardWarning:
    if nodes.cold or nodes.stale:
        why = "is not loaded yet" if nodes.cold else "is out of date"
        message = f"this node is not in the node list, which {why}; if it does not exist, the replacement fails"
    else:
        message = (
            "no node of this name is listed: Door accepts the request, but the replacement fails (check the node list)"
        )
    return CardWarning(code="node_unlisted", message=message, rule="R-RNODE-04")


def node_drained_warning(node_name: str) -> CardWarning:
    return CardWarning(
        code="node_drained",
        message=f"node {named(node_name)} is drained and deleted; Door adds a replacement",
        rule="R-RNODE-02",
    )


def last_ready_warning() -> CardWarning:
    return CardWarning(
        code="last_ready_node",
        message="this is its pool's last Ready node: the pool runs no workloads until the replacement is Ready",
        rule="R-RNODE-02",
    )


def scale_down_warning(before: int, after: int) -> CardWarning:
    return CardWarning(
        code="scale_down",
        message=f"going from {before} to {after} drains and removes {_workers(before - after)}, newest first; "
        "their workloads are rescheduled",
    )


def drain_warning(count: int, running: int | None, reason: str = "") -> CardWarning:
    """A pool removal: the workers it drains, counted from the node list when it is loaded."""
    if running is None:
        message = f"removing this pool drains and deletes all its workers: {count} by its declared count ({reason})"
    else:
        message = (
            f"removing this pool drains and deletes its {running} running worker{'s' if running != 1 else ''}; "
            "their workloads must fit on the other pools"
        )
    return CardWarning(code="drains_workers", message=message, rule="R-DEL-02")


def plan_drain_warning(count: int) -> CardWarning:
    """Step 3 of a tier change drains every worker of the old pool, once the new pool's are Running."""
    return CardWarning(
        code="drains_workers",
        message=f"step 3 drains and deletes the old pool's {_workers(count)} once the new pool runs",
        rule="R-DEL-02",
    )


def name_changes_warning(new_name: str) -> CardWarning:
    return CardWarning(
        code="name_changes",
        message=f"the pool is renamed {named(new_name)}; keeping its name takes 3 more steps",
    )


def credit_warning(added: float, credit: float) -> CardWarning:
    return CardWarning(
        code="credit_required",
        message=f"this adds {added:.2f} per hour; Door refuses it with 402 unless prepaid credit covers "
        f"{rules.CREDIT_HOURS} h of it: {credit:.2f}",
        rule="R-CREDIT-01",
    )


def plan_credit_warning(added: float, credit: float) -> CardWarning:
    return CardWarning(
        code="credit_required",
        message=f"the peak adds {added:.2f} per hour: without {credit:.2f} of prepaid credit, Door refuses step 1 "
        "with 402",
        rule="R-CREDIT-01",
    )


def role_warning() -> CardWarning:
    """R-AUTH-03, said whenever Door has not yet accepted a change from this caller in this organisation."""
    return CardWarning(
        code="role_needed",
        message=f"needs the {REQUIRED_ROLE} role: Door refuses a member with 403",
        rule="R-AUTH-03",
    )
