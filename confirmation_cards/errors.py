"""Errors of the card layer.

Exception
├── PreflightError   a planned request Door would refuse (or that would change nothing): no card
└── KeyError
    └── CardNotFound an approval or decline named a card the store does not hold
"""

from __future__ import annotations

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
