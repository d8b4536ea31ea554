"""Maya's system prompt, the server's instructions and the MCP prompts, as jinja2 templates.

Every template in ``templates/`` is loaded through the one ``Environment`` of ``environment()``
(``StrictUndefined``: a missing value fails instead of rendering as nothing). Templates whose name
starts with ``_`` are partials, included by the others and never rendered alone.

Values that a person or Door supplies (cluster, pool and node names, a tier, the backend's
description) pass the ``arg`` filter before they reach a prompt: one line, no control or format
characters, no backticks, capped in length, so a value stays data inside its code span.

This package imports nothing of ours; ``maya_tools.prompts`` registers ``MCP_PROMPTS`` on the server.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jinja2 import Environment

__all__ = [
    "MCP_PROMPTS",
    "ArgumentSpec",
    "PromptArgumentError",
    "PromptSpec",
    "environment",
    "mcp_prompt",
    "render",
    "render_mcp_prompt",
    "system_prompt",
]

ARG_LIMIT = 128
DESCRIPTION_LIMIT = 200
# Cc: control (newlines, escapes), Cf: format (bidi overrides, zero-width), Zl/Zp: line separators.
_STRIP = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs"})


def arg(value: object, limit: int = ARG_LIMIT) -> str:
    """A supplied value as one inert line for a code span: invisible characters and backticks go,
    whitespace collapses, and at most ``limit`` characters remain (the last one "…" when cut)."""
    text = "".join(" " if unicodedata.category(ch) in _STRIP else ch for ch in str(value))
    text = " ".join(text.replace("`", "'").split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


@functools.cache
def environment() -> Environment:
    """The one Environment every prompt template is loaded through (jinja2 is imported here, when
    the first template with markup is rendered)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("prompts", "templates"),
        undefined=StrictUndefined,
        autoescape=False,  # plain text and Markdown for a model, never HTML
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["arg"] = arg
    return env


def render(template: str, /, **values: object) -> str:
    """Render ``template`` (for example ``"system.md.j2"``) with ``values``.

    Raises ``jinja2.TemplateNotFound`` for an unknown template and ``jinja2.UndefinedError`` when a
    value the template uses is missing.
    """
    text = plain(template)
    if text is not None:
        return text
    return environment().get_template(template).render(**values)


_MARKUP = ("{{", "{%", "{#", "\r")


@functools.cache
def plain(template: str) -> str | None:
    """The text of ``template`` when it has no jinja2 markup at all (what jinja2 would render from it,
    unchanged), else None. The server's instructions are such a file: every start sends them at
    ``initialize``, and this way a start does not import jinja2 for them."""
    if template.startswith("_") or "/" in template:
        return None
    source = resources.files("prompts").joinpath("templates", template)
    if not source.is_file():
        return None  # jinja2 raises TemplateNotFound
    text = source.read_text(encoding="utf-8")
    return None if any(mark in text for mark in _MARKUP) else text


def system_prompt(*, backend_description: str, user: str | None = None) -> str:
    """Maya's system prompt.

    ``backend_description`` says where the clusters live (for example "Door at https://…" or
    "embedded reference backend (demo seed; nothing here reaches Door)"); ``user`` names the person
    Maya works for, when known.
    """
    return render("system.md.j2", backend_description=backend_description, user=user)


@dataclass(frozen=True, kw_only=True)
class ArgumentSpec:
    """One argument of an MCP prompt. MCP sends every argument as a string; ``integer`` ones are
    parsed and checked against ``minimum``/``maximum``. An argument with a ``default`` is optional."""

    name: str
    description: str
    integer: bool = False
    minimum: int | None = None
    maximum: int | None = None
    limit: int = ARG_LIMIT
    default: str | None = None

    @property
    def required(self) -> bool:
        return self.default is None

    def parse(self, raw: str) -> str | int:
        if not self.integer:
            value = arg(raw, self.limit)
            if not value:
                raise PromptArgumentError(f"`{self.name}` is empty.")
            return value
        try:
            number = int(raw.strip())
        except ValueError:
            raise PromptArgumentError(f"`{self.name}` must be a whole number, not {arg(raw, 32)!r}.") from None
        if (self.minimum is not None and number < self.minimum) or (self.maximum is not None and number > self.maximum):
            raise PromptArgumentError(f"`{self.name}` must be between {self.minimum} and {self.maximum}, not {number}.")
        return number


