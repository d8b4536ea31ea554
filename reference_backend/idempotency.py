"""Idempotency keys (R-ADD-09, R-PATCH-09; decision: DELETEs too).

A key is scoped to token + method + path + key and remembers a SHA-256 of the canonical body
(sorted keys, no whitespace; an empty body is ``{}``) for 24 h of simulated time, then forgets it
(the row too). Only 2xx answers are stored; a refused request releases its key so a corrected retry
may use it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import takewhile
from typing import Any

from reference_backend.errors import Refusal

KEY_TTL = timedelta(hours=24)


def fingerprint(body: Any) -> str:
    """The SHA-256 of the canonical JSON of a parsed body (``None`` hashes as ``{}``)."""
    canonical = json.dumps({} if body is None else body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def scope(token: str, method: str, path: str, key: str) -> str:
    """The row key of an idempotency entry; the token only enters it through a hash."""
    return hashlib.sha256("\0".join((token, method, path, key)).encode()).hexdigest()


@dataclass(frozen=True)
class StoredAnswer:
    fingerprint: str
    status: int
    body: str
    headers: dict[str, str]
    expires_at: datetime


class IdempotencyStore:
    """Answers already given, and keys whose first request is still being handled.

    ``answers`` is kept in expiry order (simulated time never goes back and every answer lives
    24 h), so forgetting the expired ones visits only those.
    """

    def __init__(self) -> None:
        self.answers: dict[str, StoredAnswer] = {}
        self._in_flight: dict[str, str] = {}
        self.dirty: set[str] = set()

    def begin(self, key_scope: str, body_fingerprint: str, now: datetime, rule: str) -> StoredAnswer | None:
        """The answer to replay, or None after reserving the key for this request.

        Raises ``Refusal`` 409 while the first request with this key is in flight and 422 when the
        key was used with another body (``rule`` names which of R-ADD-09 / R-PATCH-09 applies).
        """
        self._forget_expired(now)
        stored = self.answers.get(key_scope)
        if stored is not None:
            if stored.fingerprint != body_fingerprint:
                raise Refusal(
                    422,
                    f"{rule}: this Idempotency-Key was already used with a different request body. "
                    "Use a new key for a different request.",
                    rule=rule,
                )
            return stored
        if key_scope in self._in_flight:
            if self._in_flight[key_scope] != body_fingerprint:
                raise Refusal(
                    422,
                    f"{rule}: this Idempotency-Key is in use with a different request body. "
                    "Use a new key for a different request.",
                    rule=rule,
                )
            raise Refusal(
                409,
                f"{rule}: the first request with this Idempotency-Key is still in flight. "
                "Retry after it finishes to get its answer.",
                rule=rule,
            )
        self._in_flight[key_scope] = body_fingerprint
        return None

    def _forget_expired(self, now: datetime) -> None:
        expired = [key for key, _ in takewhile(lambda item: item[1].expires_at <= now, self.answers.items())]
        for key_scope in expired:
            del self.answers[key_scope]
            self.dirty.add(key_scope)

    def load(self, entries: Iterable[tuple[str, StoredAnswer]]) -> None:
        """Take the answers of a state file, in expiry order."""
        self.answers = dict(sorted(entries, key=lambda entry: entry[1].expires_at))

    def finish(self, key_scope: str, answer: StoredAnswer | None) -> None:
        """Store a 2xx answer for replay, or release the key (``answer=None``)."""
        self._in_flight.pop(key_scope, None)
        if answer is not None:
            self.answers[key_scope] = answer
            self.dirty.add(key_scope)

    @property
    def in_flight(self) -> int:
        """How many keys are reserved by a request still being handled."""
        return len(self._in_flight)

    def clear(self) -> None:
        self.answers.clear()
        self._in_flight.clear()
        self.dirty.clear()

    @staticmethod
    def expiry(now: datetime) -> datetime:
        return now + KEY_TTL
