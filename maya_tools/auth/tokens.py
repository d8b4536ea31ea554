"""Verify JWT access tokens (RFC 9068) for this MCP server: verified, never trusted.

``JwtTokenVerifier`` is the MCP SDK's ``TokenVerifier`` (``mcp.server.auth.provider``). A token is
accepted only when all of these hold, checked in this order so that a forged or foreign token costs
no fetch from the issuer:

1. a compact JWS whose header ``alg`` is in the allow-list of asymmetric algorithms (``none`` and the
   HMAC algorithms can never be allowed: an HS256 token "signed" with the issuer's public key must
   not verify), and whose ``typ`` is ``at+jwt`` (RFC 9068 §4; an ID token is not an access token);
2. ``iss`` is exactly the configured issuer;
3. the issuer's key named by ``kid`` (``issuer.IssuerKeys``: discovery, cached JWKS, one rate-limited
   refetch for an unknown ``kid``) has the key type, curve and use that ``alg`` needs, and the
   signature verifies with it (PyJWT; no cryptography here);
4. ``aud`` (or, without ``aud``, ``resource``) names this server's resource (RFC 8707): the MCP spec
   forbids accepting tokens issued for anything else;
5. ``exp`` is in the future and ``nbf``/``iat`` not in it, within ``leeway``, by the injected clock;
6. ``sub`` and the client (``client_id``, else ``azp``) are present.

Keys come only from the issuer's JWKS: a token's own ``jwk``, ``jku`` or ``x5u`` header is never used.

The result is the SDK's ``AccessToken`` (``VerifiedToken``) with the scopes (``scope`` or ``scp``),
the resource, and the principal: the issuer plus ``sub``, and a readable name from the first present
claim of ``name_claims`` (``email`` when ``email_verified`` is true, then ``preferred_username``;
else the audit shows ``sub``) for the audit. A refusal is logged
with its reason, never with the token.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import httpx2
from mcp.server.auth.provider import AccessToken
from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, ValidationError

from maya_tools.auth.errors import IssuerUnavailable, TokenRefused
from maya_tools.auth.issuer import IssuerKeys

if TYPE_CHECKING:
    from jwt.types import Options

logger = logging.getLogger(__name__)

# What key each allowed algorithm needs: (kty, crv or None).
KEY_TYPES: dict[str, tuple[str, str | None]] = {
    "RS256": ("RSA", None),
    "RS384": ("RSA", None),
    "RS512": ("RSA", None),
    "PS256": ("RSA", None),
    "PS384": ("RSA", None),
    "PS512": ("RSA", None),
    "ES256": ("EC", "P-256"),
    "ES384": ("EC", "P-384"),
    "ES512": ("EC", "P-521"),
    "EdDSA": ("OKP", "Ed25519"),
}
DEFAULT_ALGORITHMS: tuple[str, ...] = tuple(KEY_TYPES)
ACCESS_TOKEN_TYPES = frozenset({"at+jwt", "application/at+jwt"})
NAME_CLAIMS: tuple[str, ...] = ("email", "preferred_username")
LEEWAY = 30.0
"""Seconds of clock skew tolerated on ``exp``, ``nbf`` and ``iat``."""

_DECODE: Options = {
    "require": ["iss", "sub", "exp"],
    "verify_signature": True,
    "verify_iss": True,
    # checked below against the injected clock and with RFC 8707's resource fallback
    "verify_aud": False,
    "verify_exp": False,
    "verify_nbf": False,
    "verify_iat": False,
    "enforce_minimum_key_length": True,
}


class Principal(BaseModel):
    """Who a token speaks for: ``sub`` is unique only within its ``issuer``, so both identify."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    issuer: str
    subject: str
    name: str | None  # a readable claim for the audit (``email``, …); None if the token has none
    claims: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """The values of the claims the team's policy judges approvers by (``MAYA_POLICY``'s ``approvers``),
    as the sign-in's ID token holds them; only those claims, never a token."""

    @property
    def key(self) -> str:
        """The string cards, sessions, ``requestState`` and app secrets are bound to: issuer and ``sub``
        together (a ``sub`` is unique only within its issuer), hashed to a fixed length; never a token."""
        joined = f"{self.issuer}\n{self.subject}".encode()
        return "sub_" + hashlib.sha256(joined).hexdigest()[:24]


class VerifiedToken(AccessToken):
    """The SDK's ``AccessToken`` of a verified JWT, with its principal."""

    principal: Principal


