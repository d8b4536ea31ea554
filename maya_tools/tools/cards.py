"""Reading a confirmation card: what it would do, its status and its history. Approving is not here."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from confirmation_cards import AuditEvent, Card, render_markdown, render_text
from confirmation_cards.models import card_digest_schema
from maya_tools.runtime import runtime_of
from maya_tools.tools.arguments import CARD_ID_MAX
from maya_tools.tools.card_texts import card_text
from maya_tools.tools.results import answer

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


class CardView(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Typed by the card's digest, as in the change tools' results: the whole Card schema was 5 KB of
    # tools/list. The card is still sent whole.
    card: Annotated[Card, WithJsonSchema(card_digest_schema())]
    rendered: str = Field(description="The card as a person sees it (Markdown).")
    text: str = Field(description="The same card as plain text, for a terminal: every part, the exact request last.")
    audit: list[AuditEvent] = Field(description="Who created, approved, declined or executed it, and when.")


def register(mcp: MCPServer[Any]) -> None:
    @mcp.tool(title="Show Confirmation Card", annotations=READ)
    async def get_card(
        ctx: Context[Any, Any],
        card_id: Annotated[
            str, Field(max_length=CARD_ID_MAX, description="The card's id, as a change tool returned it (`card_…`).")
        ],
    ) -> Annotated[CallToolResult, CardView]:
        """Show a confirmation card, its status and its audit trail."""
        runtime = runtime_of(ctx)
        await runtime.service.expire_due()
        card = await runtime.store.get(card_id)
        principal = runtime.principal(ctx)
        # A card is shown only to the principal that planned it (DESIGN.md property 12). Another
        # principal's card and an id that never existed get the same answer: no oracle of ids.
        mine = card is not None and (
            card.principal == principal or (card.principal is None and runtime.transport != "streamable-http")
        )
        if card is None or not mine:
            raise ToolError(
                f"No confirmation card {card_id!r} of yours. Change tools return the id of the card they make."
            )
        audit = await runtime.store.audit(card_id)
        return answer(
            CardView(card=card, rendered=render_markdown(card), text=render_text(card), audit=audit),
            card_text(card, audit),
        )
