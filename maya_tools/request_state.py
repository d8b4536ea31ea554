"""The sealed ``requestState`` of protocol 2026-07-28, verifiable by every replica and bound to the caller.

A 2026-07-28 client carries the server's state between the rounds of one tool call (the card's
question, then the person's answer) and may send the next round to any replica. The SDK's
``RequestStateBoundary`` seals that state with AES-256-GCM (authenticated encryption: a client can
neither read, forge nor alter it) and checks its expiry, the call it belongs to and the principal it
is bound to. maya-tools gives it:

- the key, ``MAYA_REQUEST_STATE_KEY``, shared by every replica (≥ 32 bytes of secret randomness);
  without it, a key made at start and held by this process alone, which suits one server;
- the principal: the fingerprint of the request's bearer token over HTTP (DESIGN.md property 12),
  so a round replayed with another person's token is refused before any tool code runs.

Several replicas on one card store without a shared key would refuse each other's rounds, so
``check_replicas`` stops such a server at start and says which setting is missing.
"""

from __future__ import annotations

import os
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateSecurity

from confirmation_cards import token_fingerprint
from confirmation_cards.stores import is_postgres
from maya_tools.runtime import bearer_of
from maya_tools.settings import ConfigError, Settings

KEY_BYTES = 32
GENERATE = 'python3 -c "import secrets; print(secrets.token_hex(32))"'


def bearer_principal(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The token fingerprint of the HTTP request's bearer; None on stdio and in memory (one principal)."""
    headers = getattr(ctx.request, "headers", None)
    token = None if headers is None else bearer_of(headers.get("authorization"))
    return None if token is None else token_fingerprint(token)


def request_state_security(settings: Settings) -> RequestStateSecurity:
    """The sealing policy: the shared key when set, else one made now for this process alone."""
    key = settings.request_state_key
    if key is not None and len(key.encode()) < KEY_BYTES:
        raise ConfigError(
            f"MAYA_REQUEST_STATE_KEY is {len(key.encode())} bytes; it must be at least {KEY_BYTES} bytes of "
            f"secret randomness, the same on every replica. Generate one with: {GENERATE}"
        )
    material = key.encode() if key is not None else os.urandom(KEY_BYTES)
    return RequestStateSecurity(
        keys=[material], ttl=max(settings.card_ttl_seconds, 60.0), bind_principal=bearer_principal
    )


def check_replicas(settings: Settings, transport: str) -> None:
    """Refuse to serve HTTP on a shared (PostgreSQL) store without the shared requestState key."""
    if transport == "streamable-http" and is_postgres(settings.card_store) and settings.request_state_key is None:
        raise ConfigError(
            "MAYA_CARD_STORE is a PostgreSQL database, shared by replicas, but MAYA_REQUEST_STATE_KEY is not set: "
            "another replica could not verify this one's requestState, so a 2026-07-28 client's answer would be "
            f"refused there. Set the same MAYA_REQUEST_STATE_KEY on every replica (generate one with: {GENERATE})."
        )
