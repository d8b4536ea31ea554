"""Who the person behind an HTTP request is: OAuth 2.1 access tokens, verified, never trusted.

``tokens.JwtTokenVerifier`` is the MCP SDK's ``TokenVerifier`` for JWT access tokens (RFC 9068):
signature against the issuer's published keys (``issuer.IssuerKeys``), ``iss``, the RFC 8707
audience, times, and an allow-list of asymmetric algorithms. ``errors`` holds why a token is refused.
"""

from maya_tools.auth.errors import AuthError, IssuerUnavailable, TokenRefused
from maya_tools.auth.issuer import IssuerKeys
from maya_tools.auth.tokens import JwtTokenVerifier, Principal, VerifiedToken

__all__ = [
    "AuthError",
    "IssuerKeys",
    "IssuerUnavailable",
    "JwtTokenVerifier",
    "Principal",
    "TokenRefused",
    "VerifiedToken",
]
