"""What the server opens once at start-up and every tool shares: the HTTP client, the card store,
the approval service, and the embedded reference backend when no Door URL is configured.

The embedded backend is ``maya_tools.embedded``'s, imported only when it is used; the runtime sees
its simulated time through ``DoorTime`` alone."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import anyio.abc
import httpx2
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from backend_client import DoorClient
from backend_client.tls import VerifyingTransport, verifying_tls
from confirmation_cards import ApprovalService, Card, CardStore, Planner, RoleMemory, token_fingerprint
from confirmation_cards.approvals import Approver
from confirmation_cards.audit_log import AuditLog
from confirmation_cards.models import CardOwner
from confirmation_cards.stores import is_postgres, open_store
from maya_tools.channels.link_wait import LinkSignals
from maya_tools.owner_doors import RuntimeOwners
from maya_tools.settings import Settings

if TYPE_CHECKING:
    from maya_tools.auth import BrowserSignIn, ConnectRequests, DoorCredentials, JwtTokenVerifier, Principal
    from maya_tools.embedded import ReferenceBackend
    from maya_tools.webhook import Webhook

logger = logging.getLogger("maya_tools")

Transport = Literal["stdio", "streamable-http", "memory"]


class DoorTime(Protocol):
    """Door's time, as the server dates cards by it and waits for it."""

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class WallTime:
    """A real Door's time: the wall clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


class ApprovalLinks(Protocol):
    """Mints one-time links to a card's approval page (URL elicitation)."""

    async def link_for(self, runtime: Runtime, card: Card, *, token: str | None, approver: str) -> str | None: ...


