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


def default_card_store(env: Mapping[str, str]) -> Path:
    """The card store under the user's state directory (XDG_STATE_HOME, else ~/.local/state)."""
    base = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local" / "state")
    return Path(base) / "maya-tools" / "cards.sqlite3"


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
    settle_seconds: float = 30.0
    sweep_seconds: float = 10.0
    store_pool_size: int = 10
    request_state_key: str | None = field(default=None, repr=False)
    replica: str | None = None
    """This replica's name behind a load balancer; approval-page links carry it (``?via=``) so the
    balancer sends them back here, where the asking caller's token is held."""
    public_url: str | None = None
    """The URL people reach this server at (the load balancer's), for approval-page links."""

    @property
    def embedded(self) -> bool:
        return self.door_api_url is None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Read ``DOOR_API_URL``, ``DOOR_TOKEN``, ``MAYA_CARD_STORE``, ``MAYA_READ_ONLY``,
        ``MAYA_CARD_TTL_SECONDS``, ``MAYA_REFERENCE_TIME_SCALE``, ``MAYA_USER``, ``MAYA_DOOR_TIMEOUT_SECONDS``
        (one Door request), ``MAYA_SWEEP_SECONDS`` (how often orphaned executing cards are looked for, at
        most 20), ``MAYA_SETTLE_SECONDS`` (how long an unclear answer is settled by reading
        Door back), ``MAYA_STORE_POOL_SIZE`` (connections to a PostgreSQL card store) and
        ``MAYA_REQUEST_STATE_KEY`` (the key every replica seals ``requestState`` with), ``MAYA_REPLICA``
        and ``MAYA_PUBLIC_URL`` (behind a load balancer); keyword overrides win."""
        env = os.environ if env is None else env
        values: dict[str, object] = {
            "door_api_url": env.get("DOOR_API_URL") or None,
            "door_token": env.get("DOOR_TOKEN") or None,
            "card_store": env.get("MAYA_CARD_STORE") or str(default_card_store(env)),
            "read_only": env.get("MAYA_READ_ONLY", "").lower() in {"1", "true", "yes", "on"},
            "card_ttl_seconds": float(env.get("MAYA_CARD_TTL_SECONDS") or 600.0),
            "reference_time_scale": float(env.get("MAYA_REFERENCE_TIME_SCALE") or 10.0),
            "approver": env.get("MAYA_USER") or env.get("USER") or "local user",
            "door_timeout_seconds": float(env.get("MAYA_DOOR_TIMEOUT_SECONDS") or 30.0),
            "settle_seconds": float(env.get("MAYA_SETTLE_SECONDS") or 30.0),
            "sweep_seconds": min(float(env.get("MAYA_SWEEP_SECONDS") or 10.0), 20.0),
            "store_pool_size": int(env.get("MAYA_STORE_POOL_SIZE") or 10),
            "request_state_key": env.get("MAYA_REQUEST_STATE_KEY") or None,
            "replica": env.get("MAYA_REPLICA") or None,
            "public_url": (env.get("MAYA_PUBLIC_URL") or "").rstrip("/") or None,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]
