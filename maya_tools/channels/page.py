"""The approval page: channel 3, for clients that support URL elicitation but not forms.

A change tool asks such a client to open a one-time link, ``/approve/<card id>/<secret>``, and the
page there shows the card (``card.html.j2``, autoescaped) with Approve and Decline buttons: a plain
HTML form POST, no JavaScript. What keeps the page safe:

- The secret is 32 random bytes, minted per question; the card store keeps only the sha256 of card
  id, principal and secret (``link_hash``), so any server on the store can verify a link. A newer
  link for the same card replaces the older one; deciding spends it (``use_link``, atomic).
- The decision goes through ``lifecycle.decide`` like any other: single use, expiry, the stale
  re-check and idempotent execution hold as they do for a form, and the audit names the approver
  as "approval page" with the principal's token fingerprint.
- Over HTTP with OAuth the page also verifies who opened it (the spec's "MUST verify the identity
  of the user who opens the URL"; a link "MUST NOT" be pre-authenticated): GET and POST need the
  browser sign-in (``runtime.sign_in``) of the card's own person, ``Principal.key`` equal to the
  card's principal. Not signed in: through sign-in and back to the same page. Signed in as someone
  else: 403, nothing changes and the link stays usable for its owner. Door is then called with the
  owner's own Door token from ``runtime.credentials``, which lives in the shared store, so any
  replica decides any link.
- Without OAuth (stdio, in memory, door-token mode: one person, or a caller whose bearer is their
  Door token) Door is called with the token of the principal that planned the card. It is kept in
  this process's memory from the question to the decision (never stored, logged or shown), so the
  link is decided by the server process that sent it: behind a load balancer a replica named by
  ``MAYA_REPLICA`` adds ``?via=<name>`` and the balancer routes it home (docs/deploy.md); any other
  replica answers that the link belongs elsewhere and leaves it usable. Over stdio the page is on
  127.0.0.1 for the one person whose server it is; the link's secret is what guards it there.
- A POST must carry the page's form token and, when the browser sends them, an ``Origin`` equal
  to the page's own and a ``Sec-Fetch-Site`` of same-origin; the ``Host`` must be the one the link
  names. Anything else changes nothing and leaves the link usable. The form token is bound to the
  browser the page was shown in, not to the link (``pages.FormTokens``): an HMAC under a server key
  over the browser's id and the card id. Under OAuth the id is the browser's sign-in session and the
  key is derived from ``MAYA_CREDENTIAL_KEY`` (any replica checks it); without OAuth it is a random
  ``maya-page`` cookie the page's GET sets (``HttpOnly``, ``SameSite=Strict``, for this card's path
  only) and the key is this process's own (the process that sent the link decides it). Holding the
  link is not enough to post the form from another browser.
- A plan card (``change_pool_tier``) runs its steps after the approval, for up to the plan's
  deadlines, so its POST does not wait for the plan: the plan runs in the server's task group and
  the answer, once the approval is recorded, is the card's progress view,
  ``/approve/<card id>/<secret>/progress``. That GET shows each step's status and refreshes itself
  (``<meta http-equiv="refresh">``, no script) until the plan ends; it decides nothing and spends
  nothing. It needs the spent link's secret, checked against the hash this process kept when it
  took the approval (the store forgets a spent link), the same ``Host`` and, under OAuth, the owner's
  browser sign-in; so it is served by the process running the plan (``?via=`` routes it there
  behind a balancer). Elsewhere, or after a restart, it says where to follow the plan instead.
- Every response under the prefix, whatever its status or method (the framework's own 404 and 405
  included), is ``no-store``, cannot be framed, loads nothing from elsewhere and sends no
  ``Referer`` (the secret is in the path): ``PageHeaders`` sets them on the way out. ``HEAD`` is
  answered like ``GET`` and never decides.

Over stdio (and in memory) the page is served on 127.0.0.1, on a free port, from the first link on
for the server's life; over streamable HTTP the same app serves it next to ``/mcp``.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import secrets
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

import anyio
import anyio.abc
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from confirmation_cards import ApprovalRefused, Approver, Card, CardNotFound, CardStatus, lifecycle, token_fingerprint
from confirmation_cards.approvals import requester_of
from confirmation_cards.render import environment
from maya_tools.auth.pages import HEADERS, FormTokens, read_form, same_origin
from maya_tools.channels.waiting import refused_here, waiting_for
from maya_tools.runtime import Runtime

if TYPE_CHECKING:
    from maya_tools.auth.tokens import Principal

logger = logging.getLogger("maya_tools")

PATH = "/approve"
SECRET_BYTES = 32
FORM_BODY_LIMIT = 4_096
REFRESH_SECONDS = 5
"""How often a plan's progress view reloads itself while the plan runs."""


