"""The one-time secret that lets the MCP Apps card view decide a card (channel 1).

App-only tools still appear in ``tools/list`` (hiding them is the host's job), so the view's decide
tool cannot trust who calls it: it needs a secret the model never sees. The server mints 32 random
bytes when a change tool returns a pending card to an Apps client and sends it only in the tool
result's ``_meta``. The card store keeps only a hash bound to the card and to the principal that
planned it, in the same ``link_hash`` slot as the approval page's link (an Apps client is never sent
a link), domain-separated so a page link is no app secret and an app secret opens no page. A newer
secret for the card replaces the older one; deciding spends it atomically (``use_link``).
"""

from __future__ import annotations

import hashlib
import secrets

from confirmation_cards import Card
from maya_tools.runtime import Runtime

APP_URI = "ui://maya-tools/card.html"
"""The card view every change tool is bound to (``_meta.ui.resourceUri``)."""
META_KEY = "maya-tools/approval"
"""The result ``_meta`` key carrying ``{"cardId", "secret"}`` to the view."""
SECRET_BYTES = 32


def app_hash(card_id: str, principal: str, secret: str) -> str:
    """What the store keeps of an app secret: bound to the card and to the principal."""
    return hashlib.sha256(f"mcp-apps card\n{card_id}\n{principal}\n{secret}".encode()).hexdigest()


async def mint_app_secret(runtime: Runtime, card: Card) -> str | None:
    """A new one-time secret for ``card``, or None when the card is no longer pending."""
    secret = secrets.token_urlsafe(SECRET_BYTES)
    if not await runtime.store.set_link(card.id, app_hash(card.id, card.principal or "", secret)):
        return None
    return secret


async def spend_app_secret(runtime: Runtime, card: Card, principal: str, secret: str) -> bool:
    """Spend the secret, atomically: true once, for the caller that planned the card, while it is pending.

    The comparison of principals is the secret's one principal check (a card without a principal is
    nobody's to decide here). The hash looked up is the one minted, of the card's own principal, not
    the caller's: hashing the caller's would repeat the check, and each copy would hide the removal
    of the other from every test (``tests/maya_tools/test_guard_layers.py`` has one per layer).
    """
    if card.principal != principal:
        return False
    return await runtime.store.use_link(card.id, app_hash(card.id, card.principal or "", secret))