class JwtTokenVerifier:
    """Verifies JWT access tokens of ``issuer`` for ``resource`` (this server's RFC 8707 resource:
    ``MAYA_PUBLIC_URL`` + ``/mcp``), fetching the issuer's keys through ``http``."""

    def __init__(
        self,
        *,
        issuer: str,
        resource: str,
        http: httpx2.AsyncClient,
        algorithms: Sequence[str] = DEFAULT_ALGORITHMS,
        token_types: Iterable[str] | None = ACCESS_TOKEN_TYPES,
        name_claims: Sequence[str] = NAME_CLAIMS,
        leeway: float = LEEWAY,
        clock: Callable[[], float] = time.time,
        keys: IssuerKeys | None = None,
    ) -> None:
        unsupported = [alg for alg in algorithms if alg not in KEY_TYPES]
        if unsupported or not algorithms:
            raise ValueError(
                f"token algorithms {unsupported or list(algorithms)} are not allowed: choose from {', '.join(KEY_TYPES)} "
                "(asymmetric only; `none` and HMAC would let anyone who knows the public key sign tokens)"
            )
        self.issuer = issuer
        self.resource = resource
        self.algorithms = tuple(algorithms)
        self.token_types = (
            None if token_types is None else frozenset(t.lower().removeprefix("application/") for t in token_types)
        )
        self.name_claims = tuple(name_claims)
        self.leeway = leeway
        self._clock = clock
        if keys is not None and keys.issuer != issuer:
            raise ValueError(f"the keys given are {keys.issuer}'s, not the issuer {issuer}'s")
        self.keys = keys or IssuerKeys(issuer, http, clock=clock)
        self._resource = _canonical(resource)

    async def verify_token(self, token: str) -> VerifiedToken | None:
        """The verified token, or None (the bearer middleware then answers 401); why is logged."""
        try:
            return await self.check(token)
        except TokenRefused as refused:
            logger.info("%s", refused)
        except IssuerUnavailable as error:
            logger.warning("bearer token not verified, the issuer is unavailable: %s", error)
        return None

    async def check(self, token: str) -> VerifiedToken:
        """The verified token; raises ``TokenRefused`` naming the failed check, or ``IssuerUnavailable``."""
        import jwt  # with its cryptography, on the first token: a server without OAuth never loads it

        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError as error:
            raise TokenRefused("malformed", f"not a signed JWT ({error}); send the access token itself") from None
        alg = header.get("alg")
        if alg not in self.algorithms:
            raise TokenRefused("algorithm", f"header alg {str(alg)[:20]!r} is not one of {', '.join(self.algorithms)}")
        typ = header.get("typ")
        # RFC 8725 §3.11: "application/" may be left off a typ, so both spellings are one type
        if self.token_types is not None and (
            not isinstance(typ, str) or typ.lower().removeprefix("application/") not in self.token_types
        ):
            raise TokenRefused(
                "type",
                f"header typ {str(typ)[:30]!r} is not an access token's ({', '.join(sorted(self.token_types))}); "
                "an issuer whose access tokens are typed otherwise (Keycloak: JWT) is named in MAYA_OAUTH_TOKEN_TYPES",
            )
        if unverified.get("iss") != self.issuer:
            raise TokenRefused(
                "issuer", f"iss {str(unverified.get('iss'))[:100]!r} is not {self.issuer!r}; sign in with that issuer"
            )
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenRefused("malformed", "header kid is not a string")
        jwk = await self.keys.key(kid, lambda candidate: key_fits(candidate, alg))
        if not key_fits(jwk, alg):
            raise TokenRefused(
                "key_mismatch",
                f"key {jwk.get('kid')!r} ({jwk.get('kty')} {jwk.get('crv') or ''}) is not a signing key for {alg}",
            )
        try:
            claims = jwt.decode(
                token, jwt.PyJWK(jwk, algorithm=alg), algorithms=[alg], issuer=self.issuer, options=_DECODE
            )
        except jwt.InvalidSignatureError:
            raise TokenRefused("signature", f"the signature does not verify with {self.issuer}'s key") from None
        except jwt.MissingRequiredClaimError as error:
            raise TokenRefused("claims", f"claim {error.claim!r} is missing") from None
        except jwt.PyJWTError as error:
            raise TokenRefused("malformed", f"{type(error).__name__}: {error}") from None
        resource = self._audience(claims)
        expires_at = self._times(claims)
        subject = claims["sub"]
        client_id = claims.get("client_id", claims.get("azp"))
        if not isinstance(subject, str) or not subject:
            raise TokenRefused("claims", "sub is not a non-empty string")
        if not isinstance(client_id, str) or not client_id:
            raise TokenRefused("claims", "the token names no client (client_id or azp)")
        principal = Principal(issuer=self.issuer, subject=subject, name=self._name(claims))
        return VerifiedToken(
            token=token,
            client_id=client_id,
            scopes=_scopes(claims),
            expires_at=expires_at,
            resource=resource,
            subject=subject,
            claims=claims,
            principal=principal,
        )

    def _audience(self, claims: dict[str, Any]) -> str:
        """This server's resource if ``aud`` (or, absent, ``resource``) names it (RFC 8707)."""
        named = claims["aud"] if "aud" in claims else claims.get("resource")
        values = named if isinstance(named, list) else [named]
        if any(isinstance(value, str) and _canonical(value) == self._resource for value in values):
            return self.resource
        raise TokenRefused(
            "audience",
            f"the token is for {str(named)[:200]!r}, not this server: request it with resource={self.resource}",
        )

    def _times(self, claims: dict[str, Any]) -> int:
        """``exp`` as an int, after checking ``exp``, ``nbf`` and ``iat`` against the clock."""
        now = self._clock()
        times: dict[str, float] = {}
        for name in ("exp", "nbf", "iat"):
            value = claims.get(name)
            if value is None and name != "exp":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TokenRefused("malformed", f"claim {name} is not a number of seconds")
            times[name] = float(value)
        if times["exp"] <= now - self.leeway:
            raise TokenRefused("expired", f"the token expired {int(now - times['exp'])} s ago; get a new one")
        for name in ("nbf", "iat"):
            if name in times and times[name] > now + self.leeway:
                raise TokenRefused("not_yet_valid", f"claim {name} is {int(times[name] - now)} s in the future")
        return int(times["exp"])

    def _name(self, claims: dict[str, Any]) -> str | None:
        return display_name(claims, self.name_claims)


