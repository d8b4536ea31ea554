"""Who the person behind a request is, and the Door token they connected: one room for both.

- ``tokens.JwtTokenVerifier`` is the MCP SDK's ``TokenVerifier`` for JWT access tokens (RFC 9068):
  signature against the issuer's published keys (``issuer.IssuerKeys``), ``iss``, the RFC 8707
  audience, times, and an allow-list of asymmetric algorithms. ``errors`` holds why a token is refused.
- ``browser.BrowserSignIn`` signs a person in in their browser through the same issuer (OpenID
  Connect code flow with PKCE) and keeps a short server-side session.
- ``credentials.DoorCredentials`` keeps each person's own Door token, AES-GCM-sealed under
  ``MAYA_CREDENTIAL_KEY`` (``sealing``) and bound to issuer + ``sub``, in the card store's database
  (``storage``, ``storage_postgres``).
- ``connect.ConnectPage`` is ``/connect``, where a signed-in person connects, replaces or
  disconnects that token; ``connect_requests.ConnectRequests`` are the ``?for=`` links a URL
  elicitation sends.

Each name is loaded on first use (PEP 562): importing one module of this package (``errors``,
``tokens``) loads only what that module needs, so a server without OAuth never imports the sign-in,
JOSE or the page templates.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from maya_tools.auth.browser import BrowserSignIn
    from maya_tools.auth.connect import ConnectPage
    from maya_tools.auth.connect_requests import ConnectRequests
    from maya_tools.auth.credentials import ConnectionInfo, DoorCredentials, open_credentials
    from maya_tools.auth.errors import AuthError, IssuerUnavailable, TokenRefused
    from maya_tools.auth.issuer import IssuerKeys
    from maya_tools.auth.sealing import CredentialError, CredentialKeyError, KeyNotHeld, parse_credential_keys
    from maya_tools.auth.tokens import JwtTokenVerifier, Principal, VerifiedToken

_MODULE_OF = {
    "BrowserSignIn": "browser",
    "ConnectPage": "connect",
    "ConnectRequests": "connect_requests",
    "ConnectionInfo": "credentials",
    "DoorCredentials": "credentials",
    "open_credentials": "credentials",
    "AuthError": "errors",
    "IssuerUnavailable": "errors",
    "TokenRefused": "errors",
    "IssuerKeys": "issuer",
    "CredentialError": "sealing",
    "CredentialKeyError": "sealing",
    "KeyNotHeld": "sealing",
    "parse_credential_keys": "sealing",
    "JwtTokenVerifier": "tokens",
    "Principal": "tokens",
    "VerifiedToken": "tokens",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'maya_tools.auth' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"maya_tools.auth.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "AuthError",
    "BrowserSignIn",
    "ConnectPage",
    "ConnectRequests",
    "ConnectionInfo",
    "CredentialError",
    "CredentialKeyError",
    "DoorCredentials",
    "IssuerKeys",
    "IssuerUnavailable",
    "JwtTokenVerifier",
    "KeyNotHeld",
    "Principal",
    "TokenRefused",
    "VerifiedToken",
    "open_credentials",
    "parse_credential_keys",
]
