"""The team's policy (``MAYA_POLICY``): which changes are denied, which limits hold, who must approve.

Pure: no MCP, no I/O. ``maya_tools.policy`` reads the TOML file and wires the decision into the
planners; ``confirmation_cards.approvals`` counts the approvals a card's requirements need.

A rule matches a planned card when its ``clusters``, ``pools`` and ``actions`` all match. Every
matching rule applies (docs/policy.md): a ``deny`` refuses before any card, every limit
(``max_count``, ``sizes``, ``clients``) must hold, and each matching rule's ``approvals`` become one
``Requirement`` on the card, met on its own. The applied rules and requirements travel on the card
(``Card.policy``) with a digest of them, so a card planned under other requirements is another card.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from backend_client.rules import Violation
from confirmation_cards.errors import NOT_A_BACKEND_REFUSAL, PreflightError
from confirmation_cards.models import Action, Card, CardPolicy, Requirement, sha256

PolicyAction = Literal["add", "scale", "relabel", "remove", "replace", "change_tier", "*"]

ACTION_OF: dict[str, Action] = {
    "add": "add_node_pool",
    "scale": "scale_node_pool",  # count and autoscaling (auto_scale, min_nodes, max_nodes) alike
    "relabel": "relabel_node_pool",
    "remove": "remove_node_pool",
    "replace": "replace_node",
    "change_tier": "change_pool_tier",
}
"""The policy file's action words and the card actions they name."""

POLICY_RULE = "POLICY"
"""The rule id a policy refusal carries where Door's rules carry ``R-…`` (the policy rule's name follows)."""

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Approvers(_Strict):
    """Who qualifies: a person whose verified ``claim`` (a string or a list of strings) holds one of ``any_of``."""

    claim: Text
    any_of: tuple[Text, ...] = Field(min_length=1)


class Rule(_Strict):
    """One ``[[rule]]`` of the policy file (docs/policy.md has each field)."""

    name: Text
    clusters: tuple[Text, ...] = Field(min_length=1)
    pools: tuple[Text, ...] = Field(default=("*",), min_length=1)
    actions: tuple[PolicyAction, ...] = Field(default=("*",), min_length=1)
    approvals: int = Field(default=0, ge=0, le=10)
    approvers: Approvers | None = None
    self_approval: bool = True
    max_count: int | None = Field(default=None, ge=0)
    sizes: tuple[Text, ...] | None = Field(default=None, min_length=1)
    deny: Text | None = None
    clients: tuple[Text, ...] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Rule:
        for cluster in self.clusters:
            if cluster.startswith("tag:") and not cluster[4:].strip():
                raise ValueError("clusters: 'tag:' needs a tag after it, for example 'tag:prod'")
        if self.approvers is not None and self.approvals == 0:
            raise ValueError("approvers: set approvals (how many of them must approve), for example approvals = 1")
        if self.deny is not None and (self.approvals or self.max_count is not None or self.sizes is not None):
            raise ValueError("deny: a deny rule refuses outright; put approvals and limits in another rule")
        return self

    @property
    def needs_identities(self) -> bool:
        """Whether meeting this rule needs verified people: another person, or a claim the requester
        may not hold, or the caller's OAuth client."""
        needs_other = self.approvals >= 1 and (not self.self_approval or self.approvers is not None)
        return needs_other or self.approvals >= 2 or self.clients is not None


