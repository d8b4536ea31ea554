""" "Connect your Door account": the URL elicitation a tool call gets when its person has no Door token.

Under OAuth the MCP access token is for this server alone (no token passthrough), so Door is called
with each person's own Door token, connected once on ``/connect`` (``maya_tools.auth.connect``). A
tool that needs Door for a person who has none raises ``DoorNotConnected`` before anything reaches
Door or the card store; ``MayaServer.call_tool`` catches it for every tool alike and asks here:

- 2026-07-28: an ``input_required`` round whose ``elicitation/create`` is of ``mode: "url"``, as
  ``page_link`` does for the approval page (that version "MUST NOT" emit ``-32042``). The retry
  runs the tool again: a retry that answers the link with ``accept`` first waits, bounded, for the
  person to connect (``connected_after_link``), then goes on; if they have not by then it asks again,
  and a declined or cancelled link ends in the error below rather than in a loop.
- 2025-11-25: ``-32042`` ``URLElicitationRequiredError``, which that version's elicitation spec
  gives for exactly this: a request that "cannot be processed until an elicitation is completed",
  which the client retries once the person is done. A mid-call ``elicitation/create`` would hold
  the call open for however long connecting takes and, since its ``accept`` means only that the
  person agreed to open the link, would still end without running the tool. Once the person stored
  their token through the link, the client is sent ``notifications/elicitation/complete`` with its id
  (``tell_when_connected``), so it knows to retry.
- Apps-only hosts (Claude, ChatGPT: MCP Apps, no URL mode), for a tool shown in the card view: the
  error below as a result whose ``_meta`` holds the person's link for the view to open
  (``apps_connect``).
- a client without URL mode: a tool error saying to open ``<public URL>/connect`` in a browser,
  sign in, connect the Door token and ask again (a URL meant to be clicked never goes in a form).

A Door ``401`` to the token a person had connected (revoked, expired) is answered the same way
(``refused_token``): the stored token is forgotten and the link says Door refused it.

The link is ``<public URL>/connect?for=<id>``, a ``ConnectRequests`` record made for this very
person (issuer and ``sub`` of the verified access token): the page stores a token through it only
for that person. It travels only in the elicitation (or the ``-32042`` error's data), never in
content the model reads.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from mcp.server.apps import client_supports_apps
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)

from backend_client.errors import Unauthorized
from maya_tools.auth.errors import DoorNotConnected
from maya_tools.channels.link_wait import wait_for
from maya_tools.channels.page_link import rides_input_required
from maya_tools.runtime import Runtime, hold_door_token

if TYPE_CHECKING:
    from maya_tools.auth.tokens import Principal

_E = TypeVar("_E", bound=BaseException)
logger = logging.getLogger("maya_tools")

CONNECT_KEY = "maya_tools:connect_door"
"""The link's key in ``inputRequests`` and in the retry's ``inputResponses``."""
_STATE_FIELD = "connect_door"

MESSAGE = (
    "Connect your Door account: maya-tools calls Door with your own Door API token, and you have not "
    "connected one yet. Open the page, sign in and paste your Door token; then the request goes on. "
    "Nothing was sent to Door."
)
MESSAGE_AGAIN = (
    "Connect your Door account again: Door refused the Door API token you had connected (R-AUTH-01: unknown, "
    "expired or revoked), so maya-tools forgot it. Open the page, sign in and paste a valid Door token; then the "
    "request goes on. Nothing was changed."
)
WHERE = (
    "You have not connected your Door account to maya-tools yet, so nothing was sent to Door{why}: open "
    "{url} in your browser, sign in and connect your Door API token, then ask again. (maya-tools never "
    "sends your sign-in token to Door.)"
)


def _behind(error: BaseException, kind: type[_E]) -> _E | None:
    """The exception of ``kind`` behind ``error`` (the SDK wraps what a tool or resolver raises), if any."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None or isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def not_connected(error: BaseException) -> DoorNotConnected | None:
    """The ``DoorNotConnected`` behind ``error``, if any."""
    return _behind(error, DoorNotConnected)


