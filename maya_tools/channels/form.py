"""The MCP elicitation channel of the card lifecycle, built on the SDK's resolver pattern.

It only adapts: the card comes from ``confirmation_cards.lifecycle`` (plan or reuse), the person's
answer becomes a ``lifecycle.Decision``, and ``lifecycle.decide`` carries it out.

A change tool has two resolved parameters: the card (planned, preflighted and stored before anyone
is asked) and the person's answer to it. The answer comes only from the client's elicitation
handler, a channel the model cannot drive (DESIGN.md property 1); no tool argument approves.

The SDK re-runs resolvers on every round of the 2026-07-28 ``input_required`` flow and pins a
recorded answer to the exact question it answered. So a later round does not plan again: it takes
the card already made for this exact request (``lifecycle.asked_card``), whose question renders identically,
and the answer given to it goes to the approval service, which re-reads the target (stale),
checks expiry and consumes the card once. A card that is no longer pending (approved by a
concurrent call, or a replayed ``requestState``) is not asked about again: the call reports what
became of it and executes nothing (property 3 holds in the store: approval is an atomic,
single-use transition).
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any, Literal

from mcp.server.apps import client_supports_apps
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
)
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from confirmation_cards import Action, ApprovalRefused, Card, CardNotFound, CardStatus, Planner, lifecycle
from confirmation_cards.actions import ACTIONS
from confirmation_cards.form import FORM_MAX, form_message
from confirmation_cards.models import CardOwner, card_digest_schema, strip_titles
from confirmation_cards.render import clean_text, quoted, when
from maya_tools.channels.app_secret import mint_app_secret
from maya_tools.channels.connect import answers_connect
from maya_tools.channels.opened_links import page_decision
from maya_tools.channels.page_link import link_answer, link_round, linked_card, rides_input_required
from maya_tools.channels.waiting import waiting_for, waiting_message
from maya_tools.errors import door_errors
from maya_tools.runtime import Runtime, runtime_of

Plan = Callable[..., Awaitable[Card]]


class Confirm(BaseModel):
    """The form a person answers: accepting it with ``approve`` ticked approves this one card.

    ``approve`` is required in the schema and false unless the person sets it: a form accepted
    without an explicit ``true`` is a decline (DESIGN.md property 1), never an approval by default.
    """

    model_config = ConfigDict(json_schema_extra={"required": ["approve"]})

    approve: bool = Field(
        default=False, strict=True, description="Tick to approve exactly the change described on this card."
    )


class NoApprovalChannel(BaseModel):
    """The client cannot show an elicitation: the card stays pending and nothing executes (property 9)."""

    model_config = ConfigDict(frozen=True)
    reason: str


class AlreadyDecided(BaseModel):
    """The card was decided before this call could ask (a concurrent approval, a replayed round)."""

    model_config = ConfigDict(frozen=True)
    status: CardStatus


class AppCard(BaseModel):
    """An MCP Apps client shows the card's view, whose Approve spends a one-time secret (``app_card``)."""

    model_config = ConfigDict(frozen=True)
    reason: str


class PageAnswer(BaseModel):
    """A URL-mode client's answer to the approval-page link: ``accept`` only means the person opened it."""

    model_config = ConfigDict(frozen=True)
    action: Literal["accept", "decline", "cancel"]