@dataclass
class Runtime:
    """Shared state of one running server."""

    settings: Settings
    transport: Transport
    http: httpx2.AsyncClient
    base_url: str
    store: CardStore
    service: ApprovalService
    time: DoorTime
    embedded_token: str | None
    """The embedded backend's demo admin token; None when the server talks to a real Door."""
    pages: ApprovalLinks | None = None
    """The approval page (``maya_tools.channels.page``), set by the server's lifespan."""
    group: anyio.abc.TaskGroup | None = None
    """Tasks that run for the server's life (the sweep, the approval page's loopback server)."""
    swept: anyio.Event = field(default_factory=anyio.Event)
    """Set once the first sweep after start has run (cards a stopped server left executing are settled)."""
    verifier: JwtTokenVerifier | None = None
    """With OAuth over HTTP: the verifier of the MCP access tokens (``maya_tools.auth.tokens``)."""
    credentials: DoorCredentials | None = None
    """With OAuth over HTTP: each person's own Door token, sealed in the card store's database."""
    sign_in: BrowserSignIn | None = None
    """With OAuth over HTTP: the browser sign-in that guards ``/connect`` (and the approval page)."""
    connect_requests: ConnectRequests | None = None
    """With OAuth over HTTP: the ``/connect?for=`` links a URL elicitation sends."""
    webhook: Webhook | None = None
    """With ``MAYA_APPROVAL_WEBHOOK_URL``: the approvers' webhook (``maya_tools.webhook``), run in ``group``."""
    links: LinkSignals = field(default_factory=LinkSignals)
    """Wakes calls waiting for what an opened approval or connect link decides (``channels.link_wait``)."""
    owners: RuntimeOwners = field(init=False)
    """Whose Door credential runs each card (``maya_tools.owner_doors``): the approval service's."""

    def __post_init__(self) -> None:
        self.owners = RuntimeOwners(self)
        self.service.owners = self.owners

    @property
    def oauth(self) -> bool:
        """Whether callers are people signed in through ``MAYA_OAUTH_ISSUER`` (``serve --auth oauth``)."""
        return self.transport == "streamable-http" and self.settings.oauth

    @property
    def public_url(self) -> str | None:
        """Where people reach this server (``MAYA_PUBLIC_URL``); None on stdio and in memory."""
        return self.settings.public_url if self.transport == "streamable-http" else None

    @property
    def connect_url(self) -> str | None:
        """The page where a person connects their Door token, with OAuth."""
        return None if not self.oauth or self.public_url is None else self.public_url + "/connect"

    @property
    def embedded(self) -> bool:
        return self.embedded_token is not None

    @property
    def store_kind(self) -> str:
        """``postgresql`` or ``sqlite``: which kind of card store this server shares (never its URL)."""
        return "postgresql" if is_postgres(self.settings.card_store) else "sqlite"

    def token_for(self, ctx: Context[Any, Any]) -> str:
        """The Door token of whoever made this MCP request.

        With OAuth it is the person's own Door token, which they connected on ``/connect``
        (``DoorCredentials``; looked up for the request by ``maya_tools.http.DoorTokens``): the MCP
        access token is never sent to Door, and ``DOOR_TOKEN`` never serves a caller. With
        ``--auth door-token`` it is the request's own bearer token (Door's roles apply per person,
        and it is never stored); on stdio and in memory it is the configured ``DOOR_TOKEN``.
        """
        if self.oauth:
            person = self.person(ctx)
            token = _scope_of(ctx).get(DOOR_TOKEN_KEY)
            if not isinstance(token, str):
                from maya_tools.auth.errors import DoorNotConnected

                raise DoorNotConnected(person.key, self.connect_url)
            return token
        if self.transport == "streamable-http":
            headers = ctx.headers or {}
            token = bearer_of(headers.get("authorization") or headers.get("Authorization"))
            if token is None:
                raise ToolError("This request carries no Door token: send `Authorization: Bearer <your Door token>`.")
            self.owners.saw_caller(token)  # in memory only: the caller's card runs with their own token
            return token
        if self.settings.door_token:
            return self.settings.door_token
        if self.embedded_token is not None:
            return self.embedded_token
        raise ToolError("No Door token is configured: set DOOR_TOKEN in the server's environment.")

    def door(self, ctx: Context[Any, Any]) -> DoorClient:
        """A client of Door acting for the caller, on the shared connection pool."""
        return self.door_with(self.token_for(ctx))

    def door_with(self, token: str) -> DoorClient:
        return DoorClient(
            self.base_url, token, http_client=self.http, sleep=self.sleep, timeout=self.settings.door_timeout_seconds
        )

    def owner(self, ctx: Context[Any, Any]) -> CardOwner | None:
        """Under OAuth, the person a card this caller plans belongs to (their Door token runs it); else None."""
        if not self.oauth:
            return None
        person = self.person(ctx)
        return CardOwner(issuer=person.issuer, subject=person.subject, name=person.name)

    def person(self, ctx: Context[Any, Any]) -> Principal:
        """With OAuth, the verified person of this request (issuer + ``sub``, from the access token)."""
        from maya_tools.auth.resource import principal_of

        person = principal_of(_scope_of(ctx))
        if person is None:  # cannot happen behind ``maya_tools.auth.resource.protect``; refuse, never guess
            raise ToolError("This request carries no verified sign-in: send an OAuth access token for this server.")
        return person

    def principal(self, ctx: Context[Any, Any]) -> str:
        """Who is calling; cards, answers, sessions and app secrets are bound to it (DESIGN.md property 12).

        With OAuth, ``Principal.key``: issuer and ``sub`` hashed together, so it survives token refreshes
        and never contains a token; otherwise the fingerprint of the caller's Door token."""
        if self.oauth:
            return self.person(ctx).key
        return token_fingerprint(self.token_for(ctx))

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of Door's time (simulated on the embedded backend, see ``maya_tools.embedded``)."""
        await self.time.sleep(seconds)

    def approver(self, ctx: Context[Any, Any], channel: str = "MCP elicitation") -> str:
        """Who answered, as the audit records it: never a token.

        With OAuth, the person's readable claim (``MAYA_OAUTH_NAME_CLAIM``), ``sub`` and principal;
        over HTTP without it, the caller's token fingerprint; both with the MCP client's name and
        version. On stdio and in memory, the configured user (MAYA_USER), who owns the configured token.
        """
        if self.oauth:
            person = self.person(ctx)
            sub = "".join(ch for ch in person.subject if ch.isprintable())[:80]
            name = "".join(ch for ch in person.name or "" if ch.isprintable())[:80]
            who = f"{name} (sub {sub}, {person.key})" if name else f"sub {sub} ({person.key})"
            return f"{who} via {client_name(ctx)} ({channel})"
        if self.transport == "streamable-http":
            return f"{self.principal(ctx)} via {client_name(ctx)} ({channel})"
        return f"{self.settings.approver} ({channel})"

    def planner(self, door: DoorClient, principal: str | None = None, client: str | None = None) -> Planner:
        """A planner for the caller: the team's policy (``MAYA_POLICY``) applies to every card it plans,
        judged with the caller's OAuth ``client`` (``client_of``) where a rule names clients."""
        return Planner(
            door,
            clock=self.now,
            ttl=timedelta(seconds=self.settings.card_ttl_seconds),
            principal=principal,
            roles=self.service.roles,
            policy=self.settings.policy,
            client=client,
        )

    def client_of(self, ctx: Context[Any, Any]) -> str | None:
        """With OAuth, the OAuth client of the caller's access token (``client_id``, else ``azp``); else None."""
        if not self.oauth:
            return None
        from maya_tools.auth.resource import verified_of

        verified = verified_of(_scope_of(ctx))
        return verified.client_id if verified is not None else None

    def person_approver(self, ctx: Context[Any, Any]) -> Approver:
        """The caller as an approver of cards: with OAuth their verified person and the access token's
        claims (what the policy's ``approvers`` are judged by); else their principal, holding no claims."""
        if not self.oauth:
            return Approver(principal=self.principal(ctx))
        from maya_tools.auth.resource import verified_of

        person = self.person(ctx)
        verified = verified_of(_scope_of(ctx))
        claims = dict(verified.claims or {}) if verified is not None else {}
        return Approver(
            principal=person.key, issuer=person.issuer, subject=person.subject, name=person.name, claims=claims
        )

    def now(self) -> datetime:
        return self.time.now()


