"""A team's server pieces with OAuth, in process: the real test provider (``tests.oidc``) as the issuer,
the reference backend as Door, and one or more replicas on one card store, each with its runtime,
approval page, browser sign-in, ``/connect`` and the shared Door credentials.

Built in process for what a real server cannot reach cheaply (a second replica on one store, the
person's verified token set by hand); the runtime's ``sign_in``, ``credentials`` and
``connect_requests`` are set here as ``serve`` sets them, and ``MAYA_PUBLIC_URL`` is the site's origin.
``world``/``fresh`` are a real ``serve --auth oauth`` (``test_channels_served.py``)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from backend_client import DoorClient
from backend_client.tls import verifying_tls
from confirmation_cards import Card, lifecycle
from confirmation_cards.models import CardOwner
from maya_tools.auth import BrowserSignIn, ConnectPage, ConnectRequests, IssuerKeys, Principal, open_credentials
from maya_tools.auth.pages import FormTokens
from maya_tools.channels.page import ApprovalPages
from maya_tools.runtime import Runtime, open_runtime
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from reference_backend.seed import DEMO_ORGANISATION
from tests.maya_tools.auth.site import ORIGIN, Site
from tests.maya_tools.auth.test_serve_oauth import fresh, world  # noqa: F401 (a real serve with OAuth, per module)
from tests.oidc import OAuthClient, OpenIDProvider, User

RESOURCE = ORIGIN + "/mcp"


@pytest.fixture(scope="module")
def provider() -> Iterator[OpenIDProvider]:
    with OpenIDProvider([RESOURCE]).running() as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10.0) as client:
        yield client


@pytest.fixture
def tokens(backend: ReferenceBackend) -> dict[str, str]:
    """Door tokens made for this test (finding one where it should not be means it leaked)."""
    made = {"admin": f"door-admin-{secrets.token_urlsafe(18)}", "member": f"door-member-{secrets.token_urlsafe(18)}"}
    backend.put_token(made["admin"], "ada", DEMO_ORGANISATION, "super_admin")
    backend.put_token(made["member"], "mel", DEMO_ORGANISATION, "member")
    return made


@dataclass
class Replica:
    """One server process of the team: its runtime, its approval page, and the site a browser reaches."""

    runtime: Runtime
    pages: ApprovalPages
    site: Site
    door_auth: list[str] = field(default_factory=list)
    """The ``Authorization`` of every request this replica sent to Door, in order."""


@dataclass
class Team:
    provider: OpenIDProvider
    replicas: list[Replica]

    def person(self, user: User) -> Principal:
        return Principal(issuer=self.provider.issuer, subject=user.sub, name=user.email)

    async def card(self, owner: User, door_token: str, count: int = 4, *, on: int = 0) -> Card:
        """A pending card planned by ``owner`` on replica ``on``, as a change tool plans one."""
        runtime = self.replicas[on].runtime
        planner = runtime.planner(runtime.door_with(door_token), principal=self.person(owner).key)
        planned = await planner.scale_node_pool("payments-prod", "workers", {"count": count})
        person = self.person(owner)  # as ``card_for`` does: the owner's stored Door token runs it
        planned = planned.model_copy(update={"owner": CardOwner(issuer=person.issuer, subject=person.subject)})
        return await lifecycle.keep_or_store(runtime.store, planned, runtime.now())

    async def link(self, card: Card, *, on: int = 0) -> str:
        """The card's one-time page link as replica ``on`` sends it, as a path on the public URL."""
        replica = self.replicas[on]
        link = await replica.pages.link_for(replica.runtime, card, token=None, approver="the asking person")
        assert link is not None and link.startswith(ORIGIN), link
        return link.removeprefix(ORIGIN)


async def open_replica(
    stack: AsyncExitStack,
    settings: Settings,
    *,
    key: bytes,
    backend: ReferenceBackend,
    provider: OpenIDProvider,
    client: OAuthClient,
    http: httpx2.AsyncClient,
) -> Replica:
    """A replica as ``serve --auth oauth`` opens one: the runtime, the credentials on the card store's
    location, the browser sign-in, ``/connect`` and the approval page mounted side by side."""
    runtime = await stack.enter_async_context(open_runtime(settings, "streamable-http", backend=backend))
    credentials = await open_credentials(settings.card_store, [key])
    stack.push_async_callback(credentials.close)
    assert client.client_secret is not None
    sign_in = BrowserSignIn(
        keys=IssuerKeys(provider.issuer, http),
        http=http,
        client_id=client.client_id,
        client_secret=client.client_secret,
        public_url=ORIGIN,
        database=credentials.database,
        form_tokens=FormTokens.derived([key]),  # as serve derives it from MAYA_CREDENTIAL_KEY: replicas agree
    )
    requests = ConnectRequests(credentials.database)
    pages = ApprovalPages(ORIGIN, via=settings.replica)
    runtime.pages, pages.runtime = pages, runtime
    runtime.sign_in, runtime.credentials, runtime.connect_requests = sign_in, credentials, requests

    def door_for(token: str) -> DoorClient:
        return runtime.door_with(token)

    connect = ConnectPage(sign_in=sign_in, credentials=credentials, door_for=door_for, requests=requests)
    app = Starlette(routes=[*sign_in.routes(), *connect.routes(), Mount("", app=pages.app)])
    replica = Replica(runtime, pages, Site(app, sign_in, connect, credentials, requests, ORIGIN))

    async def seen(request: httpx2.Request) -> None:
        replica.door_auth.append(request.headers.get("authorization", ""))

    runtime.http.event_hooks["request"].append(seen)
    return replica


@pytest.fixture
async def team(
    provider: OpenIDProvider, http: httpx2.AsyncClient, backend: ReferenceBackend, tmp_path: Path
) -> AsyncIterator[Team]:
    """Two replicas on one SQLite card store (the credentials and sessions in the same file)."""
    client = await provider.register_client(
        http, redirect_uri=ORIGIN + "/auth/callback", token_endpoint_auth_method="client_secret_basic"
    )
    key = secrets.token_bytes(32)
    store = str(tmp_path / "cards.sqlite3")
    async with AsyncExitStack() as stack:
        replicas = []
        for name in ("a", "b"):
            settings = Settings(card_store=store, approver="nobody", replica=name, public_url=ORIGIN)
            opened = await open_replica(
                stack, settings, key=key, backend=backend, provider=provider, client=client, http=http
            )
            replicas.append(opened)
        yield Team(provider, replicas)
