"""Telling the approvers: ``MAYA_APPROVAL_WEBHOOK_URL`` gets a small JSON message when a card starts
waiting for the team's approvers and when it is decided (issue 28).

- What is sent (``message``): Slack-compatible ``text`` and the structured fields ``event``
  (``waiting`` or ``decided``), ``card``, ``cluster``, ``cluster_id``, ``pool``, ``action`` (the policy
  file's word: ``scale``, ``remove``, …),
  ``requested_by``, ``rules``, ``waiting_for``, ``approved_by``, ``status``, ``at`` and ``url``, the
  card's review page (``<MAYA_PUBLIC_URL>/cards/<card id>``), which holds no secret: opening it needs
  the approver's own browser sign-in. Never a token, an approval-page link or an app secret; Door's
  strings pass ``clean_text`` (one line, capped) like every rendering of a card.
- Where it comes from (``NotifyingStore``): the card store itself, wrapped: a ``create`` of a card
  whose policy needs approvers is "waiting"; a ``transition`` of such a card into a final status
  (executed, failed, declined, expired, stale, outcome_unknown, stopped) is "decided". The store
  moves a card once (atomically), so each message is sent by exactly the one process that moved it,
  whichever replica that is.
- How it travels (``Webhook``): ``send`` only appends to a bounded queue (``QUEUE_CAP``; when full
  the oldest message is dropped with a log line) and returns: the card never waits for the
  receiver. A task in the server's task group posts each message, up to ``TRIES`` times with
  backoff (``BACKOFF``: 0.5 s, then doubling up to 4 s; the sleep is injectable) on a transport
  error, a 429 or a 5xx; another answer ends that message with a log line. Logs name the receiver's
  host only: a webhook URL often holds a secret (Slack's does).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

import anyio
import httpx2

from confirmation_cards.approvals import approver_label, needs_approvers, requester_of, waiting_line
from confirmation_cards.models import Card, CardStatus
from confirmation_cards.policy import ACTION_OF
from confirmation_cards.render import clean_text

if TYPE_CHECKING:
    from confirmation_cards.stores import AuditEntry, CardStore

logger = logging.getLogger("maya_tools")

QUEUE_CAP = 256
TRIES = 3
BACKOFF = (0.5, 4.0)
"""The first wait between two tries, and the longest (each wait doubles the last)."""
TIMEOUT = 10.0
FINAL = frozenset(s for s in CardStatus if s not in (CardStatus.PENDING, CardStatus.EXECUTING))
REVIEW_PATH = "/cards"
WORD_OF = {action: word for word, action in ACTION_OF.items()}
"""A card action in the policy file's words (``scale_node_pool`` → ``scale``)."""


def review_url(public_url: str | None, card_id: str) -> str:
    """The card's review page (no secret in it: opening it needs the approver's browser sign-in)."""
    return f"{(public_url or '').rstrip('/')}{REVIEW_PATH}/{card_id}"


def _said(value: str, limit: int = 200) -> str:
    return clean_text(value, limit)


def message(card: Card, event: str, public_url: str | None) -> dict[str, Any]:
    """The webhook's JSON for ``card`` (``event``: ``waiting`` or ``decided``)."""
    url = review_url(public_url, card.id)
    who = approver_label(requester_of(card))
    rules = list(card.policy.rules) if card.policy is not None else []
    waiting = waiting_line(card) if card.status is CardStatus.PENDING else ""
    approved = [approver_label(a) for a in card.approvals]
    what = f"{WORD_OF.get(card.action, card.action)} of pool {_said(card.target)} on cluster {_said(card.cluster_name)}"
    if event == "waiting":
        text = f"Card {card.id} waits for approval: {what}, asked by {who}; it {waiting}. Review it: {url}"
    else:
        by = f" (approved by {', '.join(approved)})" if approved and card.status is not CardStatus.DECLINED else ""
        declined = f" by {_said(card.declined_by)}" if card.declined_by else ""
        how = f"declined{declined}" if card.status is CardStatus.DECLINED else card.status.value
        text = f"Card {card.id} was decided: {what}, asked by {who}: {how}{by}. {url}"
    return {
        "text": text,
        "event": event,
        "card": card.id,
        "cluster": _said(card.cluster_name),
        "cluster_id": card.cluster_id,
        "pool": _said(card.target),
        "action": WORD_OF.get(card.action, card.action),
        "requested_by": who,
        "rules": rules,
        "waiting_for": waiting,
        "approved_by": approved,
        "status": card.status.value,
        "at": (card.decided_at or card.created_at).isoformat(),
        "url": url,
    }


