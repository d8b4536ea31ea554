"""What the interpreter answers: one tool call, or a reply that calls no tool."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ReplyKind = Literal["help", "clarify", "refuse", "out_of_scope"]


@dataclass(frozen=True)
class ToolCall:
    """One maya-tools tool and its arguments, exactly as the chat sends them. ``relative`` is the
    count before and after when the person said it relatively ("2 more"), for the chat to say back."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    relative: tuple[int, int] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Reply:
    """No tool: a clarifying question, a refusal with its reason, what maya-tools does not do, or the help text."""

    kind: ReplyKind
    text: str
