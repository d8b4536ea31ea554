"""The MCP edge of the error tree: every anticipated failure becomes a ``ToolError`` a person can act on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mcp.server.mcpserver.exceptions import ToolError

from backend_client.errors import DoorError
from confirmation_cards import PreflightError


@contextmanager
def door_errors() -> Iterator[None]:
    """Turn Door refusals and preflight refusals into the sentence the model reads.

    The messages come from ``DoorError.__str__`` and ``PreflightError.__str__``: they name the
    rule, the field and what to do, and never hold a token. Anything else is a bug and propagates.
    """
    try:
        yield
    except PreflightError as exc:
        raise ToolError(f"Refused before any change (no card was made): {exc}") from exc
    except DoorError as exc:
        raise ToolError(str(exc)) from exc
