"""Errors of the card layer.

Exception
├── PreflightError   a planned request Door would refuse (or that would change nothing): no card
└── KeyError
    └── CardNotFound an approval or decline named a card the store does not hold
"""

from __future__ import annotations

import re

from backend_client.errors import DoorStatusError
from backend_client.rules import Violation

# A Violation's status is the code Door would answer; the planner also refuses requests Door would
# accept but that make no sense as a card (a no-op, the wrong planner). Those carry this status.
NOT_A_BACKEND_REFUSAL = 0


class PreflightError(Exception):
    """A request the planner refused before making a card; ``str()`` names the rule, the field and the fix."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(violation.explain())
        self.violation = violation

    @property
    def rule(self) -> str:
        return self.violation.rule


class CardNotFound(KeyError):
    """No card has that id (it may never have existed: ids are unguessable)."""

    def __init__(self, card_id: str) -> None:
        super().__init__(card_id)
        self.card_id = card_id

    def __str__(self) -> str:
        return f"no confirmation card {self.card_id!r}"


def refusal_from(error: DoorStatusError) -> PreflightError:
    """A read Door refused (403 non-member, 404 unknown cluster, …) as a preflight refusal."""
    field = error.problem.errors[0].field if error.problem.errors else None
    message = (error.problem.detail or error.problem.title).strip()
    fix = error.advice()
    # Door's detail may already be the rule's own explanation, "R-AUTH-01 (field): what. Fix.": then
    # the rule prefix would be said twice and the fix is Door's own, so neither is repeated.
    prefix = re.match(rf"{re.escape(error.rule)}(?:\s*\((?P<field>[^)]*)\))?:\s*", message) if error.rule else None
    if prefix:
        field = prefix.group("field") or field
        what, _, said_fix = message[prefix.end() :].partition(". ")
        message, fix = what, said_fix.strip() or fix
    return PreflightError(
        Violation(error.rule or f"HTTP-{error.status_code}", error.status_code, field, message.rstrip("."), fix)
    )
