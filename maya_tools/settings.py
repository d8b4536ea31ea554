"""The server's settings, read once from the environment.

Each of the two programs reads its environment in exactly one module: the server here, the chat
(``maya-tools chat`` and ``maya-tools eval``) in ``maya_tools.chat.settings``. No other module reads
environment variables.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from confirmation_cards.policy import Policy


def default_card_store(env: Mapping[str, str]) -> Path:
    """The card store under the user's state directory (XDG_STATE_HOME, else ~/.local/state)."""
    base = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local" / "state")
    return Path(base) / "maya-tools" / "cards.sqlite3"


class ConfigError(ValueError):
    """A setting the server cannot start with; the message names it and what to do."""


KEY_BYTES = 32
"""The least length of ``MAYA_REQUEST_STATE_KEY``, in bytes."""
GENERATE = 'python3 -c "import secrets; print(secrets.token_hex(32))"'


def _number(env: Mapping[str, str], name: str, default: float, *, whole: bool = False, least: float = 0.0) -> float:
    """A numeric setting, or ``ConfigError`` naming it, what was given and what it must be."""
    given = env.get(name)
    if not given:
        return default
    try:
        value = int(given) if whole else float(given)
    except ValueError:
        value = None
    if value is None or value != value or value < least or value in (float("inf"), float("-inf")):
        kind = "a whole number" if whole else "a number"
        raise ConfigError(f"{name} must be {kind} of at least {least:g}, not {given[:40]!r}; unset it for {default:g}.")
    return value


AuthMode = Literal["oauth", "door-token"]


def _names(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (value or "").split(",") if part.strip())


