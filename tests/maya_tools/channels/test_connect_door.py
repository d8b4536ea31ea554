""" "Connect your Door account": a person with no Door token is asked through a URL elicitation of
``/connect?for=<id>`` (2026-07-28: an ``input_required`` round; 2025-11-25: ``-32042``); a client
without URL mode gets an error naming ``/connect``; nothing runs until they connect, and then the
retry does.

The person is verified for real (a JWT access token from the test provider, checked by the server's
verifier) and connects on the real ``/connect`` page, signed in at the provider. What ``serve``'s OAuth
wiring does per request (another part of issue 20, not yet on main) is stood in for by
``OAuthWiring``: the verified user in the SDK's auth context, as its bearer middleware leaves it, and
``Runtime.token_for`` answering the person's stored Door token or raising ``DoorNotConnected``."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.lowlevel
import httpx2
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import (
    URL_ELICITATION_REQUIRED,
    CallToolResult,
    ElicitationCapability,
    ElicitCompleteNotification,
    ElicitRequestURLParams,
    ElicitResult,
    FormElicitationCapability,
    InputRequiredResult,
    UrlElicitationCapability,
)
from starlette.applications import Starlette

import maya_tools.channels.connect as connect_module
import maya_tools.server as server_module
from maya_tools.auth import (
    BrowserSignIn,
    ConnectPage,
    ConnectRequests,
    DoorCredentials,
    IssuerKeys,
    JwtTokenVerifier,
    Principal,
    VerifiedToken,
    open_credentials,
)
from maya_tools.auth.errors import DoorNotConnected
from maya_tools.channels import link_wait
from maya_tools.channels.app_secret import META_KEY
from maya_tools.channels.connect import CONNECT_KEY, CONNECT_META
from maya_tools.channels.page_link import PAGE_KEY
from maya_tools.runtime import Runtime, open_runtime
from maya_tools.server import MayaServer, build_server
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from tests.maya_tools.auth.site import ORIGIN, Browser, Site, csrf_of
from tests.maya_tools.channels.conftest import RESOURCE
from tests.maya_tools.test_app_card import APPS
from tests.oidc import ADMIN, MEMBER, OpenIDProvider, User

pytestmark = pytest.mark.anyio

READ = ("list_node_pools", {"cluster": "payments-prod"})
SCALE = ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 4})
NO_DOOR = {"get_card", "decide_card", "stop_plan"}  # the card store only: stopping a plan changes nothing in Door
"""Tools that answer from the card store alone until a decision needs Door (asked then, as any other)."""


def capable(**elicitation: Any) -> type[Client]:
    """An MCP client that declares exactly this elicitation capability."""

    class Declaring(Client):
        async def _build_session(self, exit_stack: AsyncExitStack) -> ClientSession:
            session = await super()._build_session(exit_stack)
            build = session._build_capabilities

            def declared(version: str) -> Any:
                return build(version).model_copy(update={"elicitation": ElicitationCapability(**elicitation)})

            session._build_capabilities = declared  # type: ignore[method-assign]
            return session

    return Declaring


UrlOnly = capable(url=UrlElicitationCapability())
FormOnly = capable(form=FormElicitationCapability())


@dataclass
class OAuthWiring:
    """One server under OAuth, in process: its runtime's auth pieces, each person's verified access
    token, and what ``serve`` finds in the credentials for a request (``found``)."""

    provider: OpenIDProvider
    http: httpx2.AsyncClient
    server: MayaServer
    verifier: JwtTokenVerifier
    found: dict[str, str] = field(default_factory=dict)
    runtime: Runtime | None = None
    site: Site | None = None
    logged: list[str] = field(default_factory=list)

    @property
    def credentials(self) -> DoorCredentials:
        assert self.runtime is not None and self.runtime.credentials is not None
        return self.runtime.credentials

    def person(self, user: User) -> Principal:
        return Principal(issuer=self.provider.issuer, subject=user.sub, name=user.email)

    async def refresh(self) -> None:
        """What serve's per-request lookup finds now: each person's stored Door token, if any."""
        for user in (ADMIN, MEMBER):
            token = await self.credentials.get(self.person(user))
            if token is None:
                self.found.pop(self.person(user).key, None)
            else:
                self.found[self.person(user).key] = token

    @asynccontextmanager
    async def signed_in(self, user: User) -> AsyncIterator[None]:
        """MCP requests made inside carry ``user``'s verified access token, as the bearer middleware leaves it."""
        verified = await self.verifier.check(await self.provider.access_token(self.http, user))
        reset = auth_context_var.set(AuthenticatedUser(verified))
        try:
            yield
        finally:
            auth_context_var.reset(reset)

    async def connect_in_browser(
        self, user: User, link: str, door_token: str, *, refresh: bool = True
    ) -> httpx2.Response:
        """``user`` opens the elicitation's link, signs in at the provider and pastes ``door_token``
        (and, unless told not to, the next request finds it, as serve's per-request lookup would)."""
        assert self.site is not None and link.startswith(ORIGIN + "/connect?for="), link
        browser = Browser(self.site, user)
        try:
            path = link.removeprefix(ORIGIN)
            page = await browser.visit(path)
            for_id = parse_qs(urlsplit(link).query)["for"][0]
            done = await browser.post(
                path, {"csrf": csrf_of(page), "action": "connect", "door_token": door_token, "for": for_id}
            )
        finally:
            await browser.aclose()
        if refresh:
            await self.refresh()
        return done


