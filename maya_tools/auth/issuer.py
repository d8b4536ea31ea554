"""The authorization server's published signing keys, found from its metadata and cached.

The metadata comes from OpenID Connect Discovery (``/.well-known/openid-configuration`` appended to
the issuer) or else RFC 8414 (``/.well-known/oauth-authorization-server`` inserted before the
issuer's path). Its ``issuer`` must equal the configured issuer exactly (RFC 8414 §3.3, OIDC
Discovery §4.3): a document that names another issuer would let that one sign our tokens.

The JWKS is fetched from ``jwks_uri`` and kept for ``max_age``. A token naming an unknown ``kid`` (the
issuer rotated its keys) makes one refetch. Every fetch, failed or not, starts a ``refetch_cooldown``
in which no other is tried, so a flood of tokens with made-up key ids, or of requests while the
issuer is down, costs the issuer one request, not one each; concurrent lookups share a fetch. When a
refresh of keys past ``max_age`` fails, the keys already held are kept (they are still the issuer's);
with no keys at all, nothing verifies (``IssuerUnavailable``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2

from maya_tools.auth.errors import IssuerUnavailable, TokenRefused
from maya_tools.settings import is_loopback

logger = logging.getLogger(__name__)

REFETCH_COOLDOWN = 30.0
"""Seconds between two JWKS fetches caused by unknown key ids (jose's ``createRemoteJWKSet`` default)."""
MAX_AGE = 600.0
"""Seconds a fetched JWKS is used before it is fetched again on the next lookup."""


def require_secure_url(url: str, what: str) -> str:
    """``url`` if it is https, or http to a loopback host (a provider in a test or on the same host)."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if parts.scheme == "http" and parts.hostname and is_loopback(parts.hostname):
        return url
    raise ValueError(f"{what} {url!r} must be an https URL (plain http only to a loopback host)")


def discovery_urls(issuer: str) -> list[str]:
    """Where the issuer's metadata may be, in the order the MCP authorization spec tries them."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")

    def at(well_known: str) -> str:
        return urlunsplit((parts.scheme, parts.netloc, well_known, "", ""))

    if not path:
        return [at("/.well-known/openid-configuration"), at("/.well-known/oauth-authorization-server")]
    return [
        at(f"{path}/.well-known/openid-configuration"),
        at(f"/.well-known/oauth-authorization-server{path}"),
        at(f"/.well-known/openid-configuration{path}"),
    ]


class IssuerKeys:
    """The signing keys of one issuer, fetched through ``http`` (injected: its timeouts, TLS and
    transport are the caller's). ``clock`` gives the seconds used for the cache's age."""

    def __init__(
        self,
        issuer: str,
        http: httpx2.AsyncClient,
        *,
        clock: Callable[[], float] = time.time,
        refetch_cooldown: float = REFETCH_COOLDOWN,
        max_age: float = MAX_AGE,
    ) -> None:
        self.issuer = require_secure_url(issuer, "the OAuth issuer")
        self._http = http
        self._clock = clock
        self._cooldown = refetch_cooldown
        self._max_age = max_age
        self._metadata: dict[str, Any] | None = None
        self._keys: list[dict[str, Any]] = []
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self._error = "not fetched yet"
        self._lock = anyio.Lock()

    async def metadata(self) -> dict[str, Any]:
        """The issuer's metadata (fetched once), with an ``issuer`` equal to ours and a ``jwks_uri``."""
        if self._metadata is None:
            async with self._lock:
                if self._metadata is None:
                    self._metadata = await self._discover()
        return self._metadata

    async def key(self, kid: str | None, usable: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The JWK named ``kid`` (without a ``kid``: the one key ``usable`` accepts), refetching the
        JWKS once if it is not there and the cooldown allows; ``TokenRefused("unknown_key")`` else."""
        if self._fetched_at is None:
            await self._fetch(stale_ok=False)
        elif self._clock() - self._fetched_at >= self._max_age:
            await self._fetch(stale_ok=True)
        found = self._find(kid, usable)
        if found is None:  # the issuer may have rotated its keys: fetch again, unless within the cooldown
            await self._fetch(stale_ok=False, why=f"unknown key id {_shown(kid)}")
            found = self._find(kid, usable)
        if found is None:
            raise TokenRefused(
                "unknown_key",
                f"no signing key of {self.issuer} has kid {_shown(kid)}; get a new token from the issuer",
            )
        return found

    def _find(self, kid: str | None, usable: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        if kid is not None:
            return next((jwk for jwk in self._keys if jwk.get("kid") == kid), None)
        candidates = [jwk for jwk in self._keys if usable(jwk)]
        return candidates[0] if len(candidates) == 1 else None

    def _cooled_down(self) -> bool:
        """Whether a fetch may be tried: the first, or ``refetch_cooldown`` after the last attempt."""
        return self._attempted_at is None or self._clock() - self._attempted_at >= self._cooldown

    async def _fetch(self, *, stale_ok: bool, why: str | None = None) -> None:
        """Fetch the JWKS unless another lookup did while this one waited or the cooldown forbids it.
        A failure raises, except that ``stale_ok`` keeps the keys already held."""
        attempted = self._attempted_at
        async with self._lock:
            if self._attempted_at != attempted or not self._cooled_down():
                if self._fetched_at is None:
                    raise IssuerUnavailable(f"{self.issuer}'s keys are not available: {self._error}")
                return
            self._attempted_at = self._clock()
            if why is not None:
                logger.info("%s: fetching %s's keys again", why, self.issuer)
            try:
                metadata = self._metadata or await self._discover()
                keys = await self._fetch_jwks(str(metadata["jwks_uri"]))
            except IssuerUnavailable as error:
                self._error = str(error)
                if stale_ok:
                    logger.warning("keeping %s's keys fetched before: %s", self.issuer, error)
                    return
                raise
            self._metadata, self._keys, self._fetched_at = metadata, keys, self._clock()

    async def _discover(self) -> dict[str, Any]:
        for url in discovery_urls(self.issuer):
            document = await self._get_json(url, missing_ok=True)
            if document is None:
                continue
            if document.get("issuer") != self.issuer:
                raise IssuerUnavailable(
                    f"{url} names issuer {document.get('issuer')!r}, not {self.issuer!r}: "
                    "set the issuer to exactly the value the authorization server publishes"
                )
            jwks_uri = document.get("jwks_uri")
            if not isinstance(jwks_uri, str):
                raise IssuerUnavailable(f"{url} has no jwks_uri: the issuer publishes no keys to verify tokens with")
            try:
                require_secure_url(jwks_uri, "the issuer's jwks_uri")
            except ValueError as error:
                raise IssuerUnavailable(str(error)) from None
            return document
        raise IssuerUnavailable(
            f"{self.issuer} publishes no metadata at {' or '.join(discovery_urls(self.issuer))}: check the issuer URL"
        )

    async def _fetch_jwks(self, url: str) -> list[dict[str, Any]]:
        document = await self._get_json(url, missing_ok=False)
        keys = document.get("keys") if document else None
        if not isinstance(keys, list) or not all(isinstance(jwk, dict) for jwk in keys):
            raise IssuerUnavailable(f"{url} is not a JWK Set (no `keys` list of objects)")
        return keys

    async def _get_json(self, url: str, *, missing_ok: bool) -> dict[str, Any] | None:
        try:
            response = await self._http.get(url, headers={"accept": "application/json"})
        except httpx2.HTTPError as error:
            raise IssuerUnavailable(f"cannot reach {url}: {type(error).__name__}: {error}") from error
        if missing_ok and response.status_code == 404:
            return None
        if response.status_code != 200:
            raise IssuerUnavailable(f"{url} answered {response.status_code}")
        try:
            document = response.json()
        except ValueError:
            raise IssuerUnavailable(f"{url} did not answer JSON") from None
        if not isinstance(document, dict):
            raise IssuerUnavailable(f"{url} did not answer a JSON object")
        return document


def _shown(kid: str | None) -> str:
    """A ``kid`` as a message shows it: quoted and cut short, since the token's sender chose it."""
    return "(none)" if kid is None else repr(kid[:40])