NO_CHANNEL = (
    "Nothing was changed. This MCP client cannot ask you to approve (it declares neither MCP "
    "elicitation nor MCP Apps), so the card is pending and will expire unapproved at {expires}. To "
    "approve changes, use a client that declares one: elicitation (VS Code, Claude Code, Cursor, the "
    "Maya chat: `maya-tools chat`) or MCP Apps (Claude, ChatGPT); a card is never approved automatically.\n"
    "A client with URL-mode elicitation only gets a one-time link to the server's approval page instead."
)
LINK_QUESTION = (
    "Approve or decline in your browser: {title} {target} on cluster {cluster}. This one-time link shows the "
    "whole card; it expires with the card at {expires}."
)
APP_WAITING = (
    "Nothing has changed yet: card {card} waits for your decision on the card your MCP client shows "
    "(Approve or Decline there; the model cannot approve it). It expires unapproved at {expires}; "
    "get_card shows what became of it."
)
PLAN_RUNNING = (
    "Approved on the approval page: the plan is running, step by step; the page shows each step as it goes. "
    "Follow it with get_card or get_cluster_operations follow={card}; stop_plan stops it between steps."
)
WAITING = (
    "Nothing has changed yet: the card waits for your decision on the approval page your client opened. "
    "It expires unapproved at {expires}; get_card shows what became of it."
)


async def card_for(
    ctx: Context[Any, Any],
    action: Action,
    cluster: str,
    target: str,
    body: dict[str, Any],
    plan: Callable[[Planner], Awaitable[Card]],
    *,
    replan: bool = False,
) -> Card:
    """The card this call is about: on a later round the one already asked about, else a new plan.

    The cluster is resolved with the caller's own token, and only the caller's own principal's card
    is found (``lifecycle.asked_card``), so a replayed ``requestState`` meets no one else's card.
    With ``replan`` (a plan card, whose digest covers steps the arguments alone do not give), a later
    round plans again, reading only, and meets the card asked about by that plan's digest.
    """
    runtime = runtime_of(ctx)
    door = runtime.door(ctx)
    principal = runtime.principal(ctx)
    # A retry after "Connect your Door account" asked about no card: finding one by the request alone
    # would meet an earlier call's executed card and change nothing.
    later_round = ctx.request_state is not None and not answers_connect(ctx)
    if replan:
        # The retry of a link round meets the card its link was for, whatever the page did with it
        # since: planning again after the page approved a plan would meet Door already changed by it.
        named = linked_card(ctx)
        linked = await runtime.store.get(named) if named is not None else None
        if linked is not None and linked.principal == principal and linked.action == action:
            return linked
        with door_errors():
            planned = _owned(await plan(runtime.planner(door, principal, runtime.client_of(ctx))), runtime.owner(ctx))
        if later_round:
            earlier = await runtime.store.find_asked(principal, action, planned.body_digest)
            if earlier is not None:
                return earlier
        return await lifecycle.keep_or_store(runtime.store, planned, runtime.now())
    if later_round:
        with door_errors():
            found = await door.resolve_cluster(cluster)
        asked = await lifecycle.asked_card(runtime.store, principal, action, found.id, target, body)
        if asked is not None:
            return asked
    with door_errors():
        planned = _owned(await plan(runtime.planner(door, principal, runtime.client_of(ctx))), runtime.owner(ctx))
    return await lifecycle.keep_or_store(runtime.store, planned, runtime.now())


def _owned(card: Card, owner: CardOwner | None) -> Card:
    """The planned card with its owner, whose stored Door token runs it under OAuth (DESIGN.md property 13)."""
    return card if owner is None else card.model_copy(update={"owner": owner})


QUESTION_MAX = FORM_MAX
"""Characters of a form question, the card's summary and the sentence that asks, together."""
ASK = "\n\nApprove this change? Tick approve and accept to run it once."


def question(card: Card) -> str:
    """The form message: the card's plain-text summary (``form_message``) and the sentence that asks,
    at most ``QUESTION_MAX`` characters. It depends on the card alone, so a later round of the
    2026-07-28 flow asks the very question the person answered."""
    return form_message(card, QUESTION_MAX - len(ASK)) + ASK


# The card a call is about to ask about, kept per call so that an answer the SDK cannot parse
# (accepted with no content, or content off the schema) is still answered as a decline of that card.
ASKED: ContextVar[dict[str, str] | None] = ContextVar("maya_tools_asked_card", default=None)