class Policy(_Strict):
    """The whole file: ``[[rule]]`` tables, applied in file order."""

    rule: tuple[Rule, ...] = ()

    @model_validator(mode="after")
    def _unique_names(self) -> Policy:
        seen: set[str] = set()
        for rule in self.rule:
            if rule.name in seen:
                raise ValueError(f"name: two rules are named {rule.name!r}; each rule's name must be unique")
            seen.add(rule.name)
        return self

    @property
    def claims(self) -> tuple[str, ...]:
        """The claims approvers are judged by, each once (what a browser session keeps of the ID token)."""
        return tuple(dict.fromkeys(r.approvers.claim for r in self.rule if r.approvers is not None))

    @property
    def needs_identities(self) -> str | None:
        """The first rule that needs ``--auth oauth``, and why, in words; None when none does."""
        for rule in self.rule:
            if rule.needs_identities:
                why = "checks the caller's OAuth client" if rule.clients is not None else "needs another person"
                if rule.clients is None and rule.approvers is not None and rule.self_approval:
                    why = f"needs approvers holding the claim {rule.approvers.claim!r}"
                return f"policy rule {rule.name!r} {why}"
        return None


class PolicyError(ValueError):
    """The policy file is not valid; ``str()`` is one line naming the rule (by name or number) and the field."""


def parse_policy(data: Mapping[str, Any]) -> Policy:
    """Validate the parsed TOML; raises ``PolicyError`` naming the rule and field of the first problem."""
    try:
        return Policy.model_validate(data)
    except ValidationError as error:
        raise PolicyError(_explain(error, data)) from None


