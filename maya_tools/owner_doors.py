"""The running server's answer to "whose Door credential runs this card" (DESIGN.md property 13).

- A card of a signed-in person (``Card.owner``: issuer and ``sub``, under ``--auth oauth``) runs
  with the Door token that person connected on ``/connect``, read from the shared database at each
  request: any replica, or a server restarted on the same store, acts as that person and no one
  else; once they disconnect there is none, and the card or plan stops before its next request.
- A card bound to a Door token (stdio, in memory, ``--auth door-token``: ``Card.principal`` is the
  token's fingerprint) runs only with a token of that very fingerprint: the configured ``DOOR_TOKEN``
  where it is that token (one person's own server), or the caller's own bearer as long as this
  process has seen it (kept in memory, never stored: a restarted server does not have it).
- ``DOOR_TOKEN`` never runs a signed-in person's card, nor a card of another token.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Protocol

from backend_client import DoorClient
from confirmation_cards import Card, token_fingerprint
from confirmation_cards.owners import NoCredential, OwnerDoor
from maya_tools.settings import Settings

if TYPE_CHECKING:
    from maya_tools.auth import DoorCredentials


class Server(Protocol):
    """What of the running server finding a card's owner needs (``maya_tools.runtime.Runtime``)."""

    settings: Settings
    embedded_token: str | None
    credentials: DoorCredentials | None

    @property
    def oauth(self) -> bool: ...

    def door_with(self, token: str) -> DoorClient: ...


logger = logging.getLogger("maya_tools")

CALLERS_KEPT = 10_000
"""Callers' own Door tokens (``--auth door-token``) kept in this process's memory, newest last."""


class RuntimeOwners:
    """``confirmation_cards.owners.Owners`` for one running server."""

    def __init__(self, runtime: Server) -> None:
        self._runtime = runtime
        self._callers: OrderedDict[str, str] = OrderedDict()

    def saw_caller(self, token: str) -> None:
        """Keep a caller's own Door token in memory (``--auth door-token``), so that their card can run
        with it while this process lives; never written anywhere."""
        key = token_fingerprint(token)
        self._callers[key] = token
        self._callers.move_to_end(key)
        while len(self._callers) > CALLERS_KEPT:
            self._callers.popitem(last=False)

    async def door_for(self, card: Card) -> OwnerDoor:
        runtime = self._runtime
        if card.owner is not None:
            return await self._person(card)
        if runtime.oauth:
            raise NoCredential("the card is bound to no signed-in person, and this server acts only for people")
        for token in self._tokens():
            if token_fingerprint(token) == card.principal:
                return OwnerDoor(runtime.door_with(token), token_fingerprint(token))
        raise NoCredential(
            "the Door token that planned it is not available to this server (a caller's own token is never "
            "stored, so a restarted server does not have it)"
        )

    def _tokens(self) -> list[str]:
        runtime = self._runtime
        found = list(self._callers.values())
        if runtime.settings.door_token:
            found.append(runtime.settings.door_token)
        if runtime.embedded_token is not None:
            found.append(runtime.embedded_token)
        return found

    async def _person(self, card: Card) -> OwnerDoor:
        from maya_tools.auth import CredentialError, Principal

        runtime = self._runtime
        assert card.owner is not None
        if runtime.credentials is None:
            raise NoCredential("this server does not sign people in, so it holds no Door token of the card's owner")
        person = Principal(issuer=card.owner.issuer, subject=card.owner.subject, name=None)
        if person.key != card.principal:
            raise NoCredential("the card's owner does not match the person it is bound to")
        try:
            token = await runtime.credentials.get(person)
        except CredentialError as error:
            logger.warning("the stored Door token of %s cannot be read: %s", person.key, error)
            raise NoCredential("its owner's stored Door token cannot be read with the configured keys") from error
        if token is None:
            raise NoCredential("its owner has no Door token connected now (disconnected on /connect)")
        return OwnerDoor(runtime.door_with(token), token_fingerprint(token))