@dataclass(frozen=True)
class Settings:
    """What the server needs to know about its surroundings.

    ``door_api_url`` None means: start the reference backend in-process with the demo seed.
    ``door_token`` serves stdio only; over HTTP every caller brings their own token.
    """

    door_api_url: str | None = None
    door_token: str | None = field(default=None, repr=False)
    card_store: str = field(default=":memory:", repr=False)  # a postgresql:// URL may hold a password
    read_only: bool = False
    card_ttl_seconds: float = 600.0
    reference_time_scale: float = 10.0
    approver: str = "local user"
    door_timeout_seconds: float = 30.0
    link_wait_seconds: float = 50.0
    """How long a call whose URL elicitation the client accepted (it opened the link) waits for what the
    approval page or ``/connect`` decides before it answers ``pending`` (``MAYA_LINK_WAIT_SECONDS``); under
    the 60 s a client's request commonly times out after."""
    settle_seconds: float = 30.0
    sweep_seconds: float = 10.0
    plan_step_timeout_seconds: float = 1800.0
    plan_poll_seconds: float = 5.0
    store_pool_size: int = 10
    store_connect_seconds: float = 30.0
    request_state_key: str | None = field(default=None, repr=False)
    replica: str | None = None
    """This replica's name behind a load balancer; approval-page links carry it (``?via=``) so the
    balancer sends them back here, where the asking caller's token is held."""
    public_url: str | None = None
    """The URL people reach this server at (the load balancer's), for approval-page links; with OAuth
    the protected resource is it + ``/mcp``."""
    auth: AuthMode | None = None
    """``serve --auth``; None until chosen: ``oauth`` whenever ``oauth_issuer`` is set, else ``door-token``."""
    oauth_issuer: str | None = None
    oauth_client_id: str | None = None
    oauth_client_secret: str | None = field(default=None, repr=False)
    oauth_name_claims: tuple[str, ...] = ("email", "preferred_username")
    oauth_token_types: tuple[str, ...] = ("at+jwt",)
    """JWT ``typ`` headers taken as access tokens (``MAYA_OAUTH_TOKEN_TYPES``); Keycloak's are ``JWT``."""
    allowed_origins: tuple[str, ...] = ()
    """Browser origins (exact ``scheme://host[:port]``) answered with CORS headers."""
    credential_key: str | None = field(default=None, repr=False)
    session_seconds: float = 15 * 60.0
    """How long a browser session of ``/connect`` and the approval page lasts."""
    policy_file: str | None = None
    """``MAYA_POLICY``: the team's policy file (TOML, docs/policy.md); None: every card is its requester's."""
    policy: Policy | None = field(default=None, repr=False)
    """The parsed policy (``maya_tools.policy.with_policy`` reads ``policy_file``), or one given directly."""
    approval_webhook_url: str | None = field(default=None, repr=False)  # a webhook URL often holds a secret
    """``MAYA_APPROVAL_WEBHOOK_URL``: told when a card starts waiting for approvers and when it is decided."""
    audit_log: str | None = None
    """Where every audit row is appended as a JSON line (``MAYA_AUDIT_LOG``: a file, or ``-`` for stderr)."""
    oauth_clients: tuple[str, ...] = ()
    """The OAuth clients (an access token's ``client_id``, else ``azp``) allowed on ``/mcp`` (``MAYA_OAUTH_CLIENTS``); empty: any."""

    @property
    def oauth(self) -> bool:
        return self.auth == "oauth"

    @property
    def resource_url(self) -> str | None:
        """This server's RFC 8707 resource (``MAYA_PUBLIC_URL`` + ``/mcp``): what tokens must be issued for."""
        return None if self.public_url is None else self.public_url + "/mcp"

    @property
    def embedded(self) -> bool:
        return self.door_api_url is None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Read ``DOOR_API_URL``, ``DOOR_TOKEN``, ``MAYA_CARD_STORE``, ``MAYA_READ_ONLY``,
        ``MAYA_CARD_TTL_SECONDS``, ``MAYA_REFERENCE_TIME_SCALE``, ``MAYA_USER``, ``MAYA_DOOR_TIMEOUT_SECONDS``
        (one Door request), ``MAYA_LINK_WAIT_SECONDS`` (how long an opened link's decision is waited for),
        ``MAYA_SWEEP_SECONDS`` (how often orphaned executing cards are looked for, at
        most 20), ``MAYA_SETTLE_SECONDS`` (how long an unclear answer is settled by reading
        Door back), ``MAYA_PLAN_STEP_TIMEOUT_SECONDS`` (Door's time a plan's wait step may take
        before the plan stops) and ``MAYA_PLAN_POLL_SECONDS`` (between two reads of Door while it waits),
        ``MAYA_STORE_POOL_SIZE`` and ``MAYA_STORE_CONNECT_SECONDS`` (connections to a
        PostgreSQL card store, and how long its server is waited for at start) and
        ``MAYA_REQUEST_STATE_KEY`` (the key every replica seals ``requestState`` with), ``MAYA_REPLICA``
        and ``MAYA_PUBLIC_URL`` (behind a load balancer; with OAuth, the resource's base), ``MAYA_OAUTH_ISSUER``,
        ``MAYA_OAUTH_CLIENT_ID``, ``MAYA_OAUTH_CLIENT_SECRET``, ``MAYA_OAUTH_NAME_CLAIM`` (comma-separated,
        first present wins), ``MAYA_ALLOWED_ORIGINS`` (comma-separated), ``MAYA_CREDENTIAL_KEY``,
        ``MAYA_SESSION_SECONDS``, ``MAYA_POLICY`` (the policy file's path), ``MAYA_APPROVAL_WEBHOOK_URL``
        (docs/policy.md), ``MAYA_AUDIT_LOG`` and ``MAYA_OAUTH_CLIENTS`` (comma-separated); keyword overrides win."""
        env = os.environ if env is None else env
        values: dict[str, object] = {
            "door_api_url": env.get("DOOR_API_URL") or None,
            "door_token": env.get("DOOR_TOKEN") or None,
            "card_store": env.get("MAYA_CARD_STORE") or str(default_card_store(env)),
            "read_only": env.get("MAYA_READ_ONLY", "").lower() in {"1", "true", "yes", "on"},
            "card_ttl_seconds": _number(env, "MAYA_CARD_TTL_SECONDS", 600.0, least=1),
            "reference_time_scale": _number(env, "MAYA_REFERENCE_TIME_SCALE", 10.0, least=0.001),
            "approver": env.get("MAYA_USER") or env.get("USER") or "local user",
            "door_timeout_seconds": _number(env, "MAYA_DOOR_TIMEOUT_SECONDS", 30.0, least=0.1),
            "link_wait_seconds": _number(env, "MAYA_LINK_WAIT_SECONDS", 50.0),
            "settle_seconds": _number(env, "MAYA_SETTLE_SECONDS", 30.0),
            "plan_step_timeout_seconds": _number(env, "MAYA_PLAN_STEP_TIMEOUT_SECONDS", 1800.0, least=1),
            "plan_poll_seconds": _number(env, "MAYA_PLAN_POLL_SECONDS", 5.0, least=0.05),
            "sweep_seconds": min(_number(env, "MAYA_SWEEP_SECONDS", 10.0, least=0.1), 20.0),
            "store_pool_size": int(_number(env, "MAYA_STORE_POOL_SIZE", 10, whole=True, least=1)),
            "store_connect_seconds": _number(env, "MAYA_STORE_CONNECT_SECONDS", 30.0, least=0.1),
            "request_state_key": env.get("MAYA_REQUEST_STATE_KEY") or None,
            "replica": env.get("MAYA_REPLICA") or None,
            "public_url": (env.get("MAYA_PUBLIC_URL") or "").rstrip("/") or None,
            "oauth_issuer": env.get("MAYA_OAUTH_ISSUER") or None,
            "oauth_client_id": env.get("MAYA_OAUTH_CLIENT_ID") or None,
            "oauth_client_secret": env.get("MAYA_OAUTH_CLIENT_SECRET") or None,
            "oauth_name_claims": _names(env.get("MAYA_OAUTH_NAME_CLAIM")) or ("email", "preferred_username"),
            "oauth_token_types": _names(env.get("MAYA_OAUTH_TOKEN_TYPES")) or ("at+jwt",),
            "allowed_origins": _names(env.get("MAYA_ALLOWED_ORIGINS")),
            "credential_key": env.get("MAYA_CREDENTIAL_KEY") or None,
            "session_seconds": _number(env, "MAYA_SESSION_SECONDS", 900.0, least=60),
            "policy_file": env.get("MAYA_POLICY") or None,
            "approval_webhook_url": _webhook(env.get("MAYA_APPROVAL_WEBHOOK_URL")),
            "audit_log": env.get("MAYA_AUDIT_LOG") or None,
            "oauth_clients": _names(env.get("MAYA_OAUTH_CLIENTS")),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


def check_request_state_key(settings: Settings) -> None:
    """Refuse a ``MAYA_REQUEST_STATE_KEY`` too short to seal ``requestState`` with."""
    key = settings.request_state_key
    if key is not None and len(key.encode()) < KEY_BYTES:
        raise ConfigError(
            f"MAYA_REQUEST_STATE_KEY is {len(key.encode())} bytes; it must be at least {KEY_BYTES} bytes of "
            f"secret randomness, the same on every replica. Generate one with: {GENERATE}"
        )


def check_replicas(settings: Settings, transport: str) -> None:
    """Refuse to serve HTTP on a shared (PostgreSQL) store without the shared requestState key."""
    from confirmation_cards.stores import is_postgres

    if transport == "streamable-http" and is_postgres(settings.card_store) and settings.request_state_key is None:
        raise ConfigError(
            "MAYA_CARD_STORE is a PostgreSQL database, shared by replicas, but MAYA_REQUEST_STATE_KEY is not set: "
            "another replica could not verify this one's requestState, so a 2026-07-28 client's answer would be "
            f"refused there. Set the same MAYA_REQUEST_STATE_KEY on every replica (generate one with: {GENERATE})."
        )


OAUTH_NEEDS = (
    "MAYA_OAUTH_ISSUER",
    "MAYA_PUBLIC_URL",
    "MAYA_OAUTH_CLIENT_ID",
    "MAYA_OAUTH_CLIENT_SECRET",
    "MAYA_CREDENTIAL_KEY",
)
"""What ``--auth oauth`` cannot start without: the issuer, the resource's base URL, the server's own
client at the issuer (the browser sign-in of ``/connect``) and the key sealing each person's Door token."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (``serve --host``) binds to this machine alone."""
    import ipaddress

    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def choose_auth(settings: Settings, transport: str, host: str, auth: str | None = None) -> Settings:
    """The settings with ``auth`` chosen for ``transport`` (``--auth``, else ``oauth`` whenever
    ``MAYA_OAUTH_ISSUER`` is set), or ``ConfigError`` naming what to set.

    Over HTTP, ``door-token`` (each request's bearer is the caller's Door token) is token passthrough,
    which the MCP authorization spec forbids for a shared server; it is allowed only on a loopback
    address, for one person. stdio has no bearer at all."""
    if transport != "streamable-http":
        return settings
    from dataclasses import replace

    chosen = auth or ("oauth" if settings.oauth_issuer else "door-token")
    for origin in settings.allowed_origins:
        _check_origin(origin)
    if chosen == "door-token":
        if settings.oauth_clients:
            raise ConfigError(
                "MAYA_OAUTH_CLIENTS allows OAuth clients, but this server signs nobody in with OAuth (--auth "
                f"door-token): set {', '.join(OAUTH_NEEDS)} (serve --auth oauth), or unset MAYA_OAUTH_CLIENTS."
            )
        if not is_loopback(host):
            raise ConfigError(
                f"--host {host} is not a loopback address, and without OAuth each caller's bearer would be their Door "
                f"token (token passthrough, which the MCP spec forbids): set {', '.join(OAUTH_NEEDS)} "
                "(serve --auth oauth, docs/deploy.md), or bind to 127.0.0.1 for one person."
            )
        return replace(settings, auth="door-token")
    missing = [name for name, value in zip(OAUTH_NEEDS, _oauth_values(settings), strict=True) if not value]
    if missing:
        raise ConfigError(
            f"--auth oauth needs {', '.join(missing)}: set {'it' if len(missing) == 1 else 'them'} "
            "(docs/deploy.md, 'Signing people in'), or use --auth door-token on a loopback address for one person."
        )
    for name, url in (("MAYA_OAUTH_ISSUER", settings.oauth_issuer), ("MAYA_PUBLIC_URL", settings.public_url)):
        _check_url(name, str(url))
    return replace(settings, auth="oauth")


def _oauth_values(settings: Settings) -> tuple[str | None, ...]:
    return (
        settings.oauth_issuer,
        settings.public_url,
        settings.oauth_client_id,
        settings.oauth_client_secret,
        settings.credential_key,
    )


def _check_url(name: str, url: str) -> None:
    """An ``https://`` URL, or ``http://`` on a loopback host (a local walk-through); no query or fragment."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    plain_ok = parts.scheme == "http" and is_loopback(parts.hostname or "")
    if not parts.hostname or not (parts.scheme == "https" or plain_ok) or parts.query or parts.fragment:
        raise ConfigError(
            f"{name} must be an https:// URL without query or fragment (http:// only on a loopback host), "
            f"not {url[:80]!r}."
        )


def _webhook(url: str | None) -> str | None:
    """``MAYA_APPROVAL_WEBHOOK_URL``: an ``https://`` URL, or ``http://`` on a loopback host; None when unset."""
    if not url:
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if not parts.hostname or not (parts.scheme == "https" or (parts.scheme == "http" and is_loopback(parts.hostname))):
        raise ConfigError(
            "MAYA_APPROVAL_WEBHOOK_URL must be an https:// URL (http:// only on a loopback host), not "
            f"{parts.scheme or 'no'} scheme on {parts.hostname or 'no host'}: set it to the receiver's address "
            "(docs/policy.md, 'Telling the approvers') or unset it."
        )
    return url


def _check_origin(origin: str) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query or parts.fragment:
        raise ConfigError(
            f"MAYA_ALLOWED_ORIGINS entry {origin[:80]!r} is not an origin: write each as scheme://host[:port] "
            "(no path, no trailing slash), comma-separated."
        )
