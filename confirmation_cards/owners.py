"""Whose Door credential carries a card out: its owner's own, read again before every request.

DESIGN.md property 13: a change is sent only with the Door credential of the person who owns the
card (the caller's token, or under OAuth the Door token that person connected), by whichever process
carries it on: the server that was asked, a restarted one, the sweep, another replica. A server's
own ``DOOR_TOKEN`` never acts for anyone else.

``Owners.door_for`` answers a client acting as the card's owner, or raises ``NoCredential`` saying
why there is none (disconnected, never stored, replaced). The approval service asks it before a
card's request and before every step of a plan; a plan whose owner's credential is gone or replaced
stops before its next request and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from confirmation_cards.door import DoorApi
from confirmation_cards.models import Card


class NoCredential(Exception):
    """No Door credential of the card's owner can be used here; ``why`` says so in words."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


@dataclass(frozen=True)
class OwnerDoor:
    """A Door client acting as the card's owner, and the fingerprint of the token it sends (None: not known)."""

    door: DoorApi
    fingerprint: str | None = None


class Owners(Protocol):
    """Finds the Door credential of a card's owner (``maya_tools.owner_doors`` for a running server)."""

    async def door_for(self, card: Card) -> OwnerDoor: ...


class FixedDoor:
    """One client for every card: for a library caller that owns every card it approves (and for tests)."""

    def __init__(self, door: DoorApi, fingerprint: str | None = None) -> None:
        self._owned = OwnerDoor(door, fingerprint)

    async def door_for(self, card: Card) -> OwnerDoor:
        return self._owned


class NoDoor:
    """No credential at all: every card is told so (a sweep that was given no way to reach Door)."""

    def __init__(self, why: str = "this server holds no Door credential of the card's owner") -> None:
        self._why = why

    async def door_for(self, card: Card) -> OwnerDoor:
        raise NoCredential(self._why)


async def current_door(owners: Owners, card: Card) -> DoorApi:
    """The owner's client for ``card``'s next request; ``NoCredential`` when there is none, or when the
    credential is not the one the card was approved to run with (replaced since)."""
    found = await owners.door_for(card)
    if card.credential is not None and found.fingerprint is not None and found.fingerprint != card.credential:
        raise NoCredential(
            f"the Door token of the card's owner changed since the approval (it was {card.credential}, "
            f"it is {found.fingerprint} now)"
        )
    return found.door
