"""The confirmation card and its parts: everything a human sees before approving one backend call.

A card binds an approval to one exact request (method, path, JSON body and their digest) and to the
state of its target when it was planned (a fingerprint), so that approving it can execute nothing
else (DESIGN.md "Approval: what must hold", 2 and 5).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from backend_client.models import Capacity

Action = Literal[
    "add_node_pool", "scale_node_pool", "relabel_node_pool", "remove_node_pool", "replace_node", "change_pool_tier"
]
Method = Literal["POST", "PATCH", "DELETE"]
StepKind = Literal["add", "wait", "remove"]
StepMethod = Literal["POST", "GET", "DELETE"]
AuditKind = Literal[
    "created",
    "approval",
    "approved",
    "declined",
    "expired",
    "executed",
    "failed",
    "stale",
    "outcome_unknown",
    "recovered",
    "step",
    "stop_requested",
    "stopped",
]

REQUIRED_ROLE: Literal["super_admin"] = "super_admin"  # R-AUTH-03: every mutation needs it


class CardStatus(StrEnum):
    """``pending`` is the only state an approval can leave; every other state is final but ``executing``.

    ``outcome_unknown``: the request may have reached Door and neither Door's answer nor reading Door
    back could tell whether it took effect (DESIGN.md property 11); the result says what to check.
    """

    PENDING = "pending"
    EXECUTING = "executing"
    EXECUTED = "executed"
    FAILED = "failed"
    DECLINED = "declined"
    EXPIRED = "expired"
    STALE = "stale"
    OUTCOME_UNKNOWN = "outcome_unknown"
    STOPPED = "stopped"
    """A plan stopped between steps (asked to, past its deadline, or its pools changed): the result
    says what exists on Door now and what to do next."""


class StepStatus(StrEnum):
    """A plan step's state, written to the store before and after its call (``confirmation_cards.plans``).

    ``sending``: the step's request may have left; a server continuing the plan reads Door to tell
    whether it took effect and re-sends only with the same ``Idempotency-Key``."""

    PENDING = "pending"
    SENDING = "sending"
    WAITING = "waiting"
    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"
    SKIPPED = "skipped"
    OUTCOME_UNKNOWN = "outcome_unknown"


def strip_titles(schema: dict[str, Any]) -> None:
    """pydantic's generated ``title`` repeats each property's name: left out of the published schemas."""
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)


class _Own(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=strip_titles)


class FieldChange(_Own):
    """One field of the target before and after; ``None`` on a side means absent."""

    field: str
    before: JsonValue
    after: JsonValue


class CardWarning(_Own):
    """Something a careful operator would want to know before approving."""

    code: str
    message: str
    rule: str | None = None


class CardResult(_Own):
    """What happened when the card was approved (or why nothing happened)."""

    status_code: int | None = None
    operation_id: str | None = None
    message: str
    rule: str | None = None
    request_id: str | None = None


class PlanStep(_Own):
    """One step of a plan card: its exact request, its own digest and, once approved, its state.

    An ``add`` or ``remove`` step is one Door call keyed ``<card id>.<index>``; a ``wait`` step only
    reads (its request is the read it repeats) until the pool's operation is done and its workers Running.
    """

    index: int
    kind: StepKind
    pool: str
    method: StepMethod
    path: str
    body: dict[str, JsonValue] = Field(default_factory=dict)
    digest: str
    title: str
    takes: str = Field(description="What the step costs in time, in words.")
    status: StepStatus = StepStatus.PENDING
    operation_id: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    note: str = ""


class CardOwner(_Own):
    """The person a card belongs to under OAuth: the issuer and ``sub`` their Door token is kept under.

    Whoever carries the card on (this server, a restarted one, another replica) looks their own Door
    credential up by it (DESIGN.md property 13). Neither is a secret."""

    issuer: str
    subject: str
    name: str | None = None
    """Their readable name from the access token's verified claims (``MAYA_OAUTH_NAME_CLAIM``), for the
    approvers' review page and webhook; never used to find their credential or to decide anything."""


class Requirement(_Own):
    """One matching policy rule's approvals: ``approvals`` distinct qualifying people must approve.

    A person qualifies when their verified ``claim`` holds one of ``any_of`` (anyone, without a
    ``claim``); with ``self_approval`` false the person who asked does not count."""

    rule: str
    approvals: int
    claim: str | None = None
    any_of: tuple[str, ...] = ()
    self_approval: bool = True


class CardPolicy(_Own):
    """The team's policy as it applied to a card: every matching rule's name, the approvals each
    requires, and their digest (``confirmation_cards.policy.policy_digest``)."""

    rules: tuple[str, ...]
    requirements: tuple[Requirement, ...] = ()
    digest: str


class CardApproval(_Own):
    """One person's approval of a card that waits for the policy's approvers (append-only, one per person).

    ``claims`` are the values of the requirements' claims the person held when approving, as
    verified (the access token, or the browser sign-in's ID token); ``rules`` the requirements it
    counted for. Never a token."""

    principal: str
    issuer: str | None = None
    subject: str | None = None
    name: str | None = None
    claims: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    rules: tuple[str, ...] = ()
    at: datetime
    channel: str = ""


