"""Signing a person in in their browser through the MCP server's own issuer: ``BrowserSignIn``.

OpenID Connect authorization code flow with PKCE (S256), the server a confidential client
(``MAYA_OAUTH_CLIENT_ID``/``MAYA_OAUTH_CLIENT_SECRET``) authenticating at the token endpoint by
``client_secret_basic`` or else ``client_secret_post``, whichever the issuer's metadata offers.

- ``/auth/login?return_to=/path`` starts it. ``return_to`` must be a path on this server (no scheme,
  host or ``//``: no open redirect). A random login id whose only copy is a short-lived cookie of
  this browser names the pending sign-in, so a callback is accepted only in the browser that
  started it, once (no login CSRF, no replay). Nothing secret is kept at rest for it: the ``state``,
  ``nonce`` and PKCE verifier are derived from the login id (HMAC-SHA256) when needed, and the
  record under the id's sha256 holds only ``return_to`` sealed (AES-GCM) under a key derived from
  the id, so a copy of the database opens no approval link or ``/connect?for=`` link. At most
  ``pending_limit`` sign-ins may be pending at once (10,000 by default): beyond, ``/auth/login``
  answers 429 with ``Retry-After`` and keeps nothing, rather than evicting someone's sign-in under
  way. The server's periodic sweep (``purge``) deletes expired records of every kind.
- ``/auth/callback`` checks ``state`` (and RFC 9207's ``iss``), redeems the code, and verifies the
  ID token: signature by the issuer's published keys (``issuer.IssuerKeys``, an asymmetric
  algorithm only), ``iss``, ``aud`` = our client id (``azp`` too when there are several audiences),
  ``nonce``, ``exp`` and ``iat``. Then it opens a session and goes back to ``return_to``.
- ``/auth/logout`` (a same-origin POST with the form token) ends the session on every replica.

Every form of a signed-in page (``/connect``, sign-out, the approval page) carries a ``FormTokens``
token: an HMAC under a server key (derived from ``MAYA_CREDENTIAL_KEY``, so replicas agree) over the
session id and the form's purpose; only this server computes it, and only for this browser's session.

Sessions are kept server-side, in the card store's database next to the Door tokens, rather than
in a signed, encrypted cookie: any replica reads them, signing out really ends them (a cookie
would stay valid until it expires), and the cookie holds only an opaque random id whose sha256 is
the row's key. The cookie is ``HttpOnly``, ``SameSite=Lax`` (the callback is a top-level GET from
the issuer), ``Secure`` with the ``__Host-`` prefix when the public URL is https, and lives
``session_seconds`` (15 minutes by default), as the row does.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal
from urllib.parse import quote, urlencode, urlsplit

import httpx2
import jwt
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from jwt.types import Options
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from maya_tools.auth.errors import AuthError
from maya_tools.auth.issuer import IssuerKeys
from maya_tools.auth.pages import HEADERS, FormTokens, origin_of, page, read_form, same_origin
from maya_tools.auth.storage import AuthDatabase
from maya_tools.auth.tokens import KEY_TYPES, NAME_CLAIMS, Principal, display_name, kept_claims, key_fits

logger = logging.getLogger(__name__)

SESSION_SECONDS = 15 * 60
LOGIN_SECONDS = 10 * 60
"""How long a started sign-in may take before its callback is refused."""
PENDING_LIMIT = 10_000
"""How many sign-ins may be pending at once: beyond, ``/auth/login`` answers 429 (try again shortly)."""
LEEWAY = 30.0
SCOPES: tuple[str, ...] = ("openid", "email", "profile")
LOGIN_PATH, CALLBACK_PATH, LOGOUT_PATH = "/auth/login", "/auth/callback", "/auth/logout"
SESSION, LOGIN = "session", "login"  # kinds of record in ``maya_web_records``
SESSION_FORMS = "session"
"""The purpose of the form token of ``/connect`` and sign-out (the approval page's names its card)."""
TokenAuth = Literal["client_secret_basic", "client_secret_post"]

_ID_TOKEN: Options = {
    "require": ["iss", "sub", "aud", "exp", "iat"],
    "verify_signature": True,
    "verify_iss": True,
    "verify_aud": True,
    "verify_exp": False,  # checked against the injected clock below
    "verify_nbf": False,
    "verify_iat": False,
    "enforce_minimum_key_length": True,
}


class SignInFailed(Exception):
    """The callback cannot complete; the message is shown to the person (it holds no secret)."""


def digest(value: str) -> str:
    """The key a record is kept under: the sha256 of the id only the browser holds."""
    return hashlib.sha256(value.encode()).hexdigest()


def safe_return(value: str | None) -> str | None:
    """``value`` if it is a path on this server (``/connect?for=…``), else None: no scheme, no host,
    no ``//`` or backslash that a browser would read as another host, no control characters."""
    if not value:
        return "/"
    if len(value) > 2_000 or "\\" in value or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return None
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or not value.startswith("/") or value.startswith("//"):
        return None
    return value


def derived(login_id: str, label: str) -> str:
    """A value of the pending sign-in (``state``, ``nonce``, PKCE verifier), computed from the login id
    only this browser's cookie holds: never stored. 43 base64url characters (RFC 7636's least)."""
    mac = hmac.new(login_id.encode(), f"maya-tools sign-in {label}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


def _return_key(login_id: str) -> AESGCM:
    return AESGCM(hmac.new(login_id.encode(), b"maya-tools sign-in return_to", hashlib.sha256).digest())


def seal_return(login_id: str, return_to: str) -> str:
    """``return_to`` sealed under a key derived from the login id: what the pending record keeps."""
    nonce = os.urandom(12)
    sealed = _return_key(login_id).encrypt(nonce, return_to.encode(), digest(login_id).encode())
    return base64.urlsafe_b64encode(nonce + sealed).decode()


def open_return(login_id: str, sealed: str) -> str | None:
    """The ``return_to`` of a pending record, or None when it does not open with this login id."""
    try:
        raw = base64.urlsafe_b64decode(sealed.encode())
        plain = _return_key(login_id).decrypt(raw[:12], raw[12:], digest(login_id).encode())
    except (InvalidTag, ValueError, binascii.Error):
        return None
    return plain.decode()


def _basic(client_id: str, secret: str) -> str:
    """RFC 6749 §2.3.1: both parts form-urlencoded before they are joined and base64-encoded."""
    pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}"
    return "Basic " + base64.b64encode(pair.encode()).decode()


class BrowserSignIn:
    """The browser sign-in of ``keys.issuer`` for this server at ``public_url``; sessions in ``database``."""

    def __init__(
        self,
        *,
        keys: IssuerKeys,
        http: httpx2.AsyncClient,
        client_id: str,
        client_secret: str,
        public_url: str,
        database: AuthDatabase,
        session_seconds: float = SESSION_SECONDS,
        scopes: Sequence[str] = SCOPES,
        name_claims: Sequence[str] = NAME_CLAIMS,
        keep_claims: Sequence[str] = (),
        token_auth: TokenAuth | None = None,
        form_tokens: FormTokens | None = None,
        pending_limit: int = PENDING_LIMIT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not client_id or not client_secret:
            raise ValueError("the browser sign-in needs MAYA_OAUTH_CLIENT_ID and MAYA_OAUTH_CLIENT_SECRET")
        self.keys = keys
        self.issuer = keys.issuer
        self._http = http
        self.client_id = client_id
        self._secret = client_secret
        self.public_url = public_url.rstrip("/")
        self.origin = origin_of(self.public_url)
        self.redirect_uri = self.public_url + CALLBACK_PATH
        self.secure = self.public_url.startswith("https://")
        prefix = "__Host-" if self.secure else ""  # __Host-: Secure, Path=/, no Domain (RFC 6265bis)
        self.session_cookie = f"{prefix}maya-session"
        self.login_cookie = f"{prefix}maya-login"
        self.session_seconds = session_seconds
        self.scopes = tuple(scopes)
        self.name_claims = tuple(name_claims)
        self.keep_claims = tuple(keep_claims)
        """The ID token's claims the session keeps (the policy's approver claims), for the review pages."""
        self.token_auth = token_auth
        """How the client authenticates at the token endpoint: the method it was registered with, or
        None to take ``client_secret_basic`` or else ``client_secret_post`` from the issuer's metadata."""
        self.form_tokens = form_tokens or FormTokens.random()
        """The forms' key: ``serve`` derives it from ``MAYA_CREDENTIAL_KEY`` so every replica agrees."""
        self.pending_limit = pending_limit
        self._database = database
        self._clock = clock

    def routes(self) -> list[Route]:
        return [
            Route(LOGIN_PATH, self.login, methods=["GET"]),
            Route(CALLBACK_PATH, self.callback, methods=["GET"]),
            Route(LOGOUT_PATH, self.logout, methods=["POST"]),
        ]

    # --- for the pages ---------------------------------------------------------------------------

    async def signed_in(self, request: Request) -> Principal | None:
        """The person whose unexpired session this browser's cookie names, or None."""
        session_id = request.cookies.get(self.session_cookie)
        if not session_id:
            return None
        data = await self._database.get_record(SESSION, digest(session_id), self._clock())
        if data is None:
            return None
        principal = Principal.model_validate_json(data)
        return principal if principal.issuer == self.issuer else None

    def login_redirect(self, request: Request) -> Response:
        """Send the person through sign-in and back to the page they asked for."""
        back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"{LOGIN_PATH}?{urlencode({'return_to': back})}", status_code=303, headers=HEADERS)

    def form_token(self, request: Request, purpose: str = SESSION_FORMS) -> str | None:
        """The token a form of this browser's session carries back for ``purpose``: computed by the
        server alone, so neither a cross-site post nor someone holding a link knows it."""
        session_id = request.cookies.get(self.session_cookie)
        if not session_id:
            return None
        return self.form_tokens.token(session_id, purpose)

    def form_token_ok(self, request: Request, given: str | None, purpose: str = SESSION_FORMS) -> bool:
        return self.form_tokens.check(request.cookies.get(self.session_cookie), purpose, given)

    async def purge(self) -> int:
        """Delete every expired record (pending sign-ins, sessions, connect requests): the sweep's part."""
        return await self._database.purge_records(self._clock())

    def same_origin(self, request: Request) -> bool:
        return same_origin(request, self.origin)

    # --- routes ----------------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        return_to = safe_return(request.query_params.get("return_to"))
        if return_to is None:
            return page(
                "signin.html.j2",
                status_code=400,
                view="error",
                message="return_to must be a path on this server (like /connect), not another site's address.",
                again=None,
            )
        try:
            metadata = await self.keys.metadata()
        except AuthError as error:
            logger.warning("browser sign-in cannot start: %s", error)
            return page(
                "signin.html.j2",
                status_code=503,
                view="error",
                message="The identity provider cannot be reached right now; nothing changed. Try again in a minute.",
                again=None,
            )
        login_id = secrets.token_urlsafe(32)
        state, nonce, verifier = (derived(login_id, label) for label in ("state", "nonce", "verifier"))
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        now = self._clock()
        pending = json.dumps({"return_to": seal_return(login_id, return_to)})
        if not await self._database.put_record_bounded(
            LOGIN, digest(login_id), pending, now + LOGIN_SECONDS, now, self.pending_limit
        ):
            logger.warning("browser sign-in refused: %d sign-ins are already pending", self.pending_limit)
            return page(
                "signin.html.j2",
                status_code=429,
                headers={"Retry-After": "60"},
                view="error",
                message="Too many sign-ins are under way on this server right now; nothing was kept. "
                "Try again in a minute.",
                again=f"{LOGIN_PATH}?{urlencode({'return_to': return_to})}",
            )
        params = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "scope": " ".join(self.scopes),
            "state": state,
            "nonce": nonce,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        response = RedirectResponse(
            f"{metadata['authorization_endpoint']}?{urlencode(params)}", status_code=303, headers=HEADERS
        )
        self._set_cookie(response, self.login_cookie, login_id, LOGIN_SECONDS)
        return response

    async def callback(self, request: Request) -> Response:
        login_id = request.cookies.get(self.login_cookie)
        pending_text = None
        again = f"{LOGIN_PATH}?return_to=/"
        if login_id:
            pending_text = await self._database.take_record(LOGIN, digest(login_id), self._clock())
        try:
            if pending_text is None or login_id is None:
                raise SignInFailed(
                    "This sign-in was not started in this browser, was already used, or took longer than "
                    f"{LOGIN_SECONDS // 60} minutes. Start again."
                )
            return_to = open_return(login_id, str(json.loads(pending_text).get("return_to", "")))
            if return_to is None:
                raise SignInFailed("This sign-in's record does not open with this browser's cookie. Start again.")
            again = f"{LOGIN_PATH}?{urlencode({'return_to': return_to})}"
            pending = {name: derived(login_id, name) for name in ("state", "nonce", "verifier")}
            try:
                principal = await self._complete(request, pending)
            except AuthError as error:  # the issuer's keys: unavailable, or none with the token's kid
                logger.warning("browser sign-in: the ID token cannot be verified: %s", error)
                raise SignInFailed("The ID token cannot be verified with the issuer's keys. Start again.") from None
        except SignInFailed as failed:
            logger.info("browser sign-in refused: %s", failed)
            response = page("signin.html.j2", status_code=400, view="error", message=str(failed), again=again)
            self._clear_cookie(response, self.login_cookie)
            return response
        earlier = request.cookies.get(self.session_cookie)
        if earlier:  # a sign-in always opens a new session (no fixation); the one it replaces ends
            await self._database.delete_record(SESSION, digest(earlier))
        session_id = secrets.token_urlsafe(32)
        now = self._clock()
        await self._database.put_record(
            SESSION, digest(session_id), principal.model_dump_json(), now + self.session_seconds, now
        )
        logger.info("browser session opened for %s (%s)", principal.name or principal.subject[:80], self.issuer)
        back = RedirectResponse(return_to, status_code=303, headers=HEADERS)
        self._clear_cookie(back, self.login_cookie)
        self._set_cookie(back, self.session_cookie, session_id, int(self.session_seconds))
        return back

    async def logout(self, request: Request) -> Response:
        form = await read_form(request)
        if form is None or not self.same_origin(request) or not self.form_token_ok(request, form.get("csrf")):
            return page(
                "signin.html.j2",
                status_code=403,
                view="error",
                message="This sign-out did not come from this server's own page; nothing changed.",
                again=None,
            )
        session_id = request.cookies.get(self.session_cookie)
        if session_id:
            await self._database.delete_record(SESSION, digest(session_id))
        response = page("signin.html.j2", view="signed_out", message="", again=None)
        self._clear_cookie(response, self.session_cookie)
        return response

    # --- the code, the token request and the ID token --------------------------------------------

    async def _complete(self, request: Request, pending: dict[str, str]) -> Principal:
        query = request.query_params
        state = query.get("state")
        if state is None or not hmac.compare_digest(state.encode(), pending["state"].encode()):
            raise SignInFailed(
                "The sign-in answer does not match the sign-in this browser started (state). Start again."
            )
        if "error" in query:
            raise SignInFailed(f"The identity provider refused the sign-in ({query['error'][:80]}). Start again.")
        metadata = await self.keys.metadata()
        iss = query.get("iss")
        if (iss is not None or metadata.get("authorization_response_iss_parameter_supported")) and iss != self.issuer:
            raise SignInFailed("The sign-in answer comes from another issuer (RFC 9207 iss). Start again.")
        code = query.get("code")
        if not code:
            raise SignInFailed("The identity provider sent no authorization code. Start again.")
        tokens = await self._redeem(metadata, code, pending["verifier"])
        id_token = tokens.get("id_token")
        if not isinstance(id_token, str):
            raise SignInFailed(
                "The identity provider returned no ID token: is the openid scope allowed for this client?"
            )
        return await self._verify_id_token(metadata, id_token, pending["nonce"])

    async def _redeem(self, metadata: dict[str, Any], code: str, verifier: str) -> dict[str, Any]:
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "code_verifier": verifier,
        }
        # RFC 8414 §2: without the list, client_secret_basic is the default.
        methods = metadata.get("token_endpoint_auth_methods_supported", ["client_secret_basic"])
        if self.token_auth is not None:
            methods = [self.token_auth]
        headers = {"accept": "application/json"}
        if "client_secret_basic" in methods:
            headers["authorization"] = _basic(self.client_id, self._secret)
        elif "client_secret_post" in methods:
            form |= {"client_id": self.client_id, "client_secret": self._secret}
        else:
            raise SignInFailed(
                f"The issuer offers neither client_secret_basic nor client_secret_post at its token endpoint ({methods})."
            )
        try:
            response = await self._http.post(str(metadata["token_endpoint"]), data=form, headers=headers)
        except httpx2.HTTPError as error:
            raise SignInFailed(
                f"The identity provider's token endpoint could not be reached ({type(error).__name__})."
            ) from error
        if response.status_code != 200:
            try:
                code_error = str(response.json().get("error", ""))[:80]
            except ValueError:
                code_error = ""
            raise SignInFailed(
                f"The identity provider refused the code ({response.status_code} {code_error}). Start again."
            )
        body = response.json()
        if not isinstance(body, dict):
            raise SignInFailed("The identity provider's token response is not a JSON object.")
        return body

    async def _verify_id_token(self, metadata: dict[str, Any], id_token: str, nonce: str) -> Principal:
        allowed = [alg for alg in metadata.get("id_token_signing_alg_values_supported", ["RS256"]) if alg in KEY_TYPES]
        try:
            header = jwt.get_unverified_header(id_token)
        except jwt.PyJWTError:
            raise SignInFailed("The ID token is not a signed JWT.") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in allowed:
            raise SignInFailed(f"The ID token's algorithm {str(alg)[:20]!r} is not one of {', '.join(allowed)}.")
        kid = header.get("kid")
        jwk = await self.keys.key(kid if isinstance(kid, str) else None, lambda key: key_fits(key, alg))
        if not key_fits(jwk, alg):
            raise SignInFailed(f"The issuer's key {str(jwk.get('kid'))[:40]!r} cannot verify {alg}.")
        try:
            claims = jwt.decode(
                id_token,
                jwt.PyJWK(jwk, algorithm=alg),
                algorithms=[alg],
                audience=self.client_id,
                issuer=self.issuer,
                options=_ID_TOKEN,
            )
        except jwt.PyJWTError as error:
            raise SignInFailed(f"The ID token does not verify ({type(error).__name__}).") from None
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.client_id:
            raise SignInFailed("The ID token has several audiences and its azp is not this server.")
        given = claims.get("nonce")
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), nonce.encode()):
            raise SignInFailed("The ID token was not issued for this sign-in (nonce). Start again.")
        now = self._clock()
        if not isinstance(claims["exp"], int | float) or claims["exp"] <= now - LEEWAY:
            raise SignInFailed("The ID token has expired. Start again.")
        if not isinstance(claims["iat"], int | float) or claims["iat"] > now + LEEWAY:
            raise SignInFailed("The ID token was issued in the future: check this server's clock.")
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject:
            raise SignInFailed("The ID token names nobody (sub).")
        return Principal(
            issuer=self.issuer,
            subject=subject,
            name=display_name(claims, self.name_claims),
            claims=kept_claims(claims, self.keep_claims),
        )

    # --- cookies ---------------------------------------------------------------------------------

    def _set_cookie(self, response: Response, name: str, value: str, max_age: int) -> None:
        response.set_cookie(name, value, max_age=max_age, path="/", secure=self.secure, httponly=True, samesite="lax")

    def _clear_cookie(self, response: Response, name: str) -> None:
        response.delete_cookie(name, path="/", secure=self.secure, httponly=True, samesite="lax")
