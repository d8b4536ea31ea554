"""The sealed ``requestState`` of protocol 2026-07-28, verifiable by every replica and bound to the caller.

A 2026-07-28 client carries the server's state between the rounds of one tool call (the card's
question, then the person's answer) and may send the next round to any replica. The SDK's
``RequestStateBoundary`` seals that state with AES-256-GCM (authenticated encryption: a client can
neither read, forge nor alter it) and checks its expiry, the call it belongs to and the principal it
is bound to. maya-tools gives it:

- the key, ``MAYA_REQUEST_STATE_KEY``, shared by every replica (≥ 32 bytes of secret randomness);
  without it, a key made at start and held by this process alone, which suits one server;
- the principal: with OAuth the verified person (``Principal.key``), else the fingerprint of the
  request's bearer token over HTTP (DESIGN.md property 12),
  so a round replayed with another person's token is refused before any tool code runs.

Several replicas on one card store without a shared key would refuse each other's rounds, so
``check_replicas`` (in ``maya_tools.settings``, so that ``serve`` refuses before its imports) stops such a
server at start and says which setting is missing.
"""

from __future__ import annotations

import os
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateSecurity

from confirmation_cards import token_fingerprint
from maya_tools.runtime import bearer_of
from maya_tools.settings import KEY_BYTES, Settings, check_request_state_key


def bearer_principal(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """With OAuth, the verified person's ``Principal.key``; else the token fingerprint of the HTTP
    request's bearer; None on stdio and in memory (one principal)."""
    from maya_tools.auth.resource import principal_of

    person = principal_of(getattr(ctx.request, "scope", None) or {})
    if person is not None:
        return person.key
    headers = getattr(ctx.request, "headers", None)
    token = None if headers is None else bearer_of(headers.get("authorization"))
    return None if token is None else token_fingerprint(token)


def request_state_security(settings: Settings) -> RequestStateSecurity:
    """The sealing policy: the shared key when set, else one made now for this process alone."""
    check_request_state_key(settings)
    key = settings.request_state_key
    material = key.encode() if key is not None else os.urandom(KEY_BYTES)
    return RequestStateSecurity(
        keys=[material], ttl=max(settings.card_ttl_seconds, 60.0), bind_principal=bearer_principal
    )