async def ask(
    card: Card, ctx: Context[Any, Any]
) -> Elicit[Confirm] | NoApprovalChannel | AlreadyDecided | PageAnswer | AppCard:
    """Ask the person (a form, or a link to the approval page when the client has URL mode only),
    or report that nobody can be asked, or that nothing is left to decide."""
    asked = ASKED.get()
    if asked is not None:
        asked["card"] = card.id
    opened = link_answer(card.id, ctx)
    if opened is not None:
        # A 2026-07-28 retry answering this card's link: the page decided, whatever the status now.
        return PageAnswer(action=opened)
    if card.status is not CardStatus.PENDING:
        return AlreadyDecided(status=card.status)
    runtime = runtime_of(ctx)
    waiting = waiting_for(card, runtime.person_approver(ctx))
    if waiting is not None:
        # The policy needs other approvers: no channel of the caller's offers an approval (issue 28).
        if asked is not None:
            asked["waiting"] = waiting
        return NoApprovalChannel(reason=waiting_message(runtime, card, waiting))
    if client_supports_apps(ctx):
        # Channel 1, and no elicitation even if the client also declares it (DESIGN.md conventions).
        return await show_app_card(card, ctx, asked)
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None:
        return NoApprovalChannel(reason=NO_CHANNEL.format(expires=when(card.expires_at)))
    # As the SDK's resolver reads it, a bare `elicitation: {}` is form support; URL only is not.
    if elicitation.form is None and elicitation.url is not None:
        return await ask_by_link(card, ctx)
    return Elicit(question(card), Confirm)


async def show_app_card(card: Card, ctx: Context[Any, Any], asked: dict[str, str] | None) -> AppCard | AlreadyDecided:
    """Channel 1: mint the card's one-time app secret; ``MayaServer.call_tool`` puts it in the result's
    ``_meta`` only (never in ``content`` or ``structuredContent``, which the model reads)."""
    runtime = runtime_of(ctx)
    secret = await mint_app_secret(runtime, card)
    if secret is None:
        return AlreadyDecided(status=(await runtime.service.get(card.id)).status)
    if asked is not None:
        asked["app_secret"] = secret
    return AppCard(reason=APP_WAITING.format(card=card.id, expires=when(card.expires_at)))


async def ask_by_link(card: Card, ctx: Context[Any, Any]) -> NoApprovalChannel | AlreadyDecided | PageAnswer:
    """Channel 3: a URL elicitation of a one-time link to the card's approval page.

    The link travels only in the elicitation request: ``elicitation/create`` mid-call on 2025-11-25,
    an ``input_required`` round on 2026-07-28 (``maya_tools.channels.page_link``; never ``-32042``, which that
    version retired), whose retry comes back through ``ask`` with the person's answer.
    """
    runtime = runtime_of(ctx)
    expires = when(card.expires_at)
    if runtime.pages is None:
        return NoApprovalChannel(reason=NO_CHANNEL.format(expires=expires))
    principal = runtime.principal(ctx)
    approver = runtime.approver(ctx, "approval page, URL elicitation")
    if principal not in approver:
        approver = f"{approver}, principal {principal}"
    # Under OAuth the page finds the signed-in owner's own Door token; nothing of the caller's is kept.
    token = None if runtime.sign_in is not None else runtime.token_for(ctx)
    link = await runtime.pages.link_for(runtime, card, token=token, approver=approver)
    if link is None:
        return AlreadyDecided(status=(await runtime.service.get(card.id)).status)
    message = LINK_QUESTION.format(
        title=ACTIONS[card.action].title,
        target=quoted(clean_text(card.target)),
        cluster=quoted(clean_text(card.cluster_name)),
        expires=expires,
    )
    if rides_input_required(ctx):
        raise link_round(card.id, message, link)
    answer = await ctx.elicit_url(message, link, card.id)
    return PageAnswer(action=answer.action)