async def refused_token(runtime: Runtime, ctx: Context[Any, Any], error: BaseException) -> DoorNotConnected | None:
    """Under OAuth, Door's ``401`` to the Door token a person connected (behind ``error``): the token is
    forgotten and the person is asked to connect again, as for a person who never connected one."""
    if not runtime.oauth or runtime.credentials is None or _behind(error, Unauthorized) is None:
        return None
    person = verified_person(ctx)
    if person is None:
        return None
    await runtime.credentials.delete(person)
    return DoorNotConnected(person.key, runtime.connect_url, refused=True)


def verified_person(ctx: Context[Any, Any]) -> Principal | None:
    """The person the verified access token of this request speaks for (the bearer check leaves them
    in the ASGI scope), if any."""
    scope = getattr(ctx.request_context.request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    token = user.access_token if isinstance(user, AuthenticatedUser) else get_access_token()
    if token is None:
        return None  # no OAuth: the token verifier (and its models) is never loaded
    from maya_tools.auth.tokens import VerifiedToken

    return token.principal if isinstance(token, VerifiedToken) else None


def person_of(ctx: Context[Any, Any], missing: DoorNotConnected) -> Principal | None:
    """The verified person of this request (the bearer check leaves them in the ASGI scope), when
    they are the one ``missing`` is about."""
    principal = verified_person(ctx)
    return principal if principal is not None and principal.key == missing.principal else None


def connect_page(runtime: Runtime) -> str:
    from maya_tools.auth.connect import PATH  # with the sign-in and JOSE: only a server with OAuth gets here

    return f"{(runtime.public_url or '').rstrip('/')}{PATH}" if runtime.public_url else PATH


def answers_connect(ctx: Context[Any, Any]) -> bool:
    """Whether this 2026-07-28 retry carries the connect round's ``requestState``: no card was asked
    about yet, so the call plans afresh rather than look for a card of an earlier round."""
    if not rides_input_required(ctx) or ctx.request_state is None:
        return False
    try:
        state = json.loads(ctx.request_state)
    except ValueError:
        return False
    return isinstance(state, dict) and _STATE_FIELD in state


def accepted_link(ctx: Context[Any, Any]) -> str | None:
    """On a 2026-07-28 retry answering a connect link with ``accept`` (opened), the link's ``for`` id."""
    if not answers_connect(ctx):
        return None
    answer = (ctx.input_responses or {}).get(CONNECT_KEY)
    named = json.loads(ctx.request_state or "{}").get(_STATE_FIELD)
    accepted = isinstance(answer, ElicitResult) and answer.action == "accept"
    return named if accepted and isinstance(named, str) else None


def declined_link(ctx: Context[Any, Any]) -> bool:
    """Whether this 2026-07-28 retry answers a connect link with ``decline`` or ``cancel``."""
    if not answers_connect(ctx):
        return False
    answer = (ctx.input_responses or {}).get(CONNECT_KEY)
    return isinstance(answer, ElicitResult) and answer.action != "accept"


def _url_mode(ctx: Context[Any, Any]) -> bool:
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and elicitation.url is not None


async def ask_to_connect(
    runtime: Runtime, ctx: Context[Any, Any], missing: DoorNotConnected, tool: str = "", *, viewed: bool = False
) -> InputRequiredResult | CallToolResult:
    """The round that asks the person to connect (2026-07-28); raises ``-32042`` on 2025-11-25 and a
    ``ToolError`` saying where to go for a client without URL mode (or after a declined link). A client
    that declared MCP Apps and no URL mode, calling a tool ``viewed`` in the card view, gets that error as
    a result whose ``_meta`` carries the link for the view (``apps_connect``)."""
    page = connect_page(runtime)
    person = person_of(ctx, missing)
    if declined_link(ctx):
        raise ToolError(WHERE.format(why=" (the link to connect it was declined)", url=page)) from None
    can_link = person is not None and runtime.connect_requests is not None and runtime.public_url is not None
    if can_link and viewed and not _url_mode(ctx) and client_supports_apps(ctx):
        assert person is not None and runtime.connect_requests is not None
        return apps_connect(missing, page, await runtime.connect_requests.create(person), tool)
    if person is None or runtime.connect_requests is None or runtime.public_url is None or not _url_mode(ctx):
        raise ToolError(str(missing) if missing.refused else WHERE.format(why="", url=page)) from None
    request_id = await runtime.connect_requests.create(person)
    link = f"{page}?for={request_id}"
    message = MESSAGE_AGAIN if missing.refused else MESSAGE
    params = ElicitRequestURLParams(message=message, url=link, elicitation_id=request_id)
    if not rides_input_required(ctx):
        tell_when_connected(runtime, ctx, request_id, person.key)  # elicitation/complete, once connected
        raise UrlElicitationRequiredError([params], "Connect your Door account first (URL elicitation required)")
    state = json.dumps({_STATE_FIELD: request_id}, separators=(",", ":"))
    return InputRequiredResult(input_requests={CONNECT_KEY: ElicitRequest(params=params)}, request_state=state)


# --- after the link was opened (channels.link_wait says why and cites the specification) -----------


WATCHED_PER_PERSON = 4
"""Connect links of one person watched at once (2025-11-25): a client that calls again and again
without a Door token starts a watch each time, each for the link's 15 minutes; past this many, the
oldest stops (``LinkSignals.watcher``)."""


def tell_when_connected(runtime: Runtime, ctx: Context[Any, Any], request_id: str, person: str) -> None:
    """2025-11-25, after ``-32042``: once the person stored their token through ``request_id``'s link
    (within the link's life), send ``notifications/elicitation/complete`` so the client retries. At
    most ``WATCHED_PER_PERSON`` of ``person``'s links are watched at once, the newest."""
    requests = runtime.connect_requests
    if runtime.group is None or requests is None:
        return
    session = ctx.session

    async def connected() -> bool | None:
        return True if await requests.completed(request_id) else None

    async def watch() -> None:
        from maya_tools.auth.connect_requests import SECONDS  # the link's life; loaded with OAuth only

        try:
            with runtime.links.watcher(person, WATCHED_PER_PERSON):
                deadline = anyio.current_time() + SECONDS
                if await wait_for(
                    runtime.links, request_id, connected, deadline=deadline, seconds=SECONDS, what="/connect"
                ):
                    await session.send_elicit_complete(request_id)
        except Exception:  # the client may be gone; the server's task group must go on
            logger.info("Could not tell the client that connect request %s completed.", request_id, exc_info=True)

    runtime.group.start_soon(watch)


async def connected_after_link(runtime: Runtime, ctx: Context[Any, Any]) -> None:
    """2026-07-28, on the retry that answers a connect link with ``accept``: wait (at most
    ``MAYA_LINK_WAIT_SECONDS``, with progress) for the person to store their Door token through it,
    then give this request that token, so the tool runs at once; otherwise the tool asks again."""
    request_id = accepted_link(ctx)
    requests, credentials = runtime.connect_requests, runtime.credentials
    person = verified_person(ctx)
    if request_id is None or requests is None or credentials is None or person is None:
        return
    seconds = runtime.settings.link_wait_seconds

    async def connected() -> bool | None:
        return True if await requests.completed(request_id) else None

    async def progress(done: float, total: float, message: str) -> None:
        await ctx.report_progress(done, total, message)

    deadline = anyio.current_time() + seconds
    what = "you to connect your Door token on the page"
    if await wait_for(
        runtime.links, request_id, connected, deadline=deadline, seconds=seconds, what=what, progress=progress
    ):
        token = await credentials.get(person)
        if token is not None:
            hold_door_token(ctx, token)


# --- MCP Apps hosts (Claude, ChatGPT) declare no URL mode: the tool's view opens the link ---------

CONNECT_META = "maya-tools/connect"
"""The ``_meta`` key of the link for the view: never in ``content``, which the model reads."""
WHERE_APPS = (
    "You have not connected your Door account to maya-tools yet, so nothing was sent to Door{why}. The card "
    "view shows a Connect button that opens {url} in your browser: sign in there and connect your Door API "
    "token, then press Try again in the view (or ask again). (maya-tools never sends your sign-in token to Door.)"
)


def apps_connect(missing: DoorNotConnected, page: str, request_id: str, tool: str) -> CallToolResult:
    """The error result an Apps-only host shows in the tool's view: what is needed in ``content``, and
    the link made for this person (``/connect?for=``) and the call to retry in ``_meta`` only."""
    why = " (Door refused the token you had connected, so maya-tools forgot it)" if missing.refused else ""
    meta = {CONNECT_META: {"url": f"{page}?for={request_id}", "tool": tool, "refused": missing.refused}}
    return CallToolResult(
        content=[TextContent(type="text", text=WHERE_APPS.format(why=why, url=page))], is_error=True, meta=meta
    )