def display_name(claims: dict[str, Any], name_claims: Sequence[str]) -> str | None:
    """The first of ``name_claims`` that ``claims`` has as a non-empty string, else None (the person is
    then shown by ``sub``). ``email`` counts only with ``email_verified`` true: anyone may type any
    address into an account at many issuers, so an unverified one would let them pose as its owner."""
    for claim in name_claims:
        value = claims.get(claim)
        if claim == "email" and claims.get("email_verified") is not True:
            continue
        if isinstance(value, str) and value.strip():
            return value.strip()[:200]
    return None


def kept_claims(claims: dict[str, Any], names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The string values of the claims ``names`` (a claim may be a string or a list of strings)."""
    kept: dict[str, tuple[str, ...]] = {}
    for name in names:
        raw = claims.get(name)
        values = (
            (raw,)
            if isinstance(raw, str)
            else tuple(v for v in raw if isinstance(v, str))
            if isinstance(raw, list)
            else ()
        )
        if values:
            kept[name] = tuple(v[:200] for v in values[:100])
    return kept


def key_fits(jwk: dict[str, Any], alg: str) -> bool:
    """Whether ``jwk`` may verify ``alg``: its type and curve, and its own ``alg``/``use`` if it names them."""
    if alg not in KEY_TYPES:
        return False  # no key verifies an algorithm outside the allow-list (`none`, HMAC, …)
    kty, crv = KEY_TYPES[alg]
    return (
        jwk.get("kty") == kty
        and (crv is None or jwk.get("crv") == crv)
        and jwk.get("alg", alg) == alg
        and jwk.get("use", "sig") == "sig"
    )


def _scopes(claims: dict[str, Any]) -> list[str]:
    """RFC 9068's space-separated ``scope``, or the ``scp`` list some issuers send instead."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return scope.split()
    scp = claims.get("scp")
    if isinstance(scp, list):
        return [value for value in scp if isinstance(value, str)]
    if isinstance(scp, str):
        return scp.split()
    return []


def _canonical(url: str) -> str:
    """A resource URL compared as the SDK's bearer middleware does: as a URL, a trailing slash aside."""
    try:
        return str(AnyHttpUrl(url)).removesuffix("/")
    except ValidationError:
        return url
