"""The review page for approvers (issue 28): ``/cards`` and ``/cards/<card id>``, under ``--auth oauth``.

A card the team's policy makes wait for other people (``Card.policy``'s requirements) is approved
here by those people, each signed in through the browser sign-in (``runtime.sign_in``; the ID
token's claims the session keeps, ``Principal.claims``, are what the policy's ``approvers`` are
judged by).

- ``GET /cards``: the pending, unexpired cards the signed-in person may approve now
  (``approvals.refusal`` is None), newest first, each with what it waits for. Nobody else's view
  differs by anything but this filter; it changes nothing.
- ``GET /cards/<id>``: the card as the approval page shows it (``card.html.j2``: the exact request,
  digest, warnings, who asked and when, which rules need whom) with Approve and Decline, to a
  person who may approve it; anyone else (the requester, a person whose claims do not qualify, a
  person who approved it already, any card no rule asks approvers for) gets 403 naming the rule
  and what to do next, and nothing changes. A decided card is shown read-only to the people who
  could approve it or did.
- ``POST /cards/<id>``: a same-origin form post carrying the session's form token
  (``BrowserSignIn.form_token``, bound to this browser's session); anything else is 403 and changes
  nothing. Approve is ``ApprovalService.approve_as`` (one approval, once per person; the card
  executes when every requirement is met, with the requester's own Door credential, never the
  approver's); Decline is ``decline_as`` (a qualifying approver ends the card). The service checks
  again whatever this page decided, so a race or a stale page refuses rather than approves. A plan
  card runs its steps in the server's task group and the answer is the card once its first step is
  under way.

Every answer carries the pages' ``HEADERS`` (``no-store``, no framing, nothing loaded from elsewhere).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from confirmation_cards import ApprovalRefused, Approver, Card, CardNotFound, CardStatus
from confirmation_cards.approvals import (
    approver_label,
    counts_for,
    needs_approvers,
    refusal,
    requester_of,
    requirements,
    waiting_line,
)
from confirmation_cards.render import environment
from maya_tools.auth.pages import HEADERS, read_form
from maya_tools.channels.waiting import REVIEW_PATH
from maya_tools.runtime import Runtime

if TYPE_CHECKING:
    from maya_tools.auth.browser import BrowserSignIn
    from maya_tools.auth.tokens import Principal

logger = logging.getLogger("maya_tools")

PATH = REVIEW_PATH
CHANNEL = "review page"
FORM_BODY_LIMIT = 4_096
NO_APPROVERS = (
    "No rule of the team's policy asks for approvers on this card, so only the person who asked for it decides it, "
    "in their own MCP client; nothing was changed."
)


def approver_of(person: Principal) -> Approver:
    """The signed-in person as an approver: their issuer, ``sub`` and the ID token's policy claims."""
    return Approver(
        principal=person.key, issuer=person.issuer, subject=person.subject, name=person.name, claims=person.claims
    )


def may_review(card: Card, person: Approver) -> bool:
    """Whether ``person`` approves or approved ``card``: they count for one of its requirements, or approved it."""
    if any(a.principal == person.principal for a in card.approvals):
        return True
    return needs_approvers(card) and any(counts_for(card, r, person) for r in requirements(card))


def why_not(card: Card, person: Approver) -> str | None:
    """Why ``person`` may not approve ``card`` here now (naming the rule and what to do next); None when they may."""
    if not needs_approvers(card):
        return NO_APPROVERS
    if card.status is not CardStatus.PENDING:
        return (
            None if may_review(card, person) else "This card is no longer waiting for approvals; nothing was changed."
        )
    return refusal(card, person)


