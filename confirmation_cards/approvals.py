"""Counting approvals toward a card's policy requirements (``Card.policy``), and who qualifies.

Pure. Each requirement is met on its own: ``approvals`` distinct people who qualify for it (their
verified claim holds one of its values; not the person who asked, when ``self_approval`` is false).
One person's approval counts once per card, for every requirement it qualifies for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from confirmation_cards.models import Card, CardApproval, Requirement


@dataclass(frozen=True)
class Approver:
    """A verified person deciding a card: ``principal`` is what cards are bound to (``sub_…`` under
    OAuth: issuer and ``sub`` hashed; a token fingerprint otherwise). ``claims`` are their verified
    claims (a claim may be a string or a list of strings); never a token."""

    principal: str
    issuer: str | None = None
    subject: str | None = None
    name: str | None = None
    claims: Mapping[str, object] = field(default_factory=dict)

    def values(self, claim: str) -> tuple[str, ...]:
        """The claim's values: a string is one value, a list of strings its strings, anything else none."""
        raw = self.claims.get(claim)
        if isinstance(raw, str):
            return (raw,)
        if isinstance(raw, list | tuple):
            return tuple(v for v in raw if isinstance(v, str))
        return ()


class ApprovalRefused(Exception):
    """This person may not decide this card (or not here); ``str()`` names the rule and what to do next."""


def is_requester(card: Card, who: Approver | CardApproval) -> bool:
    """Whether ``who`` is the person who asked for ``card`` (its owner's issuer and ``sub``, or its principal)."""
    owner = card.owner
    if owner is not None and (owner.issuer, owner.subject) == (who.issuer, who.subject):
        return True
    return card.principal is not None and card.principal == who.principal


def _held(requirement: Requirement, claims: Mapping[str, Sequence[str]]) -> bool:
    if requirement.claim is None:
        return True
    return any(value in requirement.any_of for value in claims.get(requirement.claim, ()))


def counts_for(card: Card, requirement: Requirement, who: Approver | CardApproval) -> bool:
    """Whether ``who``'s approval counts toward ``requirement`` of ``card``."""
    if not requirement.self_approval and is_requester(card, who):
        return False
    claims = who.claims if isinstance(who, CardApproval) else claims_of(card, who)
    return _held(requirement, claims)


def claims_of(card: Card, who: Approver) -> dict[str, tuple[str, ...]]:
    """The values of the claims ``card``'s requirements name, as ``who`` holds them (what an approval records)."""
    names = sorted({r.claim for r in requirements(card) if r.claim is not None})
    return {name: who.values(name) for name in names if who.values(name)}


def requirements(card: Card) -> tuple[Requirement, ...]:
    return card.policy.requirements if card.policy is not None else ()


def needs_approvers(card: Card) -> bool:
    """Whether the card waits for the policy's approvers rather than only its requester's answer."""
    return bool(requirements(card))


def outstanding(card: Card, approvals: Sequence[CardApproval] | None = None) -> list[tuple[Requirement, int]]:
    """Each requirement not met yet, with how many more approvals it needs."""
    given = card.approvals if approvals is None else approvals
    left: list[tuple[Requirement, int]] = []
    for requirement in requirements(card):
        have = len({a.principal for a in given if counts_for(card, requirement, a)})
        if have < requirement.approvals:
            left.append((requirement, requirement.approvals - have))
    return left


def approval_by(card: Card, who: Approver, at: datetime, channel: str = "") -> CardApproval:
    """The record of ``who`` approving ``card`` now: the claims it was judged by and the rules it counts for."""
    counted = tuple(r.rule for r in requirements(card) if counts_for(card, r, who))
    return CardApproval(
        principal=who.principal,
        issuer=who.issuer,
        subject=who.subject,
        name=who.name,
        claims=claims_of(card, who),
        rules=counted,
        at=at,
        channel=channel,
    )


def would_complete(card: Card, who: Approver) -> bool:
    """Whether ``who``'s approval, added to those given, meets every requirement."""
    if any(a.principal == who.principal for a in card.approvals):
        return not outstanding(card)
    return not outstanding(card, [*card.approvals, approval_by(card, who, datetime.min)])


