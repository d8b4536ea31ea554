"""The client's policy in one place: timeouts, retries, backoff, polling.

The retry numbers follow anthropic-sdk-python: two retries, exponential backoff from 0.5 s to 8 s
with up to 25 % jitter, and a server's ``Retry-After`` honoured up to a minute.
"""

from __future__ import annotations

API_PREFIX = "/v1/public"
USER_AGENT = "maya-tools-backend-client/0.1"
IDEMPOTENCY_HEADER = "Idempotency-Key"
REQUEST_ID_HEADER = "X-Request-Id"

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 2

INITIAL_RETRY_DELAY = 0.5
"""Seconds before the first retry; doubled for each further one."""
MAX_RETRY_DELAY = 8.0
"""The backoff never waits longer than this between two attempts."""
RETRY_JITTER = 0.25
"""A backoff delay is shortened by a random fraction up to this, so clients do not retry in step."""
MAX_RETRY_AFTER = 60.0
"""A server's ``Retry-After`` is honoured, but never beyond this many seconds."""

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
"""Answers worth repeating a replay-safe request for (a GET, or a mutation with an idempotency key)."""
KEY_IN_FLIGHT_RULES = frozenset({"R-ADD-09", "R-PATCH-09"})
"""A ``409`` naming one of these says the first request with the same idempotency key is still being
handled; the keyed request is retried to get that request's answer (never sent with a new key)."""

KEY_IN_FLIGHT_WAIT = 120.0
"""How long a keyed request waits, in all, for the first request with its key to be answered (Door's
``409`` "in flight") before giving up; those waits do not count as retries."""
KEY_IN_FLIGHT_POLL = 1.0
"""The wait between two tries of a keyed request while its first request is in flight (no ``Retry-After``)."""

FRESH_POLL_MIN = 0.25
"""``list_nodes(fresh=True)`` never polls faster than this …"""
FRESH_POLL_MAX = 5.0
"""… nor waits longer than this between two reads, whatever ``next_refresh_at`` says."""
FRESH_POLL_UNKNOWN = 1.0
"""The wait between two node reads when the server's clock cannot be inferred (no ``Date`` header)."""

DEFAULT_FRESH_TIMEOUT = 30.0
DEFAULT_OPERATION_TIMEOUT = 600.0
DEFAULT_POLL_INTERVAL = 2.0

CATALOG_TTL = 300.0
"""How long a machine-tier catalog read is reused (seconds); a ``400`` R-ADD-03 drops it sooner."""
