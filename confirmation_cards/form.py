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
from confirmation_cards.render import amount, change_lines, environment, money, name_text, quoted, warning_text

FORM_MAX = 900

# The room a map of labels or tags may take in one line, tried in order until the message fits.
MAP_BYTES = (240, 120, 0)


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


def _render(card: Card, changes: list[str], changes_left: int, closing: bool) -> str:
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
            whole="get_card" if closing else "the card in `rendered`",
        )
        .rstrip("\n")
    )


def form_message(card: Card, room: int = FORM_MAX, *, closing: bool = True) -> str:
    """The card in at most ``room`` characters of plain text: every warning whole, every name as the
    card shows it; maps of labels shorter and shorter until it fits, then (never reached for a card
    this package plans, tested) the last changes left out and counted.

    ``closing``: end with the card's id and where the whole card is (not wanted in ``get_card``)."""
    text = ""
    for map_bytes in MAP_BYTES:
        # A plan's line says its new tier, and its warning the new name.
        lines = [] if card.steps else change_lines(card, map_bytes=map_bytes)
        text = _render(card, lines, 0, closing)
        if len(text) <= room:
            return text
    while lines:
        lines.pop()
        text = _render(card, lines, len(change_lines(card, map_bytes=0)) - len(lines), closing)
        if len(text) <= room:
            return text
    return text