Changed = Annotated[bool | Literal["unknown"], WithJsonSchema({"enum": [True, False, "unknown"]})]
"""Whether Door applied the change: true, false or "unknown" (the same type, said shorter in the schema)."""


class ChangeResult(BaseModel):
    """What a change tool did: the card, its status, and in plain words what happened and what next."""

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=strip_titles)

    status: CardStatus
    changed: Changed = Field(
        description='true: Door applied the change; false: nothing changed; "unknown": it may have (see message).'
    )
    message: str
    operation_id: str | None = None
    # Typed by the card's digest: five change tools repeating the whole Card schema were most of
    # tools/list. The result still carries the whole card.
    card: Annotated[Card, WithJsonSchema(card_digest_schema(only=("id", "target", "expires_at")))]


def decision_of(answer: ElicitationResult[Confirm] | AcceptedElicitation[Any]) -> lifecycle.Decision:
    """What the person's client answered, as a decision: only an accepted form with ``approve: true`` approves."""
    if isinstance(answer, AcceptedElicitation):
        data = answer.data
        if isinstance(data, NoApprovalChannel | AppCard):
            return lifecycle.NoChannel(data.reason)
        if isinstance(data, AlreadyDecided):
            return lifecycle.AlreadyDecided(data.status)
        if isinstance(data, Confirm) and data.approve is True:
            return lifecycle.Approve()
        return lifecycle.Decline("the form was accepted without approve: true, which counts as a decline")
    return lifecycle.Decline("cancelled" if answer.action == "cancel" else "declined")


async def decide(
    card: Card, answer: ElicitationResult[Confirm] | AcceptedElicitation[Any], ctx: Context[Any, Any]
) -> ChangeResult:
    """Execute, decline or leave pending, according to the person's answer."""
    if isinstance(answer, AcceptedElicitation) and isinstance(answer.data, PageAnswer):
        return await page_outcome(runtime_of(ctx), ctx, card, answer.data)
    return await decide_as(runtime_of(ctx), ctx, card, decision_of(answer))


async def page_outcome(runtime: Runtime, ctx: Context[Any, Any], card: Card, answer: PageAnswer) -> ChangeResult:
    """After a URL elicitation: a refused link declines; an opened one reports what the page decided."""
    if answer.action != "accept":
        return await decide_as(
            runtime, ctx, card, lifecycle.Decline("cancelled" if answer.action == "cancel" else "declined")
        )
    with card_errors():
        now = await runtime.service.get(card.id, principal=runtime.principal(ctx))
        # "accept" means only that the link was opened: wait, bounded, for what the page decides.
        now = await page_decision(runtime, ctx, now)
    if now.status is CardStatus.PENDING:
        return ChangeResult(
            status=now.status, changed=False, message=WAITING.format(expires=when(now.expires_at)), card=now
        )
    if now.status is CardStatus.EXECUTING and now.steps:
        # The page runs an approved plan in the background (maya_tools.channels.page) and shows its steps.
        return ChangeResult(status=now.status, changed="unknown", message=PLAN_RUNNING.format(card=now.id), card=now)
    return outcome(now, decided_here=True)


async def decline_as(runtime: Runtime, ctx: Context[Any, Any], card_id: str, reason: str) -> ChangeResult:
    """Decline the caller's card and answer like any decline."""
    with card_errors():
        card = await runtime.service.get(card_id, principal=runtime.principal(ctx))
    return await decide_as(runtime, ctx, card, lifecycle.Decline(reason))


