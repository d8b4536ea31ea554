"""What Door's own answers taught about roles (DESIGN.md property 10).

The public API has no "who am I": the only way to learn that a token may not change an
organisation's pools is Door's ``403`` (R-AUTH-03) to a real, approved change. That answer is
remembered for the server's life, by token fingerprint (never the token), so later plans for that
organisation are refused up front instead of making cards nobody can execute. Door's acceptance of
an approved change (2xx) is remembered the same way: only then is the caller's role known to be
enough, and until then every card says which role it needs (``confirmation_cards.warnings.role_warning``).
"""

from __future__ import annotations

import threading


class RoleMemory:
    """The (principal, organisation) pairs Door refused a change with ``403`` R-AUTH-03, and those it
    accepted a change from (a refusal still refuses up front: ``Planner._require_super_admin``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._denied: set[tuple[str, str]] = set()
        self._allowed: set[tuple[str, str]] = set()

    def deny(self, principal: str, organisation: str) -> None:
        with self._lock:
            self._denied.add((principal, organisation))

    def allow(self, principal: str, organisation: str) -> None:
        with self._lock:
            self._allowed.add((principal, organisation))

    def allowed(self, principal: str | None, organisation: str) -> bool:
        """Door accepted a change from ``principal`` in ``organisation``."""
        if principal is None:
            return False
        with self._lock:
            return (principal, organisation) in self._allowed

    def denied(self, principal: str | None, organisation: str) -> bool:
        if principal is None:
            return False
        with self._lock:
            return (principal, organisation) in self._denied
