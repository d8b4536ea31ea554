"""The machine-tier catalog, remembered per connection pool: it changes rarely, and a planner would
otherwise read it on every card.

The cache lives with the ``httpx2.AsyncClient`` the catalog was read through (a server's shared
pool, or one client's own), so it ends with it and two backends never share one; it is kept per
token (by digest), so a caller never gets a catalog its own token was not allowed to read. An entry is kept
``CATALOG_TTL`` seconds; a ``400`` naming R-ADD-03 (unknown tier) drops it, and a caller that does
not find a tier in a cached catalog asks again once (``DoorClient.list_machine_tiers(max_age=0)``).
"""

from __future__ import annotations

import hashlib
import time
import weakref
from collections.abc import Callable

import httpx2

from backend_client.models import MachineTierList

_BY_POOL: weakref.WeakKeyDictionary[httpx2.AsyncClient, dict[str, tuple[float, MachineTierList]]] = (
    weakref.WeakKeyDictionary()
)


class CatalogCache:
    """The catalog of one API base URL and token, read through one connection pool."""

    def __init__(
        self, http: httpx2.AsyncClient, base_url: str, token: str, *, now: Callable[[], float] = time.monotonic
    ) -> None:
        self._entries = _BY_POOL.setdefault(http, {})
        self._key = base_url + " " + hashlib.sha256(token.encode()).hexdigest()
        self._now = now

    def get(self, max_age: float) -> MachineTierList | None:
        entry = self._entries.get(self._key)
        if entry is None or self._now() - entry[0] >= max_age:
            return None
        return entry[1]

    def put(self, tiers: MachineTierList) -> None:
        self._entries[self._key] = (self._now(), tiers)

    def forget(self) -> None:
        self._entries.pop(self._key, None)