class ReviewPages:
    """``/cards`` and ``/cards/<id>`` of one runtime's browser sign-in."""

    def __init__(self, runtime: Runtime, sign_in: BrowserSignIn) -> None:
        self.runtime = runtime
        self.sign_in = sign_in

    def routes(self) -> list[Route]:
        return [
            Route(PATH, self.listing, methods=["GET", "HEAD"]),
            Route(PATH + "/{card_id}", self.card, methods=["GET", "HEAD", "POST"]),
        ]

    async def listing(self, request: Request) -> Response:
        signed_in = await self.sign_in.signed_in(request)
        if signed_in is None:
            return self.sign_in.login_redirect(request)
        person = approver_of(signed_in)
        now = self.runtime.time.now()
        cards = [
            c
            for c in await self.runtime.store.list(CardStatus.PENDING)
            if c.expires_at > now and why_not(c, person) is None
        ]
        cards.sort(key=lambda c: c.created_at, reverse=True)
        return _review(view="list", cards=cards, person=signed_in, waiting={c.id: waiting_line(c) for c in cards})

    async def card(self, request: Request) -> Response:
        signed_in = await self.sign_in.signed_in(request)
        if signed_in is None:
            if request.method == "POST":
                return _review(view="refused", status_code=403, reason="You are not signed in; nothing was changed.")
            return self.sign_in.login_redirect(request)
        person = approver_of(signed_in)
        try:
            card = await self.runtime.service.get(request.path_params["card_id"])  # expired first when due
        except CardNotFound:
            return _review(view="missing", status_code=404)
        reason = why_not(card, person)
        if reason is not None:
            return _review(view="refused", status_code=403, reason=reason)
        purpose = f"review {card.id}"  # a token for this card's form in this browser session only
        form = self.sign_in.form_token(request, purpose) or ""
        if request.method in ("GET", "HEAD"):
            return _card(card, "ask" if card.status is CardStatus.PENDING else "done", form=form)
        posted = await read_form(request, FORM_BODY_LIMIT)
        if (
            posted is None
            or not self.sign_in.same_origin(request)
            or not self.sign_in.form_token_ok(request, posted.get("csrf"), purpose)
        ):
            reason = "This form post did not come from this server's own review page; nothing was changed."
            return _review(view="refused", status_code=403, reason=reason)
        choice = posted.get("decision")
        if choice not in ("approve", "decline"):
            return _review(view="refused", status_code=400, reason="Choose Approve or Decline; nothing was changed.")
        service = self.runtime.service
        try:
            if choice == "decline":
                done = await service.decline_as(card.id, person, reason="declined on the review page", channel=CHANNEL)
            elif card.steps and self.runtime.group is not None:
                done = await self._run_plan(card, person)
            else:
                done = await service.approve_as(card.id, person, channel=CHANNEL)
        except ApprovalRefused as refused:  # the service's own check, whatever this page decided above
            return _review(view="refused", status_code=403, reason=str(refused))
        return _card(done, "done")

    async def _run_plan(self, card: Card, person: Approver) -> Card:
        """Approve a plan card in the server's task group; the card once its first step is under way, or as
        it ended (an approval that does not complete the policy returns at once)."""
        begun = anyio.Event()
        refused: list[ApprovalRefused] = []

        async def progress(done: float, total: float, message: str) -> None:
            begun.set()

        async def run() -> None:
            try:
                await self.runtime.service.approve_as(card.id, person, channel=CHANNEL, progress=progress)
            except ApprovalRefused as error:
                refused.append(error)
            except Exception:  # the card records what happened; the server's task group must go on
                logger.exception("Plan %s approved on the review page ended with an error", card.id)
            finally:
                begun.set()

        assert self.runtime.group is not None
        self.runtime.group.start_soon(run)
        await begun.wait()
        if refused:
            raise refused[0]
        return await self.runtime.store.get(card.id) or card


def _card(card: Card, view: str, *, form: str = "") -> HTMLResponse:
    """The card as the approval page renders it (``card.html.j2``)."""
    context: dict[str, Any] = {
        "card": card,
        "view": view,
        "form": form,
        "pending": CardStatus.PENDING,
        "refresh": "",
        "refresh_seconds": 5,
        "reason": "",
        "asked_by": approver_label(requester_of(card)),
    }
    html = environment().get_template("card.html.j2").render(**context)
    return HTMLResponse(html, headers=HEADERS)


def _review(*, view: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    values: dict[str, Any] = {"cards": [], "person": None, "waiting": {}, "reason": "", **context}
    html = environment().get_template("review.html.j2").render(view=view, **values)
    return HTMLResponse(html, status_code=status_code, headers=HEADERS)
