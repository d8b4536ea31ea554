"""The team's policy file (``MAYA_POLICY``): read, validated, and checked against how the server runs.

The rules themselves and the decision are ``confirmation_cards.policy`` (pure); this module only
reads the TOML file (standard library ``tomllib``) and refuses, in one line, a policy the server
cannot honour: a file that is not valid (naming the rule and the field), or rules that need
verified people (another approver, an approver's claim, the caller's OAuth client) on a server
that has none: stdio, or ``--auth door-token``.
"""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

from confirmation_cards.policy import Policy, PolicyError, parse_policy
from maya_tools.settings import ConfigError, Settings


def read_policy(path: str | Path) -> Policy:
    """The policy in the TOML file at ``path``; ``ConfigError`` (one line) when it cannot be used."""
    where = str(path)
    try:
        text = Path(path).read_bytes()
    except OSError as error:
        raise ConfigError(
            f"MAYA_POLICY {where!r} cannot be read ({error.strerror or type(error).__name__}); "
            "point it at the policy file, or unset it."
        ) from None
    try:
        data = tomllib.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        said = " ".join(str(error).split())
        raise ConfigError(f"MAYA_POLICY {where!r} is not valid TOML: {said}.") from None
    try:
        return parse_policy(data)
    except PolicyError as error:
        raise ConfigError(f"MAYA_POLICY {where!r}: {error}.") from None


def with_policy(settings: Settings, transport: str) -> Settings:
    """``settings`` with ``MAYA_POLICY`` read (when set), or ``ConfigError`` when the policy cannot be
    used with this transport and authentication (``check_policy``)."""
    if settings.policy_file is not None and settings.policy is None:
        settings = replace(settings, policy=read_policy(settings.policy_file))
    check_policy(settings, transport)
    return settings


def check_policy(settings: Settings, transport: str) -> None:
    """Refuse a policy whose rules need verified people where the server has none.

    stdio and ``--auth door-token`` know no person's verified claims and no second person (the
    caller's Door token is all there is), so a rule needing another approver, an approver's claim or
    the caller's OAuth client could never be met honestly there: the server does not start. Deny
    rules and limits work on every transport. In-process servers (``memory``, a library's or a
    test's) have no sign-in at all and are not refused: their cards simply wait.
    """
    policy = settings.policy
    if policy is None:
        return
    why = policy.needs_identities
    if why is None:
        return
    if transport == "stdio" or (transport == "streamable-http" and not settings.oauth):
        how = "stdio" if transport == "stdio" else "--auth door-token"
        raise ConfigError(
            f"MAYA_POLICY: {why}, which needs verified people: serve it with --transport streamable-http "
            f"--auth oauth (docs/policy.md), not {how}, or remove that rule."
        )
