"""Pending requests to connect a Door token, made for one person: what ``/connect?for=<id>`` serves.

When a tool needs Door for a person with no Door token, the server asks them through a URL-mode
elicitation whose link is ``/connect?for=<id>``; ``create`` makes that id for the person the
elicitation was made for. The page stores a token through such a link only for that very person
(issuer and ``sub`` of the browser session); anyone else signed in stores nothing. ``complete``
marks it done so the server can tell the client (``notifications/elicitation/complete``) or a
retried round that the person connected. Records live in the shared database (``maya_web_records``,
keyed by the sha256 of the id), so the link works on any replica, and expire after ``seconds``.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable

from maya_tools.auth.browser import digest
from maya_tools.auth.storage import AuthDatabase
from maya_tools.auth.tokens import Principal

KIND = "connect"
SECONDS = 15 * 60


class ConnectRequests:
    def __init__(
        self,
        database: AuthDatabase,
        *,
        clock: Callable[[], float] = time.time,
        settled: Callable[[str], None] | None = None,
    ) -> None:
        self._database = database
        self._clock = clock
        self._settled = settled
        """Told each id ``complete`` marks done, so a call waiting on it in this process wakes at once."""

    async def create(self, principal: Principal, *, seconds: float = SECONDS) -> str:
        """A new id for a link that connects a Door token for ``principal`` only."""
        request_id = secrets.token_urlsafe(24)
        now = self._clock()
        data = json.dumps({"principal": principal.model_dump(mode="json"), "done": False})
        await self._database.put_record(KIND, digest(request_id), data, now + seconds, now)
        return request_id

    async def principal_for(self, request_id: str) -> Principal | None:
        """Whom the unexpired request was made for; None for an unknown or expired id."""
        data = await self._database.get_record(KIND, digest(request_id), self._clock())
        return None if data is None else Principal.model_validate(json.loads(data)["principal"])

    async def complete(self, request_id: str) -> bool:
        data = await self._database.get_record(KIND, digest(request_id), self._clock())
        if data is None:
            return False
        record = json.loads(data)
        record["done"] = True
        done = await self._database.update_record(KIND, digest(request_id), json.dumps(record), self._clock())
        if done and self._settled is not None:
            self._settled(request_id)
        return done

    async def completed(self, request_id: str) -> bool:
        """Whether the person connected a Door token through this request."""
        data = await self._database.get_record(KIND, digest(request_id), self._clock())
        return data is not None and bool(json.loads(data)["done"])