def link_hash(card: Card, secret: str) -> str:
    """What the store keeps of a link: bound to the card and to the principal that planned it."""
    return hashlib.sha256(f"{card.id}\n{card.principal or ''}\n{secret}".encode()).hexdigest()


PAGE_COOKIE = "maya-page"
"""Without OAuth, the browser's id the form token is bound to (with OAuth, its sign-in session)."""


def form_purpose(card_id: str) -> str:
    """What the approval page's form token is for: deciding this card."""
    return f"approve {card_id}"


@dataclass(frozen=True)
class _Asked:
    """What the process that sent a link keeps until it is used: never stored anywhere."""

    token: str | None
    """None under OAuth, where the owner's Door token comes from ``runtime.credentials`` at decision time."""
    approver: str


class _QuietServer(uvicorn.Server):
    """uvicorn without its signal handlers (the MCP server owns SIGINT and SIGTERM), whose shutdown
    begins when ``stop`` is called, not at the next of its 0.1 s ticks. Made in the event loop."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._stop = anyio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def stop(self) -> None:
        self.should_exit = True
        self._stop.set()

    async def main_loop(self) -> None:
        """uvicorn's loop (``on_tick`` refreshes the Date header and reads ``should_exit``), woken by ``stop``."""
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864_000
            with anyio.move_on_after(0.1):
                await self._stop.wait()
            should_exit = await self.on_tick(counter)


