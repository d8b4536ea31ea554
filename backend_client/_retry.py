"""When to retry and how long to wait: pure functions over the constants in ``_constants``."""

from __future__ import annotations

import random
from datetime import datetime

from backend_client._constants import (
    FRESH_POLL_MAX,
    FRESH_POLL_MIN,
    FRESH_POLL_UNKNOWN,
    INITIAL_RETRY_DELAY,
    KEY_IN_FLIGHT_RULES,
    MAX_RETRY_AFTER,
    MAX_RETRY_DELAY,
    RETRY_JITTER,
    RETRYABLE_STATUSES,
)
from backend_client._http_dates import seconds_between
from backend_client.errors import DoorConnectionError, DoorError, DoorStatusError

REPLAY_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def replay_safe(method: str, idempotency_key: str | None) -> bool:
    """A request may be sent again when it cannot change anything twice: a read, or a keyed mutation."""
    return method.upper() in REPLAY_SAFE_METHODS or idempotency_key is not None


def is_retryable(error: DoorError, *, keyed: bool = False) -> bool:
    """Connection failures, timeouts and the statuses in ``RETRYABLE_STATUSES`` are worth another try;
    so is, for a ``keyed`` request, Door's ``409`` saying the first request with that key is in flight."""
    if isinstance(error, DoorConnectionError):
        return True
    if not isinstance(error, DoorStatusError):
        return False
    if keyed and error.status_code == 409 and error.rule in KEY_IN_FLIGHT_RULES:
        return True
    return error.status_code in RETRYABLE_STATUSES


def is_ambiguous(error: DoorError) -> bool:
    """Door may have applied a mutation that ended in this error (it was sent; no clear refusal came back)."""
    if isinstance(error, DoorConnectionError):
        return error.request_sent
    return isinstance(error, DoorStatusError) and error.status_code >= 500


def retry_delay(attempt: int, retry_after: float | None = None, *, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number ``attempt + 1`` (``attempt`` counts from 0).

    A server's ``Retry-After`` wins, capped at ``MAX_RETRY_AFTER``; otherwise exponential backoff
    from ``INITIAL_RETRY_DELAY`` to ``MAX_RETRY_DELAY``, shortened by up to ``RETRY_JITTER``.
    """
    if retry_after is not None and retry_after >= 0:
        return min(retry_after, MAX_RETRY_AFTER)
    base = min(INITIAL_RETRY_DELAY * 2.0**attempt, MAX_RETRY_DELAY)
    draw = (rng or random).random()
    return base * (1.0 - RETRY_JITTER * draw)


def fresh_poll_delay(next_refresh_at: datetime | None, server_now: datetime | None) -> float:
    """How long to wait before reading a cold or stale node list again.

    ``next_refresh_at`` is on the server's clock, which may be simulated or skewed, so it is only
    compared with the server's own ``Date``; the result is clamped to a short bounded interval.
    """
    if next_refresh_at is None or server_now is None:
        return FRESH_POLL_UNKNOWN
    # Either may have come without a zone (a body's timestamp, a proxy's Date): both are UTC.
    until = seconds_between(next_refresh_at, server_now)
    if until < -FRESH_POLL_MAX:
        # Long overdue by the Date header: the snapshot's clock is not the one that stamped the
        # answer (a simulated backend behind a real web server), so the header says nothing.
        return FRESH_POLL_UNKNOWN
    # A Date header has one-second resolution: wait a little past the expected refresh.
    return min(max(until + FRESH_POLL_MIN, FRESH_POLL_MIN), FRESH_POLL_MAX)
