"""A real OpenID provider for the tests: ``provider.mjs`` (the certified npm package ``oidc-provider``)
in its own Node.js process on a free loopback port, and what a test does with it through plain HTTP.

``OpenIDProvider`` starts the process, waits for its discovery document and offers the flows a
person's browser and an MCP client go through: Dynamic Client Registration (``register_client``),
the authorization code flow with PKCE for one of the accounts, by the provider's own login and
consent form posts (``sign_in``), and a shortcut for an access token with given scopes and resource
(``access_token``). ``restart`` starts it again on the same issuer with new signing keys: a key
rotation. Nothing here is mocked; the provider issues every token the tests verify.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import secrets
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2

from backend_client.tls import verifying_tls
from tests.maya_tools.live import free_port, wait_until
from tests.node import node, node_modules

FOLDER = Path(__file__).resolve().parent
SCRIPT = FOLDER / "provider.mjs"

SERVER_CLIENT_ID = "maya-tools"
SERVER_CLIENT_SECRET = "maya-tools-test-client-secret"
# Never fetched: a flow stops at the redirect to it and reads the code from its query.
REDIRECT_URI = "http://127.0.0.1:9/oauth/callback"


@dataclass(frozen=True)
class User:
    sub: str
    email: str
    password: str
    preferred_username: str
    email_verified: bool = True
    groups: tuple[str, ...] | None = None
    """A ``groups`` claim in the person's ID and access tokens (a team's policy judges approvers by it)."""


ADMIN = User("admin", "admin@door.test", "admin-password", "admin")
MEMBER = User("member", "member@door.test", "member-password", "member")


@dataclass(frozen=True)
class OAuthClient:
    client_id: str
    redirect_uri: str
    client_secret: str | None = None  # None: a public client (token_endpoint_auth_method "none")


SERVER_CLIENT = OAuthClient(SERVER_CLIENT_ID, REDIRECT_URI, SERVER_CLIENT_SECRET)


@dataclass(frozen=True)
class Tokens:
    access_token: str
    expires_in: int
    scope: str
    id_token: str | None
    refresh_token: str | None


class SignInRefused(AssertionError):
    """The provider refused a step of the flow (its status and body say why)."""


_FORM = re.compile(r'<form method="post" action="([^"]+)"')


class OpenIDProvider:
    """One ``provider.mjs`` process. ``resources`` are the RFC 8707 resource indicators it issues JWT
    access tokens for (the first is the MCP server's), signed with ``alg``, or for the resources of
    ``signing`` with the algorithm it names; ``issuer`` defaults to its own loopback URL (another value
    makes a provider that claims someone else's issuer)."""

    def __init__(
        self,
        resources: Sequence[str],
        *,
        access_token_ttl: int = 300,
        refreshed_token_ttl: int | None = None,
        alg: str = "RS256",
        signing: Mapping[str, str] | None = None,
        issuer: str | None = None,
        redirect_uris: Sequence[str] = (),
        users: Sequence[User] | None = None,
        keys: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        self.resources = list(resources)
        self.users = None if users is None else list(users)
        """The accounts (default: ``ADMIN`` and ``MEMBER``)."""
        self.keys = None if keys is None else [dict(key) for key in keys]
        """The signing keys as private JWKs (default: new ones at every start)."""
        self.redirect_uris = [REDIRECT_URI, *redirect_uris]
        """The server's own client's redirect URIs: a served ``/auth/callback`` besides the tests' own."""
        self.signing = dict(signing or {})
        self.access_token_ttl = access_token_ttl
        self.refreshed_token_ttl = refreshed_token_ttl or access_token_ttl
        """The life of an access token got by the refresh_token grant."""
        self.alg = alg
        self.port = free_port()
        self.issuer = issuer or f"http://127.0.0.1:{self.port}"
        self.url = f"http://127.0.0.1:{self.port}"
        self.metadata: dict[str, Any] = {}
        self.log = Path(tempfile.mkdtemp(prefix="maya-oidc-")) / "provider.log"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        node_modules(FOLDER)
        argv = [node(), str(SCRIPT), "--port", str(self.port), "--issuer", self.issuer]
        argv += ["--access-token-ttl", str(self.access_token_ttl), "--alg", self.alg]
        argv += ["--refreshed-token-ttl", str(self.refreshed_token_ttl)]
        for resource in self.resources:
            argv += ["--resource", resource]
        for resource, alg in self.signing.items():
            argv += ["--signing", f"{resource}={alg}"]
        env = {
            "PATH": "/usr/bin:/bin",
            "MAYA_OAUTH_CLIENT_ID": SERVER_CLIENT_ID,
            "MAYA_OAUTH_CLIENT_SECRET": SERVER_CLIENT_SECRET,
            "MAYA_OAUTH_REDIRECT_URIS": " ".join(self.redirect_uris),
        }
        if self.users is not None:
            env["OIDC_USERS"] = json.dumps(
                [
                    {
                        **{k: v for k, v in vars(user).items() if k != "groups"},
                        "name": user.preferred_username.title(),
                        **({"groups": list(user.groups)} if user.groups is not None else {}),
                    }
                    for user in self.users
                ]
            )
        if self.keys is not None:
            env["OIDC_KEYS"] = json.dumps(self.keys)
        with open(self.log, "ab") as log:
            self._process = subprocess.Popen(
                argv, cwd=FOLDER, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        discovery = f"{self.url}/.well-known/openid-configuration"
        with httpx2.Client(verify=verifying_tls(), timeout=2.0) as http:

            def served() -> bool:
                if self._process is not None and self._process.poll() is not None:
                    raise AssertionError(f"oidc-provider exited:\n{self.logged()}")
                try:
                    response = http.get(discovery)
                except httpx2.TransportError:
                    return False
                if response.status_code == 200:
                    self.metadata = response.json()
                return response.status_code == 200

            try:
                # A provider that exits fails at once (served() reads its exit status); one that is
                # alive but slow to start on a loaded machine is given time.
                wait_until(served, f"oidc-provider's discovery document at {discovery}", timeout=90)
            except AssertionError as error:
                raise AssertionError(f"{error}; its log:\n{self.logged()}") from None

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)

    def restart(self) -> None:
        """Stop and start on the same port and issuer: new signing keys (a rotation), and the clients
        registered, sessions and grants of the old process are gone."""
        self.stop()
        self.start()

    def logged(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    @contextmanager
    def running(self) -> Iterator[OpenIDProvider]:
        self.start()
        try:
            yield self
        finally:
            self.stop()

    async def jwks(self, http: httpx2.AsyncClient) -> dict[str, Any]:
        response = await http.get(self.metadata["jwks_uri"])
        response.raise_for_status()
        return dict(response.json())

    async def register_client(
        self, http: httpx2.AsyncClient, *, redirect_uri: str = REDIRECT_URI, **metadata: Any
    ) -> OAuthClient:
        """Open Dynamic Client Registration (RFC 7591), as Claude or ChatGPT register: a public client
        (no secret, PKCE) unless ``metadata`` names another ``token_endpoint_auth_method``."""
        body = {
            "redirect_uris": [redirect_uri],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "application_type": "native" if redirect_uri.startswith("http://127.0.0.1") else "web",
            **metadata,
        }
        response = await http.post(self.metadata["registration_endpoint"], json=body)
        if response.status_code != 201:
            raise SignInRefused(f"registration refused ({response.status_code}): {response.text}")
        registered = response.json()
        return OAuthClient(registered["client_id"], redirect_uri, registered.get("client_secret"))

    async def sign_in(
        self,
        http: httpx2.AsyncClient,
        user: User,
        *,
        scopes: Sequence[str],
        resource: str | None = None,
        client: OAuthClient = SERVER_CLIENT,
    ) -> Tokens:
        """The authorization code flow with PKCE (S256) for ``user``: their browser (a cookie jar of its
        own) signs in and consents by the provider's form posts; the client then redeems the code
        at the token endpoint through ``http``, naming ``resource`` (RFC 8707) when given."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        state = secrets.token_urlsafe(16)
        params = {
            "response_type": "code",
            "client_id": client.client_id,
            "redirect_uri": client.redirect_uri,
            "scope": " ".join(scopes),
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        if resource is not None:
            params["resource"] = resource
        callback = await self._browse(user, params, client.redirect_uri)
        if "error" in callback:
            raise SignInRefused(f"authorization refused: {callback}")
        if callback.get("state") != [state] or callback.get("iss") != [self.issuer]:
            raise SignInRefused(f"callback with a wrong state or issuer: {callback}")
        form = {
            "grant_type": "authorization_code",
            "code": callback["code"][0],
            "redirect_uri": client.redirect_uri,
            "code_verifier": verifier,
        }
        if resource is not None:
            form["resource"] = resource
        return await self._token(http, client, form)

    async def access_token(
        self,
        http: httpx2.AsyncClient,
        user: User = ADMIN,
        *,
        scopes: Sequence[str] = ("openid", "email", "maya.read", "maya.change"),
        resource: str | None = None,
    ) -> str:
        """A JWT access token for ``resource`` (default: the MCP server's) issued to the server's own
        confidential client after ``user`` signed in."""
        tokens = await self.sign_in(http, user, scopes=scopes, resource=resource or self.resources[0])
        return tokens.access_token

    async def refresh(
        self, http: httpx2.AsyncClient, client: OAuthClient, refresh_token: str, *, resource: str | None = None
    ) -> Tokens:
        """The refresh_token grant (RFC 6749 §6), as a host renews an expired access token, naming
        ``resource`` (RFC 8707) when given."""
        form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        if resource is not None:
            form["resource"] = resource
        return await self._token(http, client, form)

    async def _browse(self, user: User, params: dict[str, str], redirect_uri: str) -> dict[str, list[str]]:
        """Follow the authorization request as a browser would, filling in the login and consent forms,
        until the provider redirects to ``redirect_uri``; returns that redirect's query."""
        async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10.0) as browser:
            response = await browser.get(self.metadata["authorization_endpoint"], params=params)
            for _ in range(12):
                if response.is_redirect:
                    location = urljoin(str(response.url), response.headers["location"])
                    if location.startswith(redirect_uri):
                        return parse_qs(urlsplit(location).query)
                    response = await browser.get(location)
                    continue
                actions = [html.unescape(action) for action in _FORM.findall(response.text)]
                if response.status_code != 200 or not actions:
                    raise SignInRefused(f"{response.url} answered {response.status_code}: {response.text[:500]}")
                action = urljoin(str(response.url), actions[0])
                if action.endswith("/login"):
                    response = await browser.post(action, data={"login": user.email, "password": user.password})
                elif action.endswith("/confirm"):
                    response = await browser.post(action)
                else:
                    raise SignInRefused(f"unexpected form {action} at {response.url}")
            raise SignInRefused("the authorization flow did not reach the redirect URI")

    async def _token(self, http: httpx2.AsyncClient, client: OAuthClient, form: dict[str, str]) -> Tokens:
        if client.client_secret is None:
            response = await http.post(self.metadata["token_endpoint"], data={**form, "client_id": client.client_id})
        else:
            auth = (client.client_id, client.client_secret)
            response = await http.post(self.metadata["token_endpoint"], data=form, auth=auth)
        if response.status_code != 200:
            raise SignInRefused(f"token request refused ({response.status_code}): {response.text}")
        body = response.json()
        return Tokens(
            access_token=body["access_token"],
            expires_in=int(body["expires_in"]),
            scope=body.get("scope", ""),
            id_token=body.get("id_token"),
            refresh_token=body.get("refresh_token"),
        )


def claims_of(jwt: str) -> dict[str, Any]:
    """The unverified payload of a compact JWT, for assertions about what the provider issued."""
    payload = jwt.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))
