"""The approval page's link on protocol 2026-07-28: an ``input_required`` round, never ``-32042``.

The 2026-07-28 specification retires the URL-elicitation-required error (``-32042``, "2025-11-25
only"; a 2026-07-28 implementation "MUST NOT" emit it). There a URL-mode elicitation is an
``InputRequiredResult`` whose ``inputRequests`` carry an ``elicitation/create`` request of
``mode: "url"``; the client opens the link, answers ``accept`` (opened), ``decline`` or ``cancel``,
and retries the call with that answer and the ``requestState``, and the retry reports what the page
decided. On 2025-11-25 the same link goes mid-call as an ``elicitation/create`` request
(``ctx.elicit_url``), which needs none of this.

The SDK's resolvers ask only form questions in that flow, and a tool with ``Resolve(...)`` parameters
may not return an ``InputRequiredResult`` itself (one ``input_required`` channel per call). So the
change tools' ``ask`` resolver raises ``LinkAsked`` carrying the round, and ``MayaServer.call_tool``,
which owns the call, returns it. The round's ``requestState`` names the card the link is for; the
SDK seals it (AES-GCM, bound to the call's arguments and to the caller's principal, DESIGN.md
property 12), so a retry's answer counts only for that card of that principal. The answer decides
nothing by itself: ``accept`` means only that the person opened the link, and the retry reads the
card's status from the store (executed, declined, or still pending until it expires).

The link travels only in the elicitation request; no content or ``structuredContent`` the model
reads ever holds it (DESIGN.md, the conventions for the channels).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, ElicitRequest, ElicitRequestURLParams, ElicitResult, InputRequiredResult
from mcp_types.version import is_version_at_least

INPUT_REQUIRED_VERSION = "2026-07-28"
"""The first protocol whose elicitations ride ``input_required`` results rather than requests."""

PAGE_KEY = "maya_tools:approval_page"
"""The link's key in ``inputRequests`` and in the retry's ``inputResponses`` (the SDK keys its own
resolvers' questions ``module:qualname``, which no function here is named)."""

_STATE_FIELD = "approval_page_card"


class LinkAsked(MCPError):
    """The round that asks the client to open the link; ``MayaServer.call_tool`` returns ``result``.

    An ``MCPError`` because the SDK passes those through a tool's resolvers untouched, where any
    other exception becomes a tool error. Should one ever escape ``call_tool``, the client gets a
    plain internal error: no link, and no ``-32042``.
    """

    def __init__(self, result: InputRequiredResult) -> None:
        super().__init__(code=INTERNAL_ERROR, message="Internal error")
        self.result = result


def rides_input_required(ctx: Context[Any, Any]) -> bool:
    """Whether this call elicits through ``input_required`` rounds (protocol 2026-07-28 and later)."""
    version = ctx.protocol_version
    return version is not None and is_version_at_least(version, INPUT_REQUIRED_VERSION)


def link_round(card_id: str, message: str, link: str) -> LinkAsked:
    """The round asking the client to open ``link``, the one-time link to card ``card_id``'s page."""
    request = ElicitRequest(params=ElicitRequestURLParams(message=message, url=link, elicitation_id=card_id))
    state = json.dumps({_STATE_FIELD: card_id}, separators=(",", ":"))
    return LinkAsked(InputRequiredResult(input_requests={PAGE_KEY: request}, request_state=state))


def linked_card(ctx: Context[Any, Any]) -> str | None:
    """On a retry of a link round, the card id its (sealed) ``requestState`` names, else None."""
    if not rides_input_required(ctx) or ctx.request_state is None:
        return None
    try:
        state = json.loads(ctx.request_state)
    except ValueError:
        return None
    named = state.get(_STATE_FIELD) if isinstance(state, dict) else None
    return named if isinstance(named, str) else None


def link_answer(card_id: str, ctx: Context[Any, Any]) -> Literal["accept", "decline", "cancel"] | None:
    """On a retry, the client's answer to the link of card ``card_id``; None when this call is not
    one (another protocol, no answer, or a ``requestState`` minted for another card or question)."""
    if not rides_input_required(ctx) or ctx.request_state is None:
        return None
    try:
        state = json.loads(ctx.request_state)
    except ValueError:
        return None
    if not isinstance(state, dict) or state.get(_STATE_FIELD) != card_id:
        return None
    answer = (ctx.input_responses or {}).get(PAGE_KEY)
    return answer.action if isinstance(answer, ElicitResult) else None