@pytest.fixture
def link_wait_seconds() -> float:
    """How long a retry that opened the connect link waits for the person (0: asked again at once)."""
    return 0.0


@pytest.fixture
def wiring(
    monkeypatch: pytest.MonkeyPatch,
    provider: OpenIDProvider,
    http: httpx2.AsyncClient,
    backend: ReferenceBackend,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    link_wait_seconds: float,
) -> Iterator[OAuthWiring]:
    caplog.set_level("INFO")
    settings = Settings(
        card_store=str(tmp_path / "cards.sqlite3"),
        approver="nobody",
        public_url=ORIGIN,
        link_wait_seconds=link_wait_seconds,
    )
    key = secrets.token_bytes(32)
    state: dict[str, OAuthWiring] = {}

    @asynccontextmanager
    async def open_with_oauth(
        settings: Settings, transport: Any, *, backend: ReferenceBackend | None = None
    ) -> AsyncIterator[Runtime]:
        async with open_runtime(settings, transport, backend=backend) as runtime:
            wired = state["wiring"]
            credentials = await open_credentials(settings.card_store, [key])
            client = await provider.register_client(
                http, redirect_uri=ORIGIN + "/auth/callback", token_endpoint_auth_method="client_secret_basic"
            )
            assert client.client_secret is not None
            runtime.credentials = credentials
            runtime.sign_in = BrowserSignIn(
                keys=IssuerKeys(provider.issuer, http),
                http=http,
                client_id=client.client_id,
                client_secret=client.client_secret,
                public_url=ORIGIN,
                database=credentials.database,
            )
            runtime.connect_requests = ConnectRequests(credentials.database, settled=runtime.links.settled)
            connect = ConnectPage(
                sign_in=runtime.sign_in,
                credentials=credentials,
                door_for=runtime.door_with,
                requests=runtime.connect_requests,
            )
            app = Starlette(routes=[*runtime.sign_in.routes(), *connect.routes()])
            wired.runtime = runtime
            wired.site = Site(app, runtime.sign_in, connect, credentials, runtime.connect_requests, ORIGIN)
            try:
                yield runtime
            finally:
                await credentials.close()

    def person_key(ctx: Context[Any, Any]) -> str:
        user = auth_context_var.get()
        assert user is not None and isinstance(user.access_token, VerifiedToken)
        return user.access_token.principal.key

    def token_for(self: Runtime, ctx: Context[Any, Any]) -> str:
        key = person_key(ctx)
        token = state["wiring"].found.get(key)
        if token is None:
            raise DoorNotConnected(key, ORIGIN + "/connect")
        return token

    def hold_door_token(ctx: Context[Any, Any], token: str) -> None:
        state["wiring"].found[person_key(ctx)] = token  # what the request's ASGI scope holds under serve

    monkeypatch.setattr(connect_module, "hold_door_token", hold_door_token)
    monkeypatch.setattr(server_module, "open_runtime", open_with_oauth)
    monkeypatch.setattr(Runtime, "token_for", token_for)
    monkeypatch.setattr(Runtime, "principal", lambda self, ctx: person_key(ctx))
    server = build_server(settings, transport="streamable-http", backend=backend, page_url=ORIGIN)
    verifier = JwtTokenVerifier(issuer=provider.issuer, resource=RESOURCE, http=http)
    state["wiring"] = OAuthWiring(provider, http, server, verifier)
    yield state["wiring"]
    state["wiring"].logged = [record.getMessage() for record in caplog.records]


