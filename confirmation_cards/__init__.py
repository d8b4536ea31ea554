"""Confirmation cards: a human approves one exact Door request before it is sent.

Planners read the target and preflight with ``backend_client.rules`` to make a ``Card``; the
``CardStore`` keeps it; ``ApprovalService.approve`` is the only path from a card to the backend
(consume once, re-check the target, execute with the card id as ``Idempotency-Key``, audit).
"""

from confirmation_cards import lifecycle
from confirmation_cards.actions import ACTIONS, ActionSpec, request_line
from confirmation_cards.approval import ApprovalService
from confirmation_cards.approvals import ApprovalRefused, Approver
from confirmation_cards.door import DoorApi
from confirmation_cards.errors import CardNotFound, PreflightError
from confirmation_cards.models import (
    Action,
    AuditEvent,
    Card,
    CardResult,
    CardStatus,
    CardWarning,
    FieldChange,
    request_digest,
    token_fingerprint,
)
from confirmation_cards.planner import DEFAULT_TTL, Planner
from confirmation_cards.render import render_markdown, render_text, safe_text
from confirmation_cards.roles import RoleMemory
from confirmation_cards.stores import CardStore, SqliteCardStore

__all__ = [
    "ACTIONS",
    "DEFAULT_TTL",
    "Action",
    "ActionSpec",
    "ApprovalRefused",
    "ApprovalService",
    "Approver",
    "AuditEvent",
    "Card",
    "CardNotFound",
    "CardResult",
    "CardStatus",
    "CardStore",
    "CardWarning",
    "DoorApi",
    "FieldChange",
    "Planner",
    "PreflightError",
    "RoleMemory",
    "SqliteCardStore",
    "lifecycle",
    "render_markdown",
    "render_text",
    "request_digest",
    "request_line",
    "safe_text",
    "token_fingerprint",
]
