"""The chat's settings, read once from the environment: the chat's only module that reads it.

The chat is its own program (an MCP client of the server), so it does not read the server's
settings: what the server needs it reads itself when the chat starts it (``server_env``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_MODEL = "claude-sonnet-5-5"
_MODEL_ONLY = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


@dataclass(frozen=True)
class ChatSettings:
    """What ``maya-tools chat`` and ``maya-tools eval`` need: the model, its key, the server's environment.

    ``anthropic_api_key`` None means offline: the chat uses its built-in interpreter instead of a model.
    ``server_env`` is the environment a stdio server is started with; the model's key is not in it.
    """

    model: str = DEFAULT_MODEL
    anthropic_api_key: str | None = field(default=None, repr=False)
    door_token: str | None = field(default=None, repr=False)
    user: str | None = None
    server_env: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ChatSettings:
        """Read ``MAYA_MODEL``, ``ANTHROPIC_API_KEY``, ``DOOR_TOKEN`` and ``MAYA_USER`` (else ``USER``)."""
        env = os.environ if env is None else env
        return cls(
            model=env.get("MAYA_MODEL") or DEFAULT_MODEL,
            anthropic_api_key=env.get("ANTHROPIC_API_KEY") or None,
            door_token=env.get("DOOR_TOKEN") or None,
            user=env.get("MAYA_USER") or env.get("USER") or None,
            server_env={k: v for k, v in env.items() if k not in _MODEL_ONLY},
        )
