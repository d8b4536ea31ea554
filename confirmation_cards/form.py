"""The short form message: the card as a plain form renderer shows it, in at most ``FORM_MAX`` characters.

A form elicitation is read at a glance in a small dialog (VS Code, Claude Code, Cursor), which shows
plain text: so no code fences and no JSON body here. It says what changes, on which cluster, the
capacity and price change and the warnings, and names the card, whose exact request and digest stay
in the full card (``get_card``, the approval page, the card view). Long names, many labels and many
warnings are abridged, tighter and tighter until it fits, and it says what it left out.

The message is a pure function of the card's planned fields (never its status or the time), so the
same card renders the same question on every round of the 2026-07-28 flow.
"""

from __future__ import annotations

from typing import Any

from confirmation_cards.actions import ACTIONS
from confirmation_cards.models import Card, CardWarning, FieldChange
from confirmation_cards.render import amount, environment, ident, quoted, safe_text, show

FORM_MAX = 600


# Tried in order until the parts that are always shown fit (title, capacity, price, card line).
NAME_LIMITS = (64, 32, 16, 8)
# Room kept for a diff line and a warning when choosing how long names may be.
RESERVED = 160
# The first diff lines come before any warning; the rest only after every warning that fits.
FIRST_CHANGES = 2
VALUE_LIMITS = (64, 32, 12)
WARNING_LIMITS = (200, 100, 50)
CUT = "… (cut to fit; get_card shows all of it)\n"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _value(value: Any, limit: int) -> str:
    """A diff value in words, at most about ``limit`` characters: maps show their first entries and
    how many more there are (``show`` for scalars, whose strings are escaped and quoted)."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        entries: list[str] = []
        used = 0
        for key, item in sorted(value.items()):
            entry = f"{quoted(safe_text(key, max(limit // 3, 4)))}: {_value(item, max(limit // 3, 4))}"
            if entries and used + len(entry) > limit:
                break
            entries.append(entry)
            used += len(entry) + 2
        left = len(value) - len(entries)
        return "{" + ", ".join(entries) + (f", … {left} more" if left else "") + "}"
    if isinstance(value, str):
        return quoted(safe_text(value, limit))
    return _cut(show(value), limit)


def _capacity(card: Card) -> str:
    before, after = card.capacity_before, card.capacity_after
    return (
        f"{amount(before.total_vcpu)} -> {amount(after.total_vcpu)} vCPU, "
        f"{amount(before.total_memory_gib)} -> {amount(after.total_memory_gib)} GiB memory, "
        f"{amount(before.total_volume_gib)} -> {amount(after.total_volume_gib)} GiB volume"
    )


def _change(change: FieldChange, limit: int) -> str:
    return f"{ident(change.field)}: {_value(change.before, limit)} -> {_value(change.after, limit)}"


def _warning(warning: CardWarning, limit: int) -> str:
    return safe_text(warning.message, limit) + (f" [{ident(warning.rule)}]" if warning.rule else "")


STEP_WORDS = {"add": "add", "wait": "wait", "remove": "remove"}
# A plan's step line takes most of a plan card's room: its names get the room kept for a warning elsewhere.
PLAN_RESERVED = 0


def _plan(card: Card, name: int) -> str:
    """A plan card's steps on one line: what one approval runs, in order."""
    if not card.steps:
        return ""
    steps = ", ".join(
        STEP_WORDS[s.kind]
        + (" until Running" if s.kind == "wait" and len(card.steps) < 4 else "")
        + ("" if s.kind == "wait" else f" {quoted(safe_text(s.pool, name))}")
        for s in card.steps
    )
    return f"Plan of {len(card.steps)} steps, one approval: {steps}"


def _render(card: Card, name: int, changes: list[str], warnings: list[str], closing: bool) -> str:
    return (
        environment().get_template("form.txt.j2")
        .render(
            card=card,
            title=f"{ACTIONS[card.action].title} {quoted(safe_text(card.target, name))}",
            cluster=quoted(safe_text(card.cluster_name, name)),
            plan=_plan(card, name),
            changes=changes,
            changes_left=len(card.diff) - len(changes),
            capacity=_capacity(card),
            warnings=warnings,
            warnings_left=len(card.warnings) - len(warnings),
            closing=closing,
            whole="get_card" if closing else "the card in `rendered`",
        )
        .rstrip("\n")
    )


def form_message(card: Card, room: int = FORM_MAX, *, closing: bool = True) -> str:
    """The card in at most ``room`` characters of plain text, abridged as little as it needs: names
    are cut until the fixed parts fit, then diff lines and warnings are added, each as long as fits.

    ``closing``: end with the card's id and where the whole card is (not wanted in ``get_card``)."""
    reserved = PLAN_RESERVED if card.steps else RESERVED
    name = next((n for n in NAME_LIMITS if len(_render(card, n, [], [], closing)) + reserved <= room), NAME_LIMITS[-1])
    changes: list[str] = []
    warnings: list[str] = []

    def fits() -> bool:
        return len(_render(card, name, changes, warnings, closing)) <= room

    def add(into: list[str], lines: list[str]) -> bool:
        for line in lines:
            into.append(line)
            if fits():
                return True
            into.pop()
        return False

    for change in card.diff[:FIRST_CHANGES]:
        if not add(changes, [_change(change, limit) for limit in VALUE_LIMITS]):
            break
    if len(changes) == min(len(card.diff), FIRST_CHANGES):
        for warning in card.warnings:
            if not add(warnings, [_warning(warning, limit) for limit in WARNING_LIMITS]):
                break
        if len(warnings) == len(card.warnings):
            for change in card.diff[FIRST_CHANGES:]:
                if not add(changes, [_change(change, limit) for limit in VALUE_LIMITS]):
                    break
    text = _render(card, name, changes, warnings, closing)
    if len(text) <= room:
        return text
    # Not reached for a card this package plans (tested): a last bound that keeps the card's id.
    head, _, last = text.rpartition("\n")
    return head[: max(room - len(last) - len(CUT), 0)] + CUT + last[:room]