class Card(_Own):
    """One planned mutation awaiting a human decision. Never holds a token.

    A plan card (``steps`` not empty) is approved once for all its steps; its ``body_digest`` binds
    every step's digest, and ``method``/``path``/``body`` are its first step's request."""

    id: str
    action: Action
    cluster_id: str
    cluster_name: str
    target: str
    method: Method
    path: str
    body: dict[str, JsonValue]
    body_digest: str
    diff: tuple[FieldChange, ...]
    capacity_before: Capacity
    capacity_after: Capacity
    price_before: float
    price_after: float
    price_change: float
    credit_needed: float | None = None
    warnings: tuple[CardWarning, ...] = ()
    rules: tuple[str, ...] = ()
    required_role: Literal["super_admin"] = REQUIRED_ROLE
    organisation: str | None = None
    principal: str | None = Field(
        default=None, description="Fingerprint of the token that planned the card: only it may answer or read it."
    )
    target_snapshot: dict[str, JsonValue]
    target_fingerprint: str
    created_at: datetime
    expires_at: datetime
    status: CardStatus = CardStatus.PENDING
    result: CardResult | None = None
    approved_by: str | None = None
    approved_at: datetime | None = None
    declined_by: str | None = None
    decided_at: datetime | None = None
    steps: tuple[PlanStep, ...] = ()
    price_peak: float | None = None
    capacity_peak: Capacity | None = None
    stop_requested_by: str | None = None
    owner: CardOwner | None = Field(
        default=None, description="Under OAuth, the person whose stored Door token runs the card; else None."
    )
    credential: str | None = Field(
        default=None,
        description="Fingerprint of the Door token the card was approved to run with: a later step that finds "
        "another token (replaced, or disconnected and connected again) stops before its request.",
    )
    policy: CardPolicy | None = Field(
        default=None, description="The team's policy rules that applied (MAYA_POLICY); None without a policy."
    )
    approvals: tuple[CardApproval, ...] = Field(
        default=(), description="The approvals counted so far toward the policy's requirements."
    )


class AuditEvent(_Own):
    """One append-only row of a card's history: who did what, when, and what Door answered.

    ``status`` is the card's status once the row was written, ``request_id`` Door's id of the answer
    the row records and ``replica`` the ``MAYA_REPLICA`` of the server that wrote it; rows written
    before the store kept these have None."""

    seq: int
    card_id: str
    at: datetime
    event: AuditKind
    by: str | None = None
    status_code: int | None = None
    operation_id: str | None = None
    rule: str | None = None
    detail: str = ""
    status: CardStatus | None = None
    request_id: str | None = None
    replica: str | None = None


def token_fingerprint(token: str) -> str:
    """A short, stable name for a bearer token (DESIGN.md property 12): never the token, not reversible."""
    return "tok_" + hashlib.sha256(token.encode()).hexdigest()[:16]


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the form every digest here is taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def request_digest(method: str, path: str, body: dict[str, Any]) -> str:
    """The digest an approval is bound to: method, path and body together (DESIGN.md property 2)."""
    return sha256({"method": method, "path": path, "body": body})


def plan_digest(steps: tuple[PlanStep, ...] | list[PlanStep]) -> str:
    """A plan card's digest: every step's request and its digest, in order (one approval binds them all)."""
    return sha256([{"method": s.method, "path": s.path, "body": s.body, "digest": s.digest} for s in steps])


def step_digest(method: str, path: str, body: dict[str, Any], index: int) -> str:
    """A step's own digest: its request and its place in the plan."""
    return sha256({"method": method, "path": path, "body": body, "index": index})


class CardDigest(BaseModel):
    """The part of a card a tool's result is typed by (change tools, get_card); the card itself is sent whole."""

    model_config = ConfigDict(extra="allow", json_schema_extra=strip_titles)

    id: str
    action: Action
    status: CardStatus
    cluster_name: str
    target: str
    body: dict[str, JsonValue]
    # Objects, not typed further here: the rendered card and get_card's text say each change and warning.
    diff: list[dict[str, JsonValue]]
    warnings: list[dict[str, JsonValue]]
    expires_at: datetime


def card_digest_schema(*, only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """``CardDigest``'s JSON schema, self-contained, for ``WithJsonSchema`` on a ``Card`` field.

    ``only`` keeps those fields of the digest: a change tool's result states the card's status
    itself, typed, and its name is the action, so its card is typed by its id and expiry."""
    schema = CardDigest.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rpartition("/")[2]])
            return {k: inline(v) for k, v in node.items() if k != "description" or node is schema}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    schema = dict(inline(schema))
    if only is not None:
        schema["properties"] = {name: schema["properties"][name] for name in only}
        schema["required"] = [name for name in schema["required"] if name in only]
        schema["description"] = "The whole confirmation card (get_card's result types its main fields)."
    else:
        schema["description"] = "The whole confirmation card; its main fields are typed here."
    return schema