def whom(requirement: Requirement) -> str:
    """Who may meet a requirement, in words: "platform", "platform or sre", "another person"."""
    if requirement.claim is None:
        return "another person" if not requirement.self_approval else "a signed-in person"
    return " or ".join(requirement.any_of)


def waiting_line(card: Card, viewer: Approver | None = None) -> str:
    """What the card still waits for, whole, e.g. "needs 1 approval from platform (rule prod-four-eyes);
    you cannot approve your own change" said to its requester (``viewer``); said to nobody in
    particular (a rendering), "the person who asked cannot approve it". Empty when nothing is outstanding."""
    parts: list[str] = []
    for requirement, more in outstanding(card):
        noun = "approval" if more == 1 else "approvals"
        parts.append(f"needs {more} {noun} from {whom(requirement)} (rule {requirement.rule})")
    if not parts:
        return ""
    line = "; ".join(parts)
    own_barred = any(not r.self_approval for r, _ in outstanding(card))
    if viewer is None:
        line += "; the person who asked cannot approve it" if own_barred else ""
    elif is_requester(card, viewer):
        if own_barred:
            line += "; you cannot approve your own change"
        elif not would_complete(card, viewer):
            line += "; your own approval is not enough"
    return line


def policy_lines(card: Card) -> list[str]:
    """What a rendering of ``card`` says of its policy: what it waits for, and who approved."""
    lines: list[str] = []
    waiting = waiting_line(card) if card.status.value == "pending" else ""
    if waiting:
        lines.append(f"Waiting: {waiting}.")
    elif requirements(card):
        lines.append("Every approval the policy requires was given.")
    for approval in card.approvals:
        counted = ", ".join(approval.rules) or "no rule"
        lines.append(
            f"Approved by {approver_label(approval)} at {approval.at:%Y-%m-%d %H:%M:%S} UTC (counts for {counted})."
        )
    return lines


def refusal(card: Card, who: Approver) -> str | None:
    """Why ``who`` may not approve ``card`` now (naming the rule and what to do next); None when they may.

    A person may approve when their approval counts toward at least one outstanding requirement and
    they have not approved this card yet."""
    left = outstanding(card)
    if not left:
        return None
    if any(a.principal == who.principal for a in card.approvals):
        return f"You already approved this card; it still {waiting_line(card, who)}. Another approver must approve it."
    if any(counts_for(card, r, who) for r, _ in left):
        return None
    first = left[0][0]
    if not first.self_approval and is_requester(card, who):
        why = f"you asked for this change and rule {first.rule} does not count the requester's own approval"
    elif first.claim is not None:
        why = f"rule {first.rule} needs a person whose {first.claim} claim holds {whom(first)}, and yours does not"
    else:
        why = f"rule {first.rule} needs {whom(first)}"
    return f"You cannot approve this card: {why}. It {waiting_line(card)}; one of them approves it on its review page."


REVIEW_HINT = "A person who may approve it does so on this server's review page, /cards/{card}."
"""Where the approvers approve (the server's ``MAYA_PUBLIC_URL`` + ``/cards/<card id>``)."""


def requester_of(card: Card) -> Approver:
    """The person who asked for ``card``, as an approver holding no claims (a channel that has no verified
    claims of the caller: stdio, ``--auth door-token``)."""
    owner = card.owner
    return Approver(
        principal=card.principal or "",
        issuer=owner.issuer if owner is not None else None,
        subject=owner.subject if owner is not None else None,
        name=owner.name if owner is not None else None,
    )


def approver_label(who: Approver | CardApproval) -> str:
    """Who, as the audit and the card name them: readable name, ``sub`` and principal; never a token."""
    sub = "".join(ch for ch in who.subject or "" if ch.isprintable())[:80]
    name = "".join(ch for ch in who.name or "" if ch.isprintable())[:80]
    if name and sub:
        return f"{name} (sub {sub}, {who.principal})"
    if sub:
        return f"sub {sub} ({who.principal})"
    return who.principal or "the requester"
