"""Why the reference backend refuses a request.

    Refusal                 any answer that is not a success: status, rule, title, detail, field errors
    └── FaultInjected       an answer chosen by an admin-plane fault rule, not by a rule of the API

The app renders every ``Refusal`` as ``application/problem+json`` (``models.Problem``). A refusal is
built from the ``rules.Violation`` objects of ``backend_client.rules`` whenever a rule applies, so the
backend names the same rule, field and fix as the client and the cards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from backend_client.models import FieldError
from backend_client.rules import Violation

PROBLEM_BASE = "https://door.test/problems/"

_TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    402: "Payment required",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Request body too large",
    415: "Unsupported media type",
    422: "Unprocessable request",
    500: "Internal server error",
    503: "Service unavailable",
}

_KINDS = {
    400: "bad-request",
    401: "unauthorized",
    402: "payment-required",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    409: "conflict",
    413: "payload-too-large",
    415: "unsupported-media-type",
    422: "unprocessable",
    500: "internal",
    503: "unavailable",
}


def title_for(status: int) -> str:
    return _TITLES.get(status, "Error")


@dataclass(eq=False)  # an exception compares and hashes by identity
class Refusal(Exception):
    """A request the backend answers with an error status and a problem body."""

    status: int
    detail: str
    rule: str | None = None
    errors: Sequence[FieldError] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    title: str | None = None

    def __post_init__(self) -> None:
        super().__init__(self.detail)

    @property
    def type(self) -> str:
        return PROBLEM_BASE + (self.rule or _KINDS.get(self.status, "error"))

    @classmethod
    def of(cls, violations: Sequence[Violation]) -> Refusal:
        """The refusal for one or more violations: the first one's status and rule, every field listed."""
        first = violations[0]
        errors = [
            FieldError(field=v.field or "body", message=f"{v.message}. {v.fix}", rule=v.rule)
            for v in violations
            if v.status == 422
        ]
        detail = "; ".join(v.explain() for v in violations)
        return cls(first.status, detail, rule=first.rule, errors=errors)


class FaultInjected(Refusal):
    """An answer an admin-plane fault rule replaced or pre-empted."""