def link_of(first: InputRequiredResult) -> str:
    assert first.input_requests is not None and list(first.input_requests) == [CONNECT_KEY]
    request = first.input_requests[CONNECT_KEY]
    assert request.method == "elicitation/create"
    params = request.params
    assert isinstance(params, ElicitRequestURLParams) and params.mode == "url"
    assert "Connect your Door account" in params.message
    return params.url


async def retry(
    client: Client, first: InputRequiredResult, action: str = "accept"
) -> CallToolResult | InputRequiredResult:
    return await client.session.call_tool(
        *SCALE,
        input_responses={CONNECT_KEY: ElicitResult(action=action)},  # type: ignore[arg-type]
        request_state=first.request_state,
        allow_input_required=True,
    )


async def test_2026_07_28_asks_by_a_url_round_then_runs_the_tool_once_the_person_connected(
    wiring: OAuthWiring, tokens: dict[str, str], backend: ReferenceBackend
) -> None:
    before = backend.last_request_seq
    async with wiring.signed_in(ADMIN), UrlOnly(wiring.server) as client:
        first = await client.session.call_tool(*SCALE, allow_input_required=True)
        assert isinstance(first, InputRequiredResult), first
        link = link_of(first)
        assert backend.requests_since(before) == [], "nothing reaches Door before the person connects"

        early = await retry(client, first)  # answered "opened" but did not connect: asked again
        assert isinstance(early, InputRequiredResult) and link_of(early) != link

        connected = await wiring.connect_in_browser(ADMIN, link_of(early), tokens["admin"])
        assert connected.status_code == 200 and "Your Door token is connected" in connected.text
        done = await retry(client, early)

    # The tool ran: it planned the card (reading Door with the admin's own token) and now asks for
    # approval through the approval page, the channel of a URL-only client.
    assert isinstance(done, InputRequiredResult) and done.input_requests is not None, done
    assert list(done.input_requests) == [PAGE_KEY]
    assert {r["method"] for r in backend.requests_since(before)} == {"GET"}
    for seen in (first, early, done):
        assert tokens["admin"] not in seen.model_dump_json()
    for seen in (first, early):
        assert "connect?for=" not in json.dumps(seen.model_dump(exclude={"input_requests"}))
    assert tokens["admin"] not in " ".join(wiring.logged)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_without_url_mode_is_told_to_open_connect_and_nothing_runs(
    wiring: OAuthWiring, backend: ReferenceBackend, mode: str
) -> None:
    before = backend.last_request_seq
    async with wiring.signed_in(ADMIN), FormOnly(wiring.server, mode=mode) as client:  # type: ignore[call-arg]
        said = await client.call_tool(*SCALE)

    assert said.is_error
    text = str(said.content)
    assert f"open {ORIGIN}/connect in your browser, sign in and connect your Door API token, then ask again" in text
    assert "for=" not in text, "no link made for someone is put where the model reads it"
    assert backend.requests_since(before) == []


async def test_a_declined_connect_link_ends_in_the_error_not_in_another_round(wiring: OAuthWiring) -> None:
    async with wiring.signed_in(ADMIN), UrlOnly(wiring.server) as client:
        first = await client.session.call_tool(*SCALE, allow_input_required=True)
        assert isinstance(first, InputRequiredResult)
        declined = await retry(client, first, "decline")

    assert isinstance(declined, CallToolResult) and declined.is_error
    assert "the link to connect it was declined" in str(declined.content) and f"{ORIGIN}/connect" in str(
        declined.content
    )