async def decide_as(
    runtime: Runtime,
    ctx: Context[Any, Any],
    card: Card,
    decision: lifecycle.Decision,
    channel: str = "MCP elicitation",
) -> ChangeResult:
    principal = runtime.principal(ctx)
    if card.principal is not None and card.principal != principal:
        raise ToolError(NOT_YOURS)  # never reached through card_for; a guard, not a path
    if isinstance(decision, lifecycle.NoChannel):
        return ChangeResult(status=card.status, changed=False, message=decision.reason, card=card)
    # One approver string per decision, so this call can tell whether it was the one that
    # decided the card (fifty concurrent approvals: one executes, the rest report it).
    who = f"{runtime.approver(ctx, channel)} #{secrets.token_hex(4)}"

    async def progress(done: float, total: float, message: str) -> None:
        await ctx.report_progress(done, total, message)  # a plan's steps and workers, as it runs

    with door_errors(), card_errors():
        done = await lifecycle.decide(
            runtime.service,
            card,
            decision,
            by=who,
            principal=principal,
            door=runtime.door(ctx),
            progress=progress,
            person=runtime.person_approver(ctx),
        )
    if isinstance(decision, lifecycle.Approve):
        return outcome(done, decided_here=done.approved_by == who)
    if isinstance(decision, lifecycle.Decline):
        return outcome(done, decided_here=done.declined_by == who, reason=decision.reason)
    return outcome(done, decided_here=False)


NOT_YOURS = "No confirmation card with that id is yours to answer; nothing was changed."


@contextmanager
def card_errors() -> Iterator[None]:
    try:
        yield
    except CardNotFound as exc:
        raise ToolError(NOT_YOURS) from exc
    except ApprovalRefused as exc:
        raise ToolError(f"Refused, nothing was changed: {exc}") from exc


def outcome(card: Card, *, decided_here: bool, reason: str = "declined") -> ChangeResult:
    result = card.result
    said = result.message if result is not None else ""
    if not decided_here and card.status in (
        CardStatus.EXECUTING,
        CardStatus.EXECUTED,
        CardStatus.DECLINED,
        CardStatus.OUTCOME_UNKNOWN,
    ):
        # Someone else's decision on this card already stands; this call changed nothing.
        return ChangeResult(
            status=card.status,
            changed=False,
            message=f"This card was already {card.status.value} by an earlier or concurrent answer; this call changed nothing. {said}".strip(),
            operation_id=result.operation_id if result else None,
            card=card,
        )
    if card.steps and card.status in (CardStatus.EXECUTED, CardStatus.STOPPED):
        added = any(s.kind == "add" and s.status == "done" for s in card.steps)
        head = "Approved once; the plan ran." if card.status == CardStatus.EXECUTED else "Approved; the plan stopped."
        return ChangeResult(status=card.status, changed=added, message=f"{head} {said}", card=card)
    if card.status == CardStatus.EXECUTED:
        message = f"Approved and sent to Door, which accepted it. {said}".strip()
        return ChangeResult(
            status=card.status,
            changed=True,
            message=message + " Follow it with get_cluster_operations.",
            operation_id=result.operation_id if result else None,
            card=card,
        )
    if card.status == CardStatus.DECLINED:
        if reason == "cancelled":
            message = "Cancelled without approval: the card is recorded as declined and nothing was changed."
        elif reason == "declined":
            message = "Declined: nothing was changed."
        else:
            message = f"Declined ({reason}): nothing was changed."
        return ChangeResult(status=card.status, changed=False, message=message, card=card)
    if card.status == CardStatus.EXPIRED:
        return ChangeResult(
            status=card.status,
            changed=False,
            message="The card expired before approval: nothing was changed.",
            card=card,
        )
    if card.status == CardStatus.STALE:
        return ChangeResult(
            status=card.status,
            changed=False,
            message=f"Nothing was changed: the target changed since the card was made. {said} Ask again for a fresh card.",
            card=card,
        )
    if card.status == CardStatus.FAILED:
        return ChangeResult(status=card.status, changed=False, message=f"Not done: {said}", card=card)
    if card.status == CardStatus.OUTCOME_UNKNOWN:
        return ChangeResult(status=card.status, changed="unknown", message=said, card=card)
    return ChangeResult(status=card.status, changed=False, message=said or f"Card {card.status.value}.", card=card)