class ApprovalPages:
    """The page's routes and, off streamable HTTP, its own loopback server started on first use."""

    def __init__(self, base_url: str | None = None, *, via: str | None = None) -> None:
        self.base_url = base_url
        """Fixed over streamable HTTP (the server's own URL); else set when the page server starts."""
        self.via = via
        """This replica's name (``MAYA_REPLICA``): links carry ``?via=`` so a load balancer sends them here."""
        self.runtime: Runtime | None = None
        pages = Starlette(
            routes=[
                Route(PATH + "/{card_id}/{secret}", self.page, methods=["GET", "HEAD", "POST"]),
                Route(PATH + "/{card_id}/{secret}/progress", self.progress, methods=["GET", "HEAD"]),
            ],
            exception_handlers={404: _not_here, 405: _not_here},
        )
        pages.router.redirect_slashes = False  # a redirect would repeat the secret in a Location header
        self.app: ASGIApp = PageHeaders(pages)
        """Everything under ``PATH``: the page's route, and the page's own answer to anything else."""
        self._asked: dict[str, _Asked] = {}
        self._forms = FormTokens.random()
        """Without OAuth, the key of the form tokens: this process's own, as the link is decided here."""
        self._following: dict[str, str] = {}
        """Card id → the spent link's hash, for the plans this process took the approval of."""
        self._lock = anyio.Lock()
        self._server: _QuietServer | None = None
        self._stopped = anyio.Event()

    # --- links ---------------------------------------------------------------------------------

    async def link_for(self, runtime: Runtime, card: Card, *, token: str | None, approver: str) -> str | None:
        """A new one-time link to ``card``'s page, or None when the card is no longer pending.

        Under OAuth (``runtime.sign_in``) nothing about the caller's token is kept and the link names
        no replica: the signed-in owner's stored Door token decides it anywhere."""
        secret = secrets.token_urlsafe(SECRET_BYTES)
        if not await runtime.store.set_link(card.id, link_hash(card, secret)):
            return None
        oauth = runtime.sign_in is not None
        self._asked[card.id] = _Asked(None if oauth else token, approver)
        base = await self._base(runtime)
        via = "" if self.via is None or oauth else "?" + urlencode({"via": self.via})
        return f"{base}{PATH}/{card.id}/{secret}{via}"

    async def _base(self, runtime: Runtime) -> str:
        if self.base_url is not None:
            return self.base_url
        async with self._lock:
            if self.base_url is None:
                assert runtime.group is not None, "the runtime's task group runs for the server's life"
                port = await runtime.group.start(self._serve)
                self.base_url = f"http://127.0.0.1:{port}"
                logger.info("Approval page served at %s%s/…", self.base_url, PATH)
        return self.base_url

    async def _serve(self, *, task_status: anyio.abc.TaskStatus[int]) -> None:
        sock = socket.socket()
        try:
            sock.bind(("127.0.0.1", 0))
            sock.listen(64)
            config = uvicorn.Config(self.app, log_level="warning", lifespan="off", access_log=False)
            self._server = _QuietServer(config)
            task_status.started(int(sock.getsockname()[1]))  # the listening socket queues until uvicorn accepts
            await self._server.serve(sockets=[sock])
        finally:
            sock.close()
            self._stopped.set()

    async def close(self) -> None:
        """Stop the loopback page server, if it was started."""
        if self._server is not None:
            self._server.stop()
            with anyio.move_on_after(5):
                await self._stopped.wait()

    # --- the page ------------------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        runtime = self.runtime
        card_id = request.path_params["card_id"]
        secret = request.path_params["secret"]
        if runtime is None or not self._own_host(request):
            return _answer(None, "gone", status_code=404)
        try:
            card = await runtime.service.get(card_id)
        except CardNotFound:
            return _answer(None, "gone", status_code=404)
        digest = link_hash(card, secret)
        if not await runtime.store.has_link(card.id, digest):
            return _answer(None, "gone", status_code=404)
        owner: Principal | None = None
        if runtime.sign_in is not None:
            owner = await runtime.sign_in.signed_in(request)
            if owner is None:
                return runtime.sign_in.login_redirect(request)  # and back here, the link unspent
            if owner.key != card.principal:
                return _answer(None, "someone_else", status_code=403)
        person = _person(owner) if owner is not None else requester_of(card)
        waiting = waiting_for(card, person)
        if request.method in ("GET", "HEAD"):
            if waiting is not None:  # the team's policy waits for other people: no Approve here (issue 28)
                reason = refused_here(runtime, card, waiting)
                return self._ask(runtime, request, card, "waiting", reason=reason, status_code=403)
            return self._ask(runtime, request, card)
        form = await read_form(request, FORM_BODY_LIMIT)
        if form is None or not self._same_site(request) or not self._form_ok(runtime, request, card, form.get("csrf")):
            return _answer(None, "refused", status_code=403)
        choice = form.get("decision")
        if choice not in ("approve", "decline"):
            return _answer(None, "refused", status_code=400)
        if choice == "approve" and waiting is not None:
            reason = refused_here(runtime, card, waiting)
            return self._ask(runtime, request, card, "waiting", reason=reason, status_code=403)
        asked = self._asked.get(card.id)
        if owner is not None:
            token = await runtime.credentials.get(owner) if runtime.credentials is not None else None
            if token is None:
                return _answer(None, "not_connected", status_code=409)
            approver = asked.approver if asked is not None else _approver(owner)
        elif asked is None or asked.token is None or token_fingerprint(asked.token) != card.principal:
            return _answer(None, "elsewhere", status_code=409)
        else:
            token, approver = asked.token, asked.approver
        if not await runtime.store.use_link(card.id, digest):
            return _answer(None, "gone", status_code=404)  # another POST spent it first
        self._asked.pop(card.id, None)
        decision: lifecycle.Decision = (
            lifecycle.Approve() if choice == "approve" else lifecycle.Decline("declined on the approval page")
        )
        if card.steps and choice == "approve" and runtime.group is not None:
            self._following[card.id] = digest
            started = await self._run_plan(runtime, card, approver, token, person)
            return self._progress_answer(request, started)
        try:
            done = await lifecycle.decide(
                runtime.service,
                card,
                decision,
                by=approver,
                principal=card.principal,
                door=runtime.door_with(token),
                person=person,
            )
        except ApprovalRefused as refused:  # the service's own check, whatever this page decided above
            return _answer(card, "waiting", form="", reason=str(refused), status_code=403)
        finally:
            runtime.links.settled(card.id)  # the call that sent the link waits for this (channels.link_wait)
        return _answer(done, "done")

    def _ask(
        self,
        runtime: Runtime,
        request: Request,
        card: Card,
        view: str = "ask",
        *,
        reason: str = "",
        status_code: int = 200,
    ) -> Response:
        """The card and its form (Approve and Decline, or only Decline while it ``waiting``s for other
        people), whose token names this browser (its session, or a new page cookie)."""
        purpose = form_purpose(card.id)
        if runtime.sign_in is not None:
            form = runtime.sign_in.form_token(request, purpose) or ""
            return _answer(card, view, form=form, reason=reason, status_code=status_code)
        browser = request.cookies.get(PAGE_COOKIE) or secrets.token_urlsafe(32)
        response = _answer(card, view, form=self._forms.token(browser, purpose), reason=reason, status_code=status_code)
        secure = (self.base_url or "").startswith("https://")
        response.set_cookie(
            PAGE_COOKIE, browser, path=f"{PATH}/{card.id}", secure=secure, httponly=True, samesite="strict"
        )
        return response

    def _form_ok(self, runtime: Runtime, request: Request, card: Card, given: str | None) -> bool:
        """Whether ``given`` is the form token this server made for this browser and this card."""
        if runtime.sign_in is not None:
            return runtime.sign_in.form_token_ok(request, given, form_purpose(card.id))
        return self._forms.check(request.cookies.get(PAGE_COOKIE), form_purpose(card.id), given)

    async def _run_plan(self, runtime: Runtime, card: Card, approver: str, token: str, person: Approver) -> Card:
        """Approve a plan card in the server's task group; the card once its first step is under way
        (its approval recorded) or, when it ends before that, as it ended."""
        begun = anyio.Event()

        async def progress(done: float, total: float, message: str) -> None:
            if not begun.is_set():
                begun.set()
                runtime.links.settled(card.id)  # approved: the waiting call says so (channels.link_wait)

        async def run() -> None:
            try:
                await lifecycle.decide(
                    runtime.service,
                    card,
                    lifecycle.Approve(),
                    by=approver,
                    principal=card.principal,
                    door=runtime.door_with(token),
                    progress=progress,
                    person=person,
                )
            except Exception:  # the card records what happened; the server's task group must go on
                logger.exception("Plan %s approved on the approval page ended with an error", card.id)
            finally:
                begun.set()
                runtime.links.settled(card.id)

        assert runtime.group is not None
        runtime.group.start_soon(run)
        await begun.wait()
        return await runtime.store.get(card.id) or card

    async def progress(self, request: Request) -> Response:
        """A plan's steps after its approval: read only, refreshed until the plan ends."""
        runtime = self.runtime
        card_id = request.path_params["card_id"]
        if runtime is None or not self._own_host(request):
            return _answer(None, "gone", status_code=404)
        kept = self._following.get(card_id)
        card = await runtime.store.get(card_id)
        if card is None or kept is None or not _equal(link_hash(card, request.path_params["secret"]), kept):
            return _answer(None, "not_followed", status_code=404)
        if runtime.sign_in is not None:
            owner = await runtime.sign_in.signed_in(request)
            if owner is None:
                return runtime.sign_in.login_redirect(request)
            if owner.key != card.principal:  # someone else learns not even that the plan exists
                return _answer(None, "not_followed", status_code=404)
        return self._progress_answer(request, card)

    def _progress_answer(self, request: Request, card: Card) -> HTMLResponse:
        running = card.status is CardStatus.EXECUTING
        via = "" if self.via is None else "?" + urlencode({"via": self.via})
        path = request.url.path.removesuffix("/progress") + "/progress" + via
        return _answer(card, "done", refresh=path if running else "")

    def _origin(self, request: Request) -> str | None:
        base = self.base_url
        return None if base is None else "{0.scheme}://{0.netloc}".format(urlsplit(base))

    def _own_host(self, request: Request) -> bool:
        """The ``Host`` the link names (a DNS-rebound name never reaches the page)."""
        origin = self._origin(request)
        return origin is not None and request.headers.get("host") == urlsplit(origin).netloc

    def _same_site(self, request: Request) -> bool:
        origin = self._origin(request)
        return origin is not None and same_origin(request, origin)


