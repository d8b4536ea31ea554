"""What a call does once its client opened a URL elicitation's link: wait for the page, then tell.

``channels.link_wait`` explains the why and cites the specification; this module applies it to the
two links the server sends: a card's approval page (``form.page_outcome``) and ``/connect``
(``channels.connect``, for the ``-32042`` of 2025-11-25).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from mcp.server.mcpserver import Context

from confirmation_cards import Card, CardStatus
from maya_tools.channels.link_wait import Progress, wait_for
from maya_tools.channels.page_link import rides_input_required
from maya_tools.runtime import Runtime

logger = logging.getLogger("maya_tools")


def _progress(ctx: Context[Any, Any]) -> Progress:
    async def report(done: float, total: float, message: str) -> None:
        await ctx.report_progress(done, total, message)  # a no-op unless the caller sent a progressToken

    return report


async def tell_complete(ctx: Context[Any, Any], elicitation_id: str, *, related: bool = True) -> None:
    """``notifications/elicitation/complete`` for ``elicitation_id``, on 2025-11-25 only (2026-07-28
    has no such notification: its retry carries the outcome). A client gone meanwhile is no error."""
    if rides_input_required(ctx):
        return
    try:
        await ctx.session.send_elicit_complete(elicitation_id, related_request_id=ctx.request_id if related else None)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        logger.info("The client left before hearing that elicitation %s completed.", elicitation_id)


async def page_decision(runtime: Runtime, ctx: Context[Any, Any], card: Card) -> Card:
    """``card`` once the approval page decided it and its execution ended, or as it is when
    ``MAYA_LINK_WAIT_SECONDS`` ran out; the client hears ``elicitation/complete`` once it is decided."""
    seconds = runtime.settings.link_wait_seconds
    deadline = anyio.current_time() + seconds
    principal = runtime.principal(ctx)

    async def read() -> Card:
        return await runtime.service.get(card.id, principal=principal)

    async def decided() -> Card | None:
        now = await read()
        return None if now.status is CardStatus.PENDING else now

    async def ended() -> Card | None:
        now = await read()
        return None if now.status is CardStatus.EXECUTING else now

    now: Card | None = card
    if card.status is CardStatus.PENDING:
        now = await wait_for(
            runtime.links,
            card.id,
            decided,
            deadline=deadline,
            seconds=seconds,
            what="your decision on the approval page",
            progress=_progress(ctx),
        )
        if now is None:
            return await read()
    assert now is not None
    await tell_complete(ctx, card.id)
    if now.status is CardStatus.EXECUTING:
        now = await wait_for(
            runtime.links,
            card.id,
            ended,
            deadline=deadline,
            seconds=seconds,
            what="the approved change to finish",
            progress=_progress(ctx),
        )
        return now if now is not None else await read()
    return now
