"""Why a bearer token is not accepted, kept apart from the issuer being unreachable.

    AuthError
     ├── TokenRefused        the token is not one this server accepts; ``reason`` says which check
     │                       refused it (the bearer middleware answers 401 ``invalid_token``)
     ├── IssuerUnavailable   the issuer's metadata or keys could not be fetched, so nothing can be
     │                       verified (fail closed: no token is accepted meanwhile)
     └── DoorNotConnected    a tool needs Door for a person who has connected no Door token yet
                             (also a ``ToolError``: until a channel asks them to connect, the
                             message tells the client where to go)

Messages name the check, the claim or header and what to do; they never contain the token.
"""

from __future__ import annotations

from typing import Literal

from mcp.server.mcpserver.exceptions import ToolError

Refusal = Literal[
    "malformed",  # not a compact JWS, or a claim of the wrong type
    "algorithm",  # header `alg` outside the allow-list (`none`, HS*, …)
    "type",  # header `typ` is not an access token's (RFC 9068 §4)
    "issuer",  # `iss` is not the configured issuer
    "unknown_key",  # no key of the issuer's JWKS has the token's `kid`, even after a refetch
    "key_mismatch",  # the key named by `kid` is not of the type, curve or use that `alg` needs
    "signature",  # the signature does not verify
    "audience",  # neither `aud` nor `resource` is this server's resource (RFC 8707)
    "expired",  # `exp` is past (beyond the leeway)
    "not_yet_valid",  # `nbf` or `iat` is in the future (beyond the leeway)
    "claims",  # a required claim (`sub`, `exp`, `client_id`) is missing
]


class AuthError(Exception):
    """Base of the errors of ``maya_tools.auth``."""


class TokenRefused(AuthError):
    """The bearer token failed ``reason``'s check; ``detail`` is safe to log (no token in it)."""

    def __init__(self, reason: Refusal, detail: str) -> None:
        super().__init__(f"bearer token refused ({reason}): {detail}")
        self.reason: Refusal = reason
        self.detail = detail


class IssuerUnavailable(AuthError):
    """The issuer's discovery document or JWKS could not be fetched or was not valid."""


class DoorNotConnected(AuthError, ToolError):
    """The person ``principal`` (``Principal.key``) has no Door token stored; ``connect_url`` is where
    they connect one. Nothing was sent to Door."""

    def __init__(self, principal: str, connect_url: str | None = None, *, refused: bool = False) -> None:
        where = connect_url or "this server's /connect page"
        why = (
            "Door refused the Door token you connected (R-AUTH-01: unknown, expired or revoked), so it was disconnected"
            if refused
            else "You have not connected your Door account to maya-tools yet, so nothing was sent to Door"
        )
        super().__init__(
            f"{why}: open {where} in your browser, sign in and paste your Door API token, then ask again. "
            "(maya-tools never sends your sign-in token to Door.)"
        )
        self.principal = principal
        self.connect_url = connect_url
        self.refused = refused
        """Door answered 401 to the token the person had connected (it is forgotten): connect again."""
