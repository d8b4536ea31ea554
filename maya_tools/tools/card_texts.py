"""What ``get_card``, the change tools and ``decide_card`` say in ``content``: a few lines a person
reads at once (the status, whether Door changed anything, the message, the operation id, the card).

The data stays in ``structuredContent``, as each tool's output schema says; Door's strings and the
card's names pass the card renderers' helpers (``clean_text``, ``safe_text``) on their way here.
"""

from __future__ import annotations

from typing import Any, Literal

from mcp_types import CallToolResult

from confirmation_cards import Card, CardStatus
from confirmation_cards.actions import ACTIONS
from confirmation_cards.approvals import policy_lines
from confirmation_cards.form import form_message
from confirmation_cards.models import AuditEvent
from confirmation_cards.render import MESSAGE_LIMIT, clean_text, code, environment, quoted, safe_text, when
from maya_tools.channels.form import ChangeResult
from maya_tools.tools.results import answer

# Our own messages (no channel, the approval page) run to about 500 characters; Door's are cut.
SAID_LIMIT = 1_000
# get_card's summary of what the card changes: more room than the form, still a glance.
CARD_SUMMARY = 1_200
AUDIT_SHOWN = 5

_DOOR = {
    True: "Door applied the change",
    False: "nothing was changed",
    "unknown": "Door may or may not have applied it",
}


def headline(card: Card) -> str:
    return (
        f"Card {code(card.id)}: {ACTIONS[card.action].title} {quoted(safe_text(card.target))} "
        f"on cluster {quoted(safe_text(card.cluster_name))}"
    )


def outcome_text(status: CardStatus, changed: bool | Literal["unknown"], message: str, operation_id: str | None) -> str:
    """The first lines of every change answer: status, whether Door changed anything, what happened."""
    lines = [f"{status.value}: {_DOOR[changed]}.", clean_text(message, SAID_LIMIT)]
    if operation_id is not None:
        lines.append(f"Operation {clean_text(operation_id)}.")
    return "\n".join(line for line in lines if line)


def change_text(result: ChangeResult) -> str:
    """A change tool's answer; a card still pending says what it would do, as the form does."""
    card = result.card
    said = outcome_text(result.status, result.changed, result.message, result.operation_id)
    if result.status is CardStatus.PENDING:
        return said + "\n" + form_message(card, CARD_SUMMARY)
    return said + "\n" + headline(card) + "."


def change_answer(result: ChangeResult) -> CallToolResult:
    return answer(result, change_text(result))


def _audit_line(event: AuditEvent) -> str:
    line = f"- {when(event.at)} {event.event}"
    if event.by:
        line += f" by {clean_text(event.by)}"
    if event.operation_id:
        line += f", operation {clean_text(event.operation_id)}"
    return line


def card_text(card: Card, audit: list[AuditEvent]) -> str:
    """``get_card``: the card's status in words, what it changes, its request and digest, its result
    and its latest audit events. The whole card, rendered, is in ``structuredContent``."""
    words: Any = environment().get_template("_words.j2").module
    lines = [
        f"{headline(card)}: {card.status.value}, {words.status(card)}.",
        f"Expires {when(card.expires_at)}.",
        form_message(card, CARD_SUMMARY, closing=False).split("\n", 1)[-1],
        f"Request: {card.method} {code(card.path)}, body digest (sha256) {card.body_digest}.",
    ]
    if card.policy is not None:
        lines.append(f"Team policy (rules {', '.join(clean_text(r) for r in card.policy.rules)}):")
        lines += ["- " + clean_text(line, MESSAGE_LIMIT) for line in policy_lines(card)]
    if card.steps:
        lines.append(f"Plan of {len(card.steps)} steps, approved once:")
        lines += ["- " + str(words.step(step)) for step in card.steps]
    if card.result is not None:
        lines.append("Result: " + words.result(card))
    if audit:
        lines.append(f"Audit ({len(audit)} {'event' if len(audit) == 1 else 'events'}, latest last):")
        lines += [_audit_line(event) for event in audit[-AUDIT_SHOWN:]]
    lines.append("The whole card with its exact request body is in structuredContent (`rendered`, `card`).")
    return "\n".join(lines)