def _approver(person: Principal) -> str:
    """The audit's name for the signed-in owner deciding on a replica that did not send the link: never a token."""
    name = f"{person.name} " if person.name else ""
    return f"{name}(sub {person.subject}, principal {person.key}) (approval page, URL elicitation)"


def _person(person: Principal) -> Approver:
    """The signed-in person as an approver: their ``sub`` and the ID token's policy claims the session keeps."""
    return Approver(
        principal=person.key, issuer=person.issuer, subject=person.subject, name=person.name, claims=person.claims
    )


def _equal(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def _answer(
    card: Card | None,
    view: str,
    *,
    form: str = "",
    refresh: str = "",
    reason: str = "",
    status_code: int = 200,
    headers: Mapping[str, str] | None = None,
) -> HTMLResponse:
    context: dict[str, Any] = {
        "card": card,
        "view": view,
        "form": form,
        "pending": CardStatus.PENDING,
        "refresh": refresh,
        "refresh_seconds": REFRESH_SECONDS,
        "reason": reason,
    }
    html = environment().get_template("card.html.j2").render(**context)
    return HTMLResponse(html, status_code=status_code, headers=headers)


async def _not_here(_: Request, error: Exception) -> HTMLResponse:
    """A path under the prefix that is no link (404), or a method the page does not take (405, with ``Allow``)."""
    status = error.status_code if isinstance(error, HTTPException) else 404
    headers = error.headers if isinstance(error, HTTPException) else None
    return _answer(None, "gone" if status == 404 else "refused", status_code=status, headers=headers)


_RAW_HEADERS = [(name.lower().encode(), value.encode()) for name, value in HEADERS.items()]
_NAMES = {name for name, _ in _RAW_HEADERS}


class PageHeaders:
    """Set the page's ``HEADERS`` on every response ``app`` starts, replacing any of the same name."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(n, v) for n, v in message.get("headers", []) if n.lower() not in _NAMES]
                message = {**message, "headers": kept + _RAW_HEADERS}
            await send(message)

        await self.app(scope, receive, with_headers)