def _explain(error: ValidationError, data: Mapping[str, Any]) -> str:
    first = error.errors()[0]
    loc = list(first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    if len(loc) >= 2 and loc[0] == "rule" and isinstance(loc[1], int):
        index = loc[1]
        rules = data.get("rule")
        raw = rules[index] if isinstance(rules, list) and index < len(rules) else None
        name = raw.get("name") if isinstance(raw, dict) else None
        which = f"rule {name!r} (rule {index + 1})" if isinstance(name, str) and name else f"rule {index + 1}"
        field = ".".join(str(part) for part in loc[2:])
        if not field and ":" in message:
            field, _, message = message.partition(": ")
        if first["type"] == "extra_forbidden":
            message = "not a field of a rule (docs/policy.md lists them)"
        return f"{which}, field {field or '(the rule)'}: {message}"
    if first["type"] == "extra_forbidden":
        return f"field {'.'.join(str(p) for p in loc)}: not a policy setting; the file holds only [[rule]] tables"
    field, _, rest = message.partition(": ")
    return f"field {field}: {rest}" if rest else f"field {'.'.join(str(p) for p in loc) or 'rule'}: {message}"


# --- matching -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What a rule is matched and checked against: the planned card and its cluster's tags."""

    action: Action
    cluster_id: str
    cluster_name: str
    cluster_tags: tuple[str, ...]
    pool: str | None
    """The pool the change is about; None when not known (a node the inventory does not list yet)."""
    counts: tuple[tuple[str, int], ...]
    """The new values of ``count`` and ``max_nodes`` the change asks for."""
    size: str | None
    """The machine tier a new pool gets (add, change_tier); None for other actions."""
    client: str | None = None
    """The caller's OAuth client (``client_id`` / ``azp`` of their token); None without OAuth."""


def target_of(card: Card, cluster_tags: Iterable[str], client: str | None = None) -> Target:
    """The ``Target`` of a planned card."""
    counts: dict[str, int] = {}
    size: str | None = None
    new = card.body
    if card.action == "change_pool_tier":
        new = next((step.body for step in card.steps if step.kind == "add"), card.body)
    if card.action in ("add_node_pool", "change_pool_tier"):
        raw_size = new.get("size")
        size = raw_size if isinstance(raw_size, str) else None
        for name in ("count", "max_nodes"):
            value = new.get(name)
            if isinstance(value, int):
                counts[name] = value
    for change in card.diff:
        if change.field in ("count", "max_nodes") and isinstance(change.after, int):
            counts[change.field] = change.after
    pool: str | None = card.target
    if card.action == "replace_node":
        node = card.target_snapshot.get("node")
        found = node.get("pool") if isinstance(node, dict) else None
        pool = found if isinstance(found, str) else None
    return Target(
        action=card.action,
        cluster_id=card.cluster_id,
        cluster_name=card.cluster_name,
        cluster_tags=tuple(cluster_tags),
        pool=pool,
        counts=tuple(sorted(counts.items())),
        size=size,
        client=client,
    )


def _cluster_matches(patterns: Sequence[str], target: Target) -> bool:
    for pattern in patterns:
        if pattern == "*" or pattern in (target.cluster_name, target.cluster_id):
            return True
        if pattern.startswith("tag:") and pattern[4:] in target.cluster_tags:
            return True
    return False


def matches(rule: Rule, target: Target) -> bool:
    """Whether ``rule`` applies to ``target``: its clusters, pools and actions all match.

    A pool that is not known (``None``) matches every pool pattern: a rule is never skipped for want
    of knowing (fail closed)."""
    if not _cluster_matches(rule.clusters, target):
        return False
    if target.pool is not None and not any(fnmatchcase(target.pool, p) for p in rule.pools):
        return False
    return "*" in rule.actions or any(ACTION_OF[a] == target.action for a in rule.actions if a != "*")


def _refusal(rule: Rule, field: str, what: str, fix: str) -> PreflightError:
    return PreflightError(Violation(f"{POLICY_RULE} {rule.name!r}", NOT_A_BACKEND_REFUSAL, field, what, fix))


def check(policy: Policy, target: Target) -> CardPolicy | None:
    """Apply every matching rule to ``target``: raises ``PreflightError`` for a deny or a broken limit
    (naming the rule, the field and the limit); else the card's policy (None when no rule matched)."""
    applied: list[Rule] = [rule for rule in policy.rule if matches(rule, target)]
    for rule in applied:
        if rule.deny is not None:
            raise _refusal(
                rule,
                "action",
                f"the team's policy denies this change from chat: {rule.deny.rstrip('.')}",
                "Nothing was planned; follow the process the rule names, or ask the policy's owners.",
            )
    for rule in applied:
        if rule.clients is not None and target.client not in rule.clients:
            said = "no OAuth client" if target.client is None else f"the OAuth client {target.client!r}"
            raise _refusal(
                rule,
                "client",
                f"this change may be asked for only from the OAuth clients {', '.join(rule.clients)}, not from {said}",
                "Ask from one of those clients.",
            )
        if rule.max_count is not None:
            for field, value in target.counts:
                if value > rule.max_count:
                    raise _refusal(
                        rule,
                        field,
                        f"{field} {value} is above the policy's limit max_count = {rule.max_count}",
                        f"Ask for {field} {rule.max_count} or fewer.",
                    )
        if rule.sizes is not None and target.size is not None and target.size not in rule.sizes:
            raise _refusal(
                rule,
                "size",
                f"machine tier {target.size} is not allowed by the policy (sizes = {', '.join(rule.sizes)})",
                f"Choose one of {', '.join(rule.sizes)}.",
            )
    if not applied:
        return None
    requirements = tuple(
        Requirement(
            rule=rule.name,
            approvals=rule.approvals,
            claim=rule.approvers.claim if rule.approvers else None,
            any_of=rule.approvers.any_of if rule.approvers else (),
            self_approval=rule.self_approval,
        )
        for rule in applied
        if rule.approvals > 0
    )
    names = tuple(rule.name for rule in applied)
    return CardPolicy(rules=names, requirements=requirements, digest=policy_digest(names, requirements))


def policy_digest(rules: Sequence[str], requirements: Sequence[Requirement]) -> str:
    """The digest of a card's applied rules and requirements: another requirement, another card."""
    return sha256({"rules": list(rules), "requirements": [r.model_dump(mode="json") for r in requirements]})


def apply(policy: Policy | None, card: Card, cluster_tags: Iterable[str], client: str | None = None) -> Card:
    """``card`` with its ``policy`` set, or ``PreflightError`` (deny, limit): the planners' one call."""
    if policy is None or not policy.rule:
        return card
    decided = check(policy, target_of(card, cluster_tags, client))
    return card if decided is None else card.model_copy(update={"policy": decided})
