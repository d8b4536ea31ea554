"""Channel 1: the MCP Apps card (clients that declared the ``io.modelcontextprotocol/ui`` extension).

Every change tool is bound to ``ui://maya-tools/card.html``. To an Apps client a change tool returns
the pending card without eliciting (its text for the model as always, the whole card in
``structuredContent`` for the view) and a one-time secret in the result's ``_meta`` only
(``maya_tools.channels.app_secret``). The view's Approve and Decline call ``decide_card``, an app-only tool
(``visibility: ["app"]``); visibility is not access control, so the call must carry that secret,
which is bound to the card and to the caller's principal and spent atomically before
``lifecycle.decide`` (single use, expiry, stale re-check, idempotent execution, audit as for a form).

After an approval that Door accepted, ``decide_card`` returns the operation id and the view follows
that operation by polling ``get_cluster_operations`` (read-only, the caller's own Door token) until
it succeeds or fails, at most every 2 s and for at most 15 minutes, and never after teardown. That
tool is already the model's own read, so the view reads nothing the model could not; a new app-only
read tool would add surface and would not fit ``tools/list``'s 20 KB budget.

The view is one self-contained document: ``static/card-view.html`` with its script inlined,
``static/card-view.js``, which ``web/card-view/build.mjs`` bundles from the view's source and only
what it imports of the ext-apps SDK (``@modelcontextprotocol/ext-apps`` and its dependencies, pinned
by that folder's lockfile; their licences in ``static/card-view.licenses.txt``). Nothing is loaded
from the network.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Annotated, Any, Literal

from mcp.server.apps import Apps
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from confirmation_cards import CardNotFound, CardStatus, lifecycle
from maya_tools.channels.app_secret import APP_URI, spend_app_secret
from maya_tools.channels.form import Changed, decide_as
from maya_tools.channels.waiting import refused_here, waiting_for
from maya_tools.runtime import runtime_of
from maya_tools.tools.card_texts import outcome_text
from maya_tools.tools.results import answer

CHANNEL = "MCP Apps card"
REFUSED = "Refused: only the card's own view can decide it, with its one-time secret; nothing was changed."
SCRIPT_SLOT = "/*CARD_VIEW_JS*/"


class Decided(BaseModel):
    """What the view's decision did."""

    model_config = ConfigDict(frozen=True)
    status: CardStatus
    changed: Changed
    message: str
    operation_id: str | None = None


@cache
def view_html() -> str:
    """The card view: the template with its built script inlined."""
    static = resources.files("maya_tools") / "static"
    template = (static / "card-view.html").read_text(encoding="utf-8")
    script = (static / "card-view.js").read_text(encoding="utf-8").rstrip()
    if template.count(SCRIPT_SLOT) != 1:
        raise ValueError(f"card-view.html must hold {SCRIPT_SLOT} exactly once, where its script goes")
    if any(marker in script.lower() for marker in ("</script", "<script", "<!--")):
        # Any of these would end the inline script early or change how the HTML parser reads it.
        raise ValueError("card-view.js contains </script, <script or <!-- and cannot be inlined: rebuild it")
    return template.replace(SCRIPT_SLOT, script)


async def decide_card(
    card_id: Annotated[str, Field(max_length=128, description="The card's id.")],
    secret: Annotated[str, Field(min_length=1, max_length=128, description="The view's one-time secret.")],
    decision: Annotated[Literal["approve", "decline"], Field(description="The person's choice.")],
    ctx: Context[Any, Any],
) -> Annotated[CallToolResult, Decided]:
    """Decide a card from its view (needs the view's one-time secret)."""
    runtime = runtime_of(ctx)
    principal = runtime.principal(ctx)
    try:
        card = await runtime.service.get(card_id, principal=principal)
    except CardNotFound as exc:
        raise ToolError(REFUSED) from exc
    waiting = waiting_for(card, runtime.person_approver(ctx)) if decision == "approve" else None
    if waiting is not None:
        raise ToolError(refused_here(runtime, card, waiting))  # the policy waits for other people
    if not await spend_app_secret(runtime, card, principal, secret):
        raise ToolError(REFUSED)
    chosen: lifecycle.Decision = (
        lifecycle.Approve() if decision == "approve" else lifecycle.Decline("declined on the app card")
    )
    done = await decide_as(runtime, ctx, card, chosen, channel=CHANNEL)
    decided = Decided(status=done.status, changed=done.changed, message=done.message, operation_id=done.operation_id)
    return answer(decided, outcome_text(done.status, done.changed, done.message, done.operation_id))


def build_apps() -> Apps:
    """The Apps extension: the card view and the app-only ``decide_card``."""
    apps = Apps()
    apps.add_html_resource(APP_URI, view_html(), name="card view", title="Confirmation card", prefers_border=True)
    apps.tool(
        resource_uri=APP_URI,
        visibility=["app"],
        name="decide_card",
        title="Approve or Decline Card",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
        ),
    )(decide_card)
    return apps
