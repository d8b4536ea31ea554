"""What Door saw: every answered request outside the admin plane, for tests (``GET /_reference/requests``)."""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import Final

from typing_extensions import TypedDict  # pydantic reads it on Python 3.11 (the admin view)

REQUEST_LOG_SIZE: Final = 10_000


class RequestRecord(TypedDict):
    """One answered request outside the admin plane: never its token, headers or query.

    ``token`` is the first 16 hex characters of the bearer's SHA-256 (``token_digest``), so a test can
    tell whose token a request carried without the log holding any token; ``user`` is the user Door
    issued that token to, or None when the request carried no token Door knows.
    """

    seq: int
    method: str
    path: str
    status: int
    idempotency_key: bool
    token: str | None
    user: str | None


class RequestLog(deque[RequestRecord]):
    """The last ``REQUEST_LOG_SIZE`` records, oldest first; memory only, kept across resets."""

    def __init__(self) -> None:
        super().__init__(maxlen=REQUEST_LOG_SIZE)
        self.last_seq = 0  # the seq of the newest record (0 before any request)

    def record(
        self,
        method: str,
        path: str,
        status: int,
        *,
        idempotency_key: bool,
        token: str | None = None,
        user: str | None = None,
    ) -> RequestRecord:
        """Record an answered request; the oldest records go once there are ``REQUEST_LOG_SIZE``."""
        self.last_seq += 1
        entry = RequestRecord(
            seq=self.last_seq,
            method=method,
            path=path,
            status=status,
            idempotency_key=idempotency_key,
            token=token,
            user=user,
        )
        self.append(entry)
        return entry

    def since(self, seq: int) -> list[RequestRecord]:
        """The records newer than ``seq``, oldest first (those still kept: the log holds the last 10,000)."""
        if not self:
            return []
        first = self[0]["seq"]  # seqs in the log are consecutive
        return list(islice(self, max(0, seq - first + 1), None))