async def test_a_connect_link_is_made_for_the_asking_person_only(wiring: OAuthWiring, tokens: dict[str, str]) -> None:
    async with wiring.signed_in(ADMIN), UrlOnly(wiring.server) as client:
        first = await client.session.call_tool(*READ, allow_input_required=True)
        assert isinstance(first, InputRequiredResult)
        link = link_of(first)
        refused = await wiring.connect_in_browser(MEMBER, link, tokens["member"])
        assert refused.status_code == 403 and "Nothing was stored" in refused.text
        assert await wiring.credentials.get(wiring.person(MEMBER)) is None
        assert await wiring.credentials.get(wiring.person(ADMIN)) is None
        again = await client.session.call_tool(*READ, allow_input_required=True)
    assert isinstance(again, InputRequiredResult) and link_of(again) != link  # the admin is still asked


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_every_tool_that_reads_door_asks_the_person_to_connect(wiring: OAuthWiring, mode: str) -> None:
    async with wiring.signed_in(ADMIN), UrlOnly(wiring.server, mode=mode) as client:
        listed = await client.list_tools()
        schemas = {tool.name: tool.input_schema for tool in listed.tools}
        asked: list[str] = []
        for name, schema in schemas.items():
            if name in NO_DOOR:
                continue
            arguments = example_arguments(schema)
            if mode == "legacy":
                with pytest.raises(MCPError) as refused:
                    await client.call_tool(name, arguments)
                assert refused.value.error.code == URL_ELICITATION_REQUIRED, (name, refused.value.error)
            else:
                first = await client.session.call_tool(name, arguments, allow_input_required=True)
                assert isinstance(first, InputRequiredResult), (name, first)
                link_of(first)
            asked.append(name)
    assert len(asked) >= 8 and {"list_clusters", "list_node_pools", "scale_node_pool"} <= set(asked)


def example_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Valid-looking arguments for a tool's required fields (the call stops at Door before they matter)."""
    examples = {"cluster": "payments-prod", "pool": "workers", "node": "workers-1", "count": 4, "name": "batch"}
    arguments: dict[str, Any] = {}
    for name in schema.get("required", []):
        kind = schema["properties"][name].get("type")
        arguments[name] = examples.get(name, 1 if kind == "integer" else {} if kind == "object" else "x")
    return arguments


# --- after the link was opened: the retry waits (2026-07-28), the client is told (2025-11-25) ----


