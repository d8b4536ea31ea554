"""Door's answers to an approved call, in the two readings the approval and the plans share: whether
an error proves nothing changed (DESIGN.md property 11), and a refusal said plainly."""

from __future__ import annotations

from backend_client._constants import KEY_IN_FLIGHT_RULES
from backend_client.errors import DoorConnectionError, DoorError, DoorStatusError
from confirmation_cards.models import CardResult


def proves_nothing_changed(error: DoorError) -> bool:
    """Door's answer shows the request was refused as a whole, so the change cannot have happened.

    A 4xx rule refusal does: the request is keyed by the card id, so a key Door had applied would
    have been replayed, not refused. A connection failure does only when no attempt was sent.
    """
    if isinstance(error, DoorStatusError):
        in_flight = error.status_code == 409 and error.rule in KEY_IN_FLIGHT_RULES
        return 400 <= error.status_code < 500 and error.status_code not in (408, 429) and not in_flight
    if isinstance(error, DoorConnectionError):
        return not error.request_sent and not error.reached_before
    return False


def explain(error: DoorError, *, before: bool) -> CardResult:
    """Door's refusal as a plain result: what happened, the rule, and what to do.

    Only called where nothing can have changed: a read before the call, or Door's refusal of the call.
    """
    if isinstance(error, DoorStatusError):
        what = "Door refused the change" if not before else "Door refused to show the target again"
        detail = (error.problem.detail or error.problem.title).rstrip(".")
        rule = f" ({error.rule})" if error.rule else ""
        return CardResult(
            status_code=error.status_code,
            rule=error.rule,
            request_id=error.request_id,
            message=f"{what} with {error.status_code}{rule}: {detail[:300]}. {error.advice()} Nothing was changed.",
        )
    return CardResult(
        message=f"Door could not be asked ({str(error)[:300]}). Nothing was changed; plan the change again."
    )
