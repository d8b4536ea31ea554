"""The ``/connect`` page: a signed-in person connects, replaces or disconnects their own Door token.

Server-rendered HTML without JavaScript, hardened like the approval page (``pages.HEADERS``:
``no-store``, CSP ``default-src 'none'``, no framing). A visitor who is not signed in goes through
``BrowserSignIn`` and back. A POST must carry the session's form token and, when the browser sends
them, an ``Origin`` of this server and a ``Sec-Fetch-Site`` of same-origin; anything else changes
nothing.

Connecting checks the pasted token with reads only (DESIGN.md property 10): ``GET /clusters`` tells
the clusters the token may see and, through them, the organisation. No public read tells the role
(R-AUTH-03 answers ``403`` only to a mutation), so the page says plainly that Door tells whether
changes are allowed only when one is tried, rather than probing with one. A token Door refuses
(``401``, R-AUTH-01) is not stored and the page says why; one it accepts is stored sealed and bound
to the signed-in person (``DoorCredentials``). With ``?for=<id>`` (a ``ConnectRequests`` link from a
URL elicitation) the token is stored only when the signed-in issuer and ``sub`` are the person the
request was made for. After the POST, the token is in no response, log, redirect or cookie.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from backend_client import DoorClient
from backend_client.errors import DoorError, Unauthorized
from maya_tools.auth.browser import LOGIN_PATH, LOGOUT_PATH, BrowserSignIn
from maya_tools.auth.connect_requests import ConnectRequests
from maya_tools.auth.credentials import TOKEN_LIMIT, ConnectionInfo, DoorCredentials, check_door_token
from maya_tools.auth.pages import page, read_form
from maya_tools.auth.tokens import Principal

logger = logging.getLogger(__name__)

PATH = "/connect"
# RFC 6750 §2.1 b64token: what a bearer token may be made of.
_BEARER = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


class ConnectPage:
    """``/connect`` for ``sign_in``'s people; ``door_for(token)`` makes a Door client for a pasted token."""

    def __init__(
        self,
        *,
        sign_in: BrowserSignIn,
        credentials: DoorCredentials,
        door_for: Callable[[str], DoorClient],
        requests: ConnectRequests | None = None,
    ) -> None:
        self.sign_in = sign_in
        self.credentials = credentials
        self.door_for = door_for
        self.requests = requests

    def routes(self) -> list[Route]:
        return [Route(PATH, self.page, methods=["GET", "POST"])]

    async def page(self, request: Request) -> Response:
        principal = await self.sign_in.signed_in(request)
        if request.method == "GET":
            if principal is None:
                return self.sign_in.login_redirect(request)
            for_id = request.query_params.get("for")
            refusal = await self._refuse_for(for_id, principal)
            if refusal is not None:
                return await self._render(request, principal, for_id=None, status_code=refusal[0], alert=refusal[1])
            return await self._render(request, principal, for_id=for_id)
        return await self._post(request, principal)

    async def _post(self, request: Request, principal: Principal | None) -> Response:
        if principal is None:
            back = f"{LOGIN_PATH}?{urlencode({'return_to': PATH + _query(request)})}"
            return page(
                "connect.html.j2",
                status_code=401,
                **_blank(
                    alert="Your sign-in has ended, so nothing was stored. Sign in again, then paste the token again.",
                    again=back,
                ),
            )
        form = await read_form(request)
        if (
            form is None
            or not self.sign_in.same_origin(request)
            or not self.sign_in.form_token_ok(request, form.get("csrf"))
        ):
            logger.warning("/connect: a POST without this page's form token or from another site was refused")
            return await self._render(
                request,
                principal,
                for_id=None,
                status_code=403,
                alert="This form did not come from this page; nothing changed.",
            )
        for_id = form.get("for") or None
        refusal = await self._refuse_for(for_id, principal)
        if refusal is not None:
            return await self._render(request, principal, for_id=None, status_code=refusal[0], alert=refusal[1])
        action = form.get("action")
        if action == "disconnect":
            removed = await self.credentials.delete(principal)
            note = "Your Door token is disconnected." if removed else "No Door token was connected."
            return await self._render(request, principal, for_id=for_id, notice=note)
        if action != "connect":
            return await self._render(
                request, principal, for_id=for_id, status_code=400, alert="Choose connect or disconnect."
            )
        token = form.get("door_token", "").strip()
        if not token or len(token) > TOKEN_LIMIT or not _BEARER.fullmatch(token):
            return await self._render(
                request,
                principal,
                for_id=for_id,
                status_code=400,
                alert="That is not a Door token: paste the API token itself (letters, digits and - . _ ~ + / =). Nothing was stored.",
            )
        checked = await self._check(token)
        if isinstance(checked, tuple):
            status, why = checked
            return await self._render(request, principal, for_id=for_id, status_code=status, alert=why)
        await self.credentials.put(principal, token, checked=checked)
        if for_id is not None and self.requests is not None:
            await self.requests.complete(for_id)
        return await self._render(
            request, principal, for_id=for_id, notice="Your Door token is connected. You can go back to your chat."
        )

    async def _check(self, token: str) -> ConnectionInfo | tuple[int, str]:
        """What Door's reads say of ``token``, or the status and sentence of why it is not stored."""
        try:
            async with self.door_for(token) as door:
                return await check_door_token(door)
        except Unauthorized:
            return 400, (
                "Door refused this token (401, R-AUTH-01: unknown or revoked), so it was not stored. "
                "Create or copy a current API token in Door and paste it again."
            )
        except DoorError as error:
            logger.warning("/connect: Door could not check a token: %s", type(error).__name__)
            return (
                502,
                f"Door could not be asked about this token ({type(error).__name__}), so it was not stored. Try again.",
            )

    async def _refuse_for(self, for_id: str | None, principal: Principal) -> tuple[int, str] | None:
        """Why a ``for=`` request may not be served for ``principal``, or None when it may (or there is none)."""
        if for_id is None:
            return None
        asked = None if self.requests is None else await self.requests.principal_for(for_id)
        if asked is None:
            return 404, "This connect link is unknown or has expired, so nothing was stored. Ask your chat again."
        if (asked.issuer, asked.subject) != (principal.issuer, principal.subject):
            logger.warning("/connect: a link made for another person was opened; nothing stored")
            return 403, (
                f"This link was made for another account, and you are signed in as {principal.name or principal.subject}. "
                "Nothing was stored: sign out and sign in as the person the chat asked, or ask your chat again."
            )
        return None

    async def _render(
        self,
        request: Request,
        principal: Principal,
        *,
        for_id: str | None,
        status_code: int = 200,
        alert: str | None = None,
        notice: str | None = None,
    ) -> Response:
        info = await self.credentials.info(principal)
        return page(
            "connect.html.j2",
            status_code=status_code,
            signed_in=True,
            who=principal.name or principal.subject,
            issuer=principal.issuer,
            info=info,
            csrf=self.sign_in.form_token(request) or "",
            for_id=for_id,
            alert=alert,
            notice=notice,
            again=None,
            logout=LOGOUT_PATH,
            path=PATH,
        )


def _blank(**context: Any) -> dict[str, Any]:
    """The template's context for a visitor who is not signed in."""
    return {
        "signed_in": False,
        "who": "",
        "issuer": "",
        "info": None,
        "csrf": "",
        "for_id": None,
        "notice": None,
        "logout": LOGOUT_PATH,
        "path": PATH,
        **context,
    }


def _query(request: Request) -> str:
    return f"?{request.url.query}" if request.url.query else ""
