"""A token holder that no repr, log line or traceback local shows."""

from __future__ import annotations


class Secret:
    """Holds the token so that no repr, log line or traceback local shows it."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "'[secret]'"
