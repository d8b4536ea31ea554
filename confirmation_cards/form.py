"""The short form message: the card as a plain form renderer shows it, in at most ``FORM_MAX`` characters.

A form elicitation is read at a glance in a small dialog (VS Code, Claude Code, Cursor), which shows
plain text: so no code fences and no JSON body here. It says what changes, on which cluster, the
capacity and price change, every warning whole, and names the card, whose exact request and digest
stay in the full card (``get_card``, the approval page, the card view).

It keeps to its room by saying less elsewhere, never by cutting or counting a warning (each is at
most ``WARNING_MAX`` characters, ``confirmation_cards.warnings``) or cutting a name: the defaults a
new pool takes get no line, an unchanged capacity is said once, and a map of labels shows fewer
entries (then how many more) until it fits. ``tests/confirmation_cards/test_warnings_whole.py``
renders every action with every warning the planner makes, with the longest names, within ``FORM_MAX``.

The message is a pure function of the card's planned fields (never its status or the time), so the
same card renders the same question on every round of the 2026-07-28 flow.
"""

from __future__ import annotations

from confirmation_cards.actions import ACTIONS
from confirmation_cards.models import Card
from confirmation_cards.render import amount, change_line, environment, money, name_text, quoted, warning_text

FORM_MAX = 900

# The room a map of labels or tags may take in one line, tried in order until the message fits.
MAP_BYTES = (240, 120, 0)


# A new pool's autoscaling is said on one line; its root volume comes from its tier (R-POOL-04) and
# is in the capacity line.
NEW_POOL_FOLDED = ("auto_scale", "min_nodes", "max_nodes", "root_volume_size_gib")


def _changes(card: Card, map_bytes: int) -> list[str]:
    """The diff lines the form shows: none for a plan (its line says the tier, a warning the new name)."""
    if card.steps:
        return []
    if card.action == "remove_node_pool":  # one line: what goes, and that it is deleting (R-DEL-02)
        was = {c.field: c.before for c in card.diff}
        scaling = f", autoscaling {was.get('min_nodes')} to {was.get('max_nodes')}" if was.get("auto_scale") else ""
        return [f"pool: {quoted(name_text(was.get('size')))} × {was.get('count')}{scaling} -> deleting"]
    new = card.action == "add_node_pool"
    lines = [
        line
        for change in card.diff
        if not (new and change.field in NEW_POOL_FOLDED) and (line := change_line(change, map_bytes=map_bytes))
    ]
    bounds = {c.field: c.after for c in card.diff}
    if new and bounds.get("auto_scale") is True:
        lines.insert(min(2, len(lines)), f"autoscaling: {bounds.get('min_nodes')} to {bounds.get('max_nodes')} workers")
    return lines


def _capacity(card: Card) -> str:
    before, after = card.capacity_before, card.capacity_after
    if before == after:
        return (
            f"{amount(after.total_vcpu)} vCPU, {amount(after.total_memory_gib)} GiB RAM, "
            f"{amount(after.total_volume_gib)} GiB disk (unchanged)"
        )
    return (
        f"{amount(before.total_vcpu)} -> {amount(after.total_vcpu)} vCPU, "
        f"{amount(before.total_memory_gib)} -> {amount(after.total_memory_gib)} GiB RAM, "
        f"{amount(before.total_volume_gib)} -> {amount(after.total_volume_gib)} GiB disk"
    )


def _price(card: Card) -> str:
    if card.price_before == card.price_after and card.price_peak is None:
        return f"{money(card.price_after)} (unchanged)"
    said = f"{money(card.price_before)} -> {money(card.price_after)}"
    if card.price_peak is not None:
        said += f", {money(card.price_peak)} at the peak"
    return said


def _plan(card: Card) -> str:
    """A plan card's steps on one line: what one approval runs, in order, naming a new pool once."""
    if not card.steps:
        return ""
    tier = name_text(card.steps[0].body.get("size"))
    if len(card.steps) < 4:
        steps = f"add the new pool in {tier}, wait until it runs, remove this one"
    else:
        new = quoted(name_text(card.steps[0].pool))
        steps = f"add {new} in {tier}, wait, remove this pool, add it back, wait, remove the temporary one"
    return f"Plan of {len(card.steps)} steps, one approval: {steps}"


def _render(card: Card, changes: list[str], changes_left: int, closing: bool, pointer: bool = False) -> str:
    return (
        environment()
        .get_template("form.txt.j2")
        .render(
            card=card,
            title=f"{ACTIONS[card.action].title} {quoted(name_text(card.target))}",
            cluster=quoted(name_text(card.cluster_name)),
            plan=_plan(card),
            changes=changes,
            changes_left=changes_left,
            capacity=_capacity(card),
            price=_price(card),
            warnings=[warning_text(w) for w in card.warnings],
            closing=closing,
            pointer=pointer,
            whole="get_card" if closing else "the card in `rendered`",
        )
        .rstrip("\n")
    )


def form_message(card: Card, room: int = FORM_MAX, *, closing: bool = True) -> str:
    """The card in at most ``room`` characters of plain text: every warning whole, every name as the
    card shows it; maps of labels shorter and shorter until it fits (said in words where the whole card
    is, when there is room), then, with the longest names and maps, the last changes left out and counted.

    ``closing``: end with the card's id and where the whole card is (not wanted in ``get_card``)."""
    text = ""
    for map_bytes in MAP_BYTES:
        lines = _changes(card, map_bytes)
        for pointer in (True, False):
            text = _render(card, lines, 0, closing, pointer)
            if len(text) <= room:
                return text
    while lines:
        lines.pop()
        text = _render(card, lines, len(_changes(card, 0)) - len(lines), closing)
        if len(text) <= room:
            return text
    return text