def bearer_of(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value; None for any other value.

    The one reading of the header: a call's Door token, a session's owner and a requestState's
    principal all come from it."""
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def client_name(ctx: Context[Any, Any]) -> str:
    """The MCP client's name and version as it introduced itself (cut short), or "an unnamed MCP client"."""
    params = getattr(ctx.session, "client_params", None)
    info = getattr(params, "client_info", None)
    if info is None:
        return "an unnamed MCP client"
    said = f"{info.name} {info.version}".strip()
    return "".join(ch for ch in said if ch.isprintable())[:80] or "an unnamed MCP client"


DOOR_TOKEN_KEY = "maya_tools.door_token"
"""Where ``maya_tools.http.DoorTokens`` leaves the person's Door token in the ASGI scope of a request."""


def _scope_of(ctx: Context[Any, Any]) -> dict[str, Any]:
    scope = getattr(ctx.request_context.request, "scope", None)
    return scope if isinstance(scope, dict) else {}


def hold_door_token(ctx: Context[Any, Any], token: str) -> None:
    """Give this HTTP request the Door token its person connected while it waited (``token_for``
    finds it as if ``maya_tools.http.DoorTokens`` had found it at the request's start)."""
    scope = getattr(ctx.request_context.request, "scope", None)
    if isinstance(scope, dict):
        scope[DOOR_TOKEN_KEY] = token


def runtime_of(ctx: Context[Any, Any]) -> Runtime:
    runtime = ctx.request_context.lifespan_context
    assert isinstance(runtime, Runtime)
    return runtime


@asynccontextmanager
async def open_runtime(
    settings: Settings, transport: Transport, *, backend: ReferenceBackend | None = None
) -> AsyncIterator[Runtime]:
    """Open the shared pieces; with no ``DOOR_API_URL`` (or an injected ``backend``), start the
    reference backend in-process."""
    time: DoorTime = WallTime()
    embedded_token: str | None = None
    # The store first: a database that cannot be reached stops the server before it serves anyone.
    audit_log = None if settings.audit_log is None else AuditLog(settings.audit_log)
    try:
        store = await open_store(
            settings.card_store,
            pool_size=settings.store_pool_size,
            connect_seconds=settings.store_connect_seconds,
            replica=settings.replica,
            observer=audit_log,
        )
    except BaseException:
        if audit_log is not None:
            audit_log.close()
        raise
    webhook: Webhook | None = None
    if settings.approval_webhook_url is not None:
        from maya_tools.webhook import Webhook, notifying

        webhook = Webhook(settings.approval_webhook_url, public_url=settings.public_url, sleep=anyio.sleep)
        store = notifying(store, webhook)  # tells it of the cards that wait for approvers, and their outcome
    if settings.embedded or backend is not None:
        # Imported here only: a server pointed at Door never loads FastAPI or the reference backend.
        from maya_tools.embedded import embed

        embedded = embed(settings.reference_time_scale, backend)
        logger.info(
            "No DOOR_API_URL: using the embedded reference backend (demo seed, time ×%s); nothing reaches Door.",
            settings.reference_time_scale,
        )
        http = embedded.http_client()
        base_url = embedded.base_url
        time = embedded.time
        embedded_token = embedded.admin_token
    else:
        assert settings.door_api_url is not None
        http = httpx2.AsyncClient(timeout=30.0, transport=VerifyingTransport())  # TLS made on the first call
        base_url = settings.door_api_url
        logger.info("Door API at %s", base_url)
    service = ApprovalService(
        store,
        clock=time.now,
        sleep=time.sleep,
        roles=RoleMemory(),
        settle_window=settings.settle_seconds,
        step_timeout=settings.plan_step_timeout_seconds,
    )
    service.plans.poll = settings.plan_poll_seconds
    runtime = Runtime(settings, transport, http, base_url, store, service, time, embedded_token, webhook=webhook)
    issuer_http: httpx2.AsyncClient | None = None
    try:
        if runtime.oauth:
            issuer_http = httpx2.AsyncClient(timeout=10.0, verify=verifying_tls())
            await _open_oauth(runtime, issuer_http)
        async with anyio.create_task_group() as group:
            runtime.group = group
            group.start_soon(_sweep, runtime)
            if webhook is not None:
                group.start_soon(webhook.run)
            try:
                yield runtime
            finally:
                group.cancel_scope.cancel()
    finally:
        if runtime.credentials is not None:
            await runtime.credentials.close()
        if issuer_http is not None:
            await issuer_http.aclose()
        await http.aclose()
        await store.close()
        if audit_log is not None:
            audit_log.close()  # what is queued is written: at most a moment, at shutdown


async def _open_oauth(runtime: Runtime, http: httpx2.AsyncClient) -> None:
    """The verifier of access tokens, each person's Door tokens (in the card store's database) and the
    browser sign-in, for ``serve --auth oauth`` (``settings.choose_auth`` checked the settings)."""
    from maya_tools.auth import (
        BrowserSignIn,
        ConnectRequests,
        IssuerKeys,
        JwtTokenVerifier,
        open_credentials,
        parse_credential_keys,
    )

    settings = runtime.settings
    assert settings.oauth_issuer and settings.resource_url and settings.public_url
    assert settings.oauth_client_id and settings.oauth_client_secret
    keys = IssuerKeys(settings.oauth_issuer, http)
    runtime.verifier = JwtTokenVerifier(
        issuer=settings.oauth_issuer,
        resource=settings.resource_url,
        http=http,
        name_claims=settings.oauth_name_claims,
        token_types=settings.oauth_token_types,
        keys=keys,
    )
    from maya_tools.auth.pages import FormTokens

    credential_keys = parse_credential_keys(settings.credential_key)
    runtime.credentials = await open_credentials(
        settings.card_store, credential_keys, pool_size=settings.store_pool_size
    )
    runtime.sign_in = BrowserSignIn(
        keys=keys,
        http=http,
        client_id=settings.oauth_client_id,
        client_secret=settings.oauth_client_secret,
        public_url=settings.public_url,
        database=runtime.credentials.database,
        session_seconds=settings.session_seconds,
        name_claims=settings.oauth_name_claims,
        keep_claims=settings.policy.claims if settings.policy is not None else (),
        form_tokens=FormTokens.derived(credential_keys),  # every replica makes and checks the same tokens
    )
    runtime.connect_requests = ConnectRequests(runtime.credentials.database, settled=runtime.links.settled)


SWEEP_EVERY = 10.0  # the default of MAYA_SWEEP_SECONDS
"""Seconds (real time) between two sweeps: expired cards closed, orphaned executing cards settled."""


async def _sweep(runtime: Runtime) -> None:
    """At start and then every ``sweep_seconds`` (10 s by default): settle cards whose executing server is gone.

    With the 30 s lease, a card another host left is settled within 60 s at the default.
    """
    while True:
        try:
            await sweep_once(runtime)
        except Exception:  # a sweep must never take the server down; the next one tries again
            logger.exception("sweeping the card store failed")
        runtime.swept.set()
        await anyio.sleep(runtime.settings.sweep_seconds)


async def sweep_once(runtime: Runtime) -> None:
    """One sweep: expired cards closed, orphaned executing cards settled, and under OAuth the expired
    browser records (pending sign-ins, sessions, connect requests) deleted."""
    await runtime.service.expire_due()
    # Each card as its owner (``maya_tools.owner_doors``), never with the server's own DOOR_TOKEN.
    for card in await runtime.service.settle_orphans():
        logger.warning("Card %s was left executing by a stopped server; settled as %s.", card.id, card.status.value)
    if runtime.sign_in is not None:
        await runtime.sign_in.purge()