@dataclass(frozen=True, kw_only=True)
class PromptSpec:
    """An MCP prompt: what ``prompts/list`` shows and the template ``prompts/get`` renders."""

    name: str
    title: str
    description: str
    template: str
    arguments: tuple[ArgumentSpec, ...]


class PromptArgumentError(ValueError):
    """An MCP prompt argument is missing, unknown, empty or out of range."""


_CLUSTER = ArgumentSpec(name="cluster", description="The cluster's name (for example `payments-prod`) or its id.")
_POOL = ArgumentSpec(name="pool", description="The node pool's name, for example `workers`.")
_SIZE_LIMIT = 64

MCP_PROMPTS: tuple[PromptSpec, ...] = (
    PromptSpec(
        name="scale_pool",
        title="Scale a node pool",
        description="Scale a node pool to a fixed number of workers, reading it first and asking the person to approve the card.",
        template="scale_pool.md.j2",
        arguments=(
            _CLUSTER,
            _POOL,
            ArgumentSpec(
                name="count",
                description="The number of workers the pool should have, 0–200 (0 only with autoscaling).",
                integer=True,
                minimum=0,
                maximum=200,
            ),
        ),
    ),
    PromptSpec(
        name="add_pool",
        title="Add a node pool",
        description="Add a node pool of one machine tier, checking the tier and the name first; the person approves the card.",
        template="add_pool.md.j2",
        arguments=(
            _CLUSTER,
            ArgumentSpec(
                name="name",
                description="The new pool's name: a DNS label (lowercase letters, digits, '-'), unique in the cluster.",
                limit=63,
            ),
            ArgumentSpec(
                name="size",
                description="The machine tier id, for example `dks.m5.xlarge` (see list_machine_tiers).",
                limit=_SIZE_LIMIT,
            ),
            ArgumentSpec(
                name="count",
                description="How many workers, 1–200 (default 1).",
                integer=True,
                minimum=1,
                maximum=200,
                default="1",
            ),
        ),
    ),
    PromptSpec(
        name="replace_node",
        title="Replace one worker node",
        description="Recycle one bad worker: Door replaces it and the pool keeps its count. Not a way to scale down.",
        template="replace_node.md.j2",
        arguments=(
            _CLUSTER,
            ArgumentSpec(
                name="node_name",
                description="The worker's name as `kubectl get nodes` or list_nodes shows it.",
                limit=253,
            ),
        ),
    ),
    PromptSpec(
        name="change_pool_tier",
        title="Move a node pool to another machine tier",
        description=(
            "Change a pool's machine tier the only safe way (R-PATCH-10): add a new pool of the new tier, "
            "wait until it is up, then remove the old pool. Each step is its own card."
        ),
        template="change_pool_tier.md.j2",
        arguments=(
            _CLUSTER,
            _POOL,
            ArgumentSpec(
                name="new_size",
                description="The machine tier to move to, for example `dks.c5.2xlarge` (see list_machine_tiers).",
                limit=_SIZE_LIMIT,
            ),
        ),
    ),
    PromptSpec(
        name="explain_capacity",
        title="Explain a cluster's capacity",
        description="Explain a cluster's planned capacity pool by pool (R-CAP-01..03). Changes nothing.",
        template="explain_capacity.md.j2",
        arguments=(_CLUSTER,),
    ),
)


def mcp_prompt(name: str) -> PromptSpec:
    """The MCP prompt called ``name``; ``KeyError`` if there is none."""
    for spec in MCP_PROMPTS:
        if spec.name == name:
            return spec
    raise KeyError(name)


def render_mcp_prompt(name: str, arguments: Mapping[str, str] | None = None) -> str:
    """The text of MCP prompt ``name`` for the (string) ``arguments`` a client sent.

    Raises ``KeyError`` for an unknown prompt and ``PromptArgumentError`` for a missing, unknown,
    empty or out-of-range argument.
    """
    spec = mcp_prompt(name)
    given = dict(arguments or {})
    unknown = sorted(set(given) - {a.name for a in spec.arguments})
    if unknown:
        raise PromptArgumentError(f"`{name}` takes no argument {', '.join(unknown)}.")
    values: dict[str, str | int] = {}
    for argument in spec.arguments:
        raw = given.get(argument.name, argument.default)
        if raw is None:
            raise PromptArgumentError(f"`{name}` needs `{argument.name}`: {argument.description}")
        values[argument.name] = argument.parse(raw)
    return render(spec.template, **values)