Sleep = Callable[[float], Awaitable[None]]


class Webhook:
    """Posts queued messages to ``url``; ``run`` (in the server's task group) does the posting."""

    def __init__(
        self,
        url: str,
        *,
        public_url: str | None,
        http: httpx2.AsyncClient | None = None,
        sleep: Sleep = anyio.sleep,
        cap: int = QUEUE_CAP,
    ) -> None:
        self.url = url
        self.public_url = public_url
        self.host = urlsplit(url).hostname or "the webhook"
        """What a log line names: never the URL, which may hold a secret."""
        self._http = http
        self._sleep = sleep
        self._queue: deque[dict[str, Any]] = deque()
        self._cap = cap
        self._ready = anyio.Event()
        self.dropped = 0
        self.sent = 0

    def send(self, card: Card, event: str) -> None:
        """Queue ``card``'s message; never waits. A full queue drops its oldest message."""
        if len(self._queue) >= self._cap:
            old = self._queue.popleft()
            self.dropped += 1
            logger.warning(
                "approval webhook queue full (%d): dropped the %s message of card %s",
                self._cap,
                old["event"],
                old["card"],
            )
        self._queue.append(message(card, event, self.public_url))
        self._ready.set()

    async def run(self) -> None:
        """Post every queued message, oldest first, for the server's life."""
        own = self._http is None
        http = self._http or httpx2.AsyncClient(timeout=TIMEOUT, follow_redirects=False)
        try:
            while True:
                while not self._queue:
                    self._ready = anyio.Event()
                    await self._ready.wait()
                await self._post(http, self._queue.popleft())
        finally:
            if own:
                with anyio.CancelScope(shield=True):
                    await http.aclose()

    async def _post(self, http: httpx2.AsyncClient, body: dict[str, Any]) -> None:
        wait = BACKOFF[0]
        for attempt in range(1, TRIES + 1):
            try:
                answer = await http.post(self.url, json=body)
            except httpx2.HTTPError as error:
                why = type(error).__name__
            else:
                if answer.status_code < 300:
                    self.sent += 1
                    return
                if answer.status_code != 429 and answer.status_code < 500:
                    logger.warning(
                        "approval webhook at %s refused the %s message of card %s (%d); not retried",
                        self.host,
                        body["event"],
                        body["card"],
                        answer.status_code,
                    )
                    return
                why = f"HTTP {answer.status_code}"
            if attempt == TRIES:
                logger.warning(
                    "approval webhook at %s: the %s message of card %s was not delivered after %d tries (%s)",
                    self.host,
                    body["event"],
                    body["card"],
                    TRIES,
                    why,
                )
                return
            await self._sleep(wait)
            wait = min(wait * 2, BACKOFF[1])


class NotifyingStore:
    """``store`` whose ``create`` and final ``transition`` of a card needing approvers tell ``webhook``;
    every other method is the store's own."""

    def __init__(self, store: CardStore, webhook: Webhook) -> None:
        self._store = store
        self._webhook = webhook

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def create(self, card: Card) -> Card:
        saved = await self._store.create(card)
        if needs_approvers(saved):
            self._webhook.send(saved, "waiting")
        return saved

    async def transition(
        self,
        card_id: str,
        *,
        expected: CardStatus,
        to: CardStatus,
        entry: AuditEntry,
        update: Mapping[str, Any] | None = None,
        live_at: datetime | None = None,
    ) -> Card | None:
        moved = await self._store.transition(
            card_id, expected=expected, to=to, entry=entry, update=update, live_at=live_at
        )
        if moved is not None and to in FINAL and needs_approvers(moved):
            self._webhook.send(moved, "decided")
        return moved


def notifying(store: CardStore, webhook: Webhook | None) -> CardStore:
    """``store``, telling ``webhook`` of its cards that wait for approvers (the store itself without one)."""
    return store if webhook is None else cast("CardStore", NotifyingStore(store, webhook))
