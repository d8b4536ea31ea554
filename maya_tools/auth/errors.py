"""Why a bearer token is not accepted, kept apart from the issuer being unreachable.

    AuthError
     ├── TokenRefused        the token is not one this server accepts; ``reason`` says which check
     │                       refused it (the bearer middleware answers 401 ``invalid_token``)
     └── IssuerUnavailable   the issuer's metadata or keys could not be fetched, so nothing can be
                             verified (fail closed: no token is accepted meanwhile)

Messages name the check, the claim or header and what to do; they never contain the token.
"""

from __future__ import annotations

from typing import Literal

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
