"""Fault rules of the admin plane: answer a route with an error, late, or after the change took effect.

A rule matches ``"METHOD /v1/public/..."`` (a FastAPI path template, as in docs/contracts.md) or
``"*"`` (every public route; the admin plane is never faulted, so a rule can always be removed).
``count`` limits how many requests it hits (null: until removed); ``probability`` fires it at random
from its own ``random.Random(seed)``, so a seeded run is reproducible. ``headers`` are field lines
added to the answer it hits, as a proxy in front of Door adds them (a second ``Date``, one without a
zone); with ``status`` null the answer is otherwise Door's own.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

# RFC 9110 §5.1 field names (tokens) and §5.5 values: visible ASCII, spaces and tabs, no CR or LF.
HeaderName = Annotated[str, StringConstraints(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")]
HeaderValue = Annotated[str, StringConstraints(pattern=r"^[\x20-\x7e\t]{0,1000}$")]
FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "content-type"})
"""Lines a rule may not add: a second one would make the answer unreadable rather than odd."""


class FaultSpec(BaseModel):
    """The body of ``POST /_reference/faults``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # strict: false is not 0 and 1.0 is not 1 (the public API refuses false too, and takes 1.0 as 1
    # only because its published JSON Schema says "integer", which admits 1.0).
    route: str = "*"
    status: int | None = Field(default=503, ge=100, le=599, strict=True, description="null: latency only")
    count: int | None = Field(default=1, ge=0, strict=True)
    probability: float | None = Field(default=None, ge=0, le=1, strict=True)
    seed: int = Field(default=0, strict=True)
    latency_ms: int = Field(default=0, ge=0, le=600_000, strict=True)
    when: Literal["before", "after"] = "before"
    retry_after: int | None = Field(default=None, ge=0, strict=True)
    headers: dict[HeaderName, HeaderValue] = Field(
        default_factory=dict,
        max_length=16,
        description="field lines added to the answer, after Door's own (which they never replace)",
    )

    @field_validator("headers")
    @classmethod
    def _not_framing(cls, headers: dict[str, str]) -> dict[str, str]:
        framing = sorted(name for name in headers if name.lower() in FRAMING_HEADERS)
        if framing:
            raise ValueError(
                f"{', '.join(framing)} cannot be added by a fault rule: it frames the answer; leave it out"
            )
        return headers


class FaultView(FaultSpec):
    id: str
    remaining: int | None


@dataclass
class Fault:
    id: str
    spec: FaultSpec
    remaining: int | None
    rng: random.Random
    method: str | None
    pattern: re.Pattern[str] | None

    def matches(self, method: str, path: str) -> bool:
        if self.pattern is None:
            return True
        return method == self.method and self.pattern.fullmatch(path) is not None

    def view(self) -> FaultView:
        return FaultView(id=self.id, remaining=self.remaining, **self.spec.model_dump())


class FaultRouteError(ValueError):
    """A fault route that is neither ``*`` nor ``METHOD /path/template``."""


def _compile(route: str) -> tuple[str | None, re.Pattern[str] | None]:
    if route.strip() == "*":
        return None, None
    method, _, template = route.strip().partition(" ")
    if not method or not template.startswith("/"):
        raise FaultRouteError(f"route must be '*' or 'METHOD /path/template', got {route!r}")
    parts = re.split(r"(\{[^/{}]+\})", template.strip())
    regex = "".join("[^/]+" if p.startswith("{") and p.endswith("}") else re.escape(p) for p in parts)
    return method.upper(), re.compile(regex)


class FaultBook:
    """The fault rules in force (in memory only: a restart clears them)."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._next_id = 0

    def add(self, spec: FaultSpec) -> Fault:
        method, pattern = _compile(spec.route)
        self._next_id += 1
        fault = Fault(f"fault-{self._next_id}", spec, spec.count, random.Random(spec.seed), method, pattern)
        self._faults.append(fault)
        return fault

    def all(self) -> list[Fault]:
        return list(self._faults)

    def clear(self) -> None:
        self._faults.clear()

    def pick(self, method: str, path: str) -> Fault | None:
        """The first rule that fires for this request, its count consumed; None when none does."""
        for fault in list(self._faults):
            if not fault.matches(method, path):
                continue
            if fault.remaining is not None and fault.remaining <= 0:
                continue
            if fault.spec.probability is not None and fault.rng.random() >= fault.spec.probability:
                continue
            if fault.remaining is not None:
                fault.remaining -= 1
                if fault.remaining == 0:
                    self._faults.remove(fault)
            return fault
        return None