@pytest.mark.parametrize("link_wait_seconds", [600.0])
async def test_2026_07_28_a_retry_that_opened_the_link_waits_for_the_person_and_runs_the_tool(
    wiring: OAuthWiring, tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spec-order host retries with ``accept`` as soon as it opened the link. The person connects
    only once the retry says it waits (its progress); the retry then runs the tool with the token
    they just stored, rather than ask again."""
    monkeypatch.setattr(link_wait, "POLL_SECONDS", 600.0)  # only /connect's own signal wakes the retry
    told = anyio.Event()
    heard: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")
        told.set()

    with anyio.fail_after(30):
        async with wiring.signed_in(ADMIN), UrlOnly(wiring.server) as client, anyio.create_task_group() as group:
            first = await client.session.call_tool(*READ, allow_input_required=True)
            assert isinstance(first, InputRequiredResult), first
            link = link_of(first)

            async def person() -> None:
                await told.wait()
                done = await wiring.connect_in_browser(ADMIN, link, tokens["admin"], refresh=False)
                assert done.status_code == 200, done.text

            group.start_soon(person)
            listed = await client.session.call_tool(
                *READ,
                input_responses={CONNECT_KEY: ElicitResult(action="accept")},
                request_state=first.request_state,
                allow_input_required=True,
                progress_callback=progress,
            )
    assert isinstance(listed, CallToolResult) and not listed.is_error, listed
    assert "workers" in str(listed.content)
    assert heard and "connect your Door token" in heard[0]
    assert tokens["admin"] not in listed.model_dump_json()


def completions() -> tuple[list[str], anyio.Event, Callable[[Any], Awaitable[None]]]:
    """The ids of the ``notifications/elicitation/complete`` a client hears, an event set at the first,
    and the client's message handler that records them."""
    completed: list[str] = []
    heard = anyio.Event()

    async def notified(message: Any) -> None:
        if isinstance(message, ElicitCompleteNotification):
            completed.append(message.params.elicitation_id)
            heard.set()

    return completed, heard, notified


async def test_2025_11_25_the_client_hears_elicitation_complete_once_the_person_connected(
    wiring: OAuthWiring, tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After ``-32042`` the server tells the client, by ``notifications/elicitation/complete`` with the
    link's id, that the person connected; the client's retry then runs."""
    monkeypatch.setattr(link_wait, "POLL_SECONDS", 600.0)
    completed, heard, notified = completions()

    with anyio.fail_after(30):
        async with (
            wiring.signed_in(ADMIN),
            UrlOnly(wiring.server, mode="legacy", message_handler=notified) as client,  # type: ignore[call-arg]
        ):
            with pytest.raises(MCPError) as refused:
                await client.call_tool(*READ)
            [asked] = (refused.value.error.data or {})["elicitations"]
            assert completed == []
            await wiring.connect_in_browser(ADMIN, asked["url"], tokens["admin"])
            await heard.wait()
            listed = await client.call_tool(*READ)
    assert completed == [asked["elicitationId"]]
    assert not listed.is_error and "workers" in str(listed.content)


async def test_2025_11_25_only_the_newest_connect_links_of_a_person_are_watched(
    wiring: OAuthWiring, tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that calls again and again without a Door token gets a link each time, and each was
    watched for its 15 minutes; now at most ``WATCHED_PER_PERSON`` of one person's are, the newest:
    connecting through the newest link is still heard, the oldest links still connect but are not."""
    monkeypatch.setattr(link_wait, "POLL_SECONDS", 600.0)
    completed, heard, notified = completions()

    limit = connect_module.WATCHED_PER_PERSON
    with anyio.fail_after(30):
        async with (
            wiring.signed_in(ADMIN),
            UrlOnly(wiring.server, mode="legacy", message_handler=notified) as client,  # type: ignore[call-arg]
        ):
            asked = []
            for _ in range(limit + 2):
                with pytest.raises(MCPError) as refused:
                    await client.call_tool(*READ)
                asked += (refused.value.error.data or {})["elicitations"]
            runtime = wiring.runtime
            assert runtime is not None
            person = next(iter(runtime.links._watchers))
            for _ in range(100):  # the watches are tasks of the server's group: let them start and settle
                if runtime.links.watched(person) == limit and runtime.links.waiting == limit:
                    break
                await anyio.lowlevel.checkpoint()
            assert (runtime.links.watched(person), runtime.links.waiting) == (limit, limit)
            await wiring.connect_in_browser(ADMIN, asked[-1]["url"], tokens["admin"])
            await heard.wait()
    assert completed == [asked[-1]["elicitationId"]]


# --- an Apps-only host (Claude, ChatGPT): the card view opens /connect --------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_apps_only_host_gets_the_connect_link_for_its_view_and_the_retry_shows_the_card(
    wiring: OAuthWiring, tokens: dict[str, str], backend: ReferenceBackend, mode: str
) -> None:
    """No URL mode, so no elicitation: the change tool's result (shown in its card view) carries the
    person's own ``/connect?for=`` link in ``_meta`` only; once they connected through it, the same call
    returns the pending card with the view's one-time secret. A read tool, bound to no view, still
    says where to go in words."""
    before = backend.last_request_seq
    async with wiring.signed_in(ADMIN), Client(wiring.server, mode=mode, extensions=[APPS]) as client:  # type: ignore[call-arg]
        asked = await client.call_tool(*SCALE)
        read = await client.call_tool(*READ)
        assert backend.requests_since(before) == [], "nothing reaches Door before the person connects"
        connect = (asked.meta or {}).get(CONNECT_META)
        assert asked.is_error and connect is not None, asked
        assert connect["tool"] == SCALE[0] and connect["url"].startswith(ORIGIN + "/connect?for=")
        said = str(asked.content)
        assert "Connect button" in said and f"{ORIGIN}/connect" in said and "for=" not in said
        assert read.is_error and CONNECT_META not in (read.meta or {}) and "then ask again" in str(read.content)

        done = await wiring.connect_in_browser(ADMIN, connect["url"], tokens["admin"])
        assert done.status_code == 200 and "Your Door token is connected" in done.text
        assert await wiring.runtime.connect_requests.completed(parse_qs(urlsplit(connect["url"]).query)["for"][0])  # type: ignore[union-attr]
        again = await client.call_tool(*SCALE)
    assert not again.is_error and again.structured_content is not None, again
    assert again.structured_content["status"] == "pending"
    assert META_KEY in (again.meta or {}), "the card view can approve it"
    assert tokens["admin"] not in asked.model_dump_json() + again.model_dump_json()
