"""A number's unit (issue 26): a number said with a unit that does not count nodes is never a count.

"16 GiB per node", "8 vCPU", "4 cores", "$5", "5 dollars", "3 per hour", "50%", "200 ms" and
"10 minutes" are amounts of memory, compute, money, a share or time. ``mark`` glues each to its
unit as one token that starts with "_" ("16 gib" → "_16gib", "$5" → "_5usd", "50%" → "_50pct"),
so none of the reader's count, delta or bound patterns (which want a number standing alone)
can take it, while ``amounts`` still reads the value for what it means: memory and compute name
machine tiers (``quantities.tier_by_spec``), a share is a relative change ("by 50%").
A number followed by a node word ("4 nodes", "2 more workers") is left as it is: that is a count.
"""

from __future__ import annotations

import re
from typing import Literal

from maya_tools.chat.interpreter.names import World

Unit = Literal[
    "gib", "mib", "tib", "vcpu", "ghz", "usd", "eur", "gbp", "pct", "ms", "sec", "min", "hour", "day", "rate"
]

# Each unit as people write it, longest spelling first; the canonical name is what the token carries.
_SPELLINGS: tuple[tuple[Unit, str], ...] = (
    ("gib", r"gigabytes?|gibibytes?|gib|gb|gigs?|gig"),
    ("mib", r"megabytes?|mebibytes?|mib|mb"),
    ("tib", r"terabytes?|tebibytes?|tib|tb"),
    ("vcpu", r"vcpus?|vcores?|cpus?|cores?|processors?"),
    ("ghz", r"ghz|mhz"),
    ("usd", r"dollars?|bucks|usd|\$"),
    ("eur", r"euros?|eur|€"),
    ("gbp", r"pounds?|gbp|£"),
    ("pct", r"%|percent|per\s+cent|pct"),
    ("ms", r"milliseconds?|msecs?|ms"),
    ("sec", r"seconds?|secs?"),
    ("min", r"minutes?|mins"),  # never "min" alone: "1 min 4 max" is a floor
    ("hour", r"hours?|hrs?"),
    ("day", r"days?|weeks?|months?"),
    ("rate", r"per\s+(?:hour|hr|h|month|day)|an\s+hour|a\s+month|a\s+day|/\s?(?:h|hr|hour|mo|month|day)"),
)
_ANY = "|".join(s for _, s in _SPELLINGS)
_NUMBER = r"\d+(?:[.,]\d+)?"
# A unit glued to its number with no space ("16g", "5s", "24h") may be one letter.
_GLUED = r"g|s|h"
# "5 more cores", "2 extra gb": the unit after a relative word still belongs to the number
_RELATIVE = r"(?:more|extra|additional|fewer|less)"
_AFTER = re.compile(
    rf"(?<![\w.,_$€£])({_NUMBER})(?:\s*({_ANY})(?![\w])|({_GLUED})\b|\s+({_RELATIVE})\s+({_ANY})(?![\w]))",
    re.IGNORECASE,
)
_BEFORE = re.compile(rf"([$€£]|\b(?:usd|eur|gbp))\s?({_NUMBER})(?:\s*(k)\b)?", re.IGNORECASE)
AMOUNT = re.compile(rf"(?<![\w.])_({_NUMBER})({'|'.join(u for u, _ in _SPELLINGS)})(?![a-z])")


def _unit(spelling: str) -> Unit:
    word = " ".join(spelling.lower().split()).replace("/ ", "/")
    for unit, spellings in _SPELLINGS:
        if re.fullmatch(spellings, word, re.IGNORECASE):
            return unit
    glued: dict[str, Unit] = {"g": "gib", "s": "sec"}
    return glued.get(word, "hour")  # glued: "16g", "30s", "24h"


def mark(text: str) -> str:
    """``text`` with every number said with a non-count unit glued to that unit ("_16gib")."""
    text = _BEFORE.sub(lambda m: f" _{m[2].replace(',', '.')}{_unit(m[1])} ", text)
    return _AFTER.sub(_glue, text)


def _glue(m: re.Match[str]) -> str:
    number = m[1].replace(",", ".")
    if m[4]:  # "5 more cores": the amount, then the words that say it is more of it
        return f"_{number}{_unit(m[5])} {m[4]} {m[5]}"
    return f"_{number}{_unit(m[2] or m[3])}"


def amounts(text: str, unit: Unit) -> list[float]:
    """The values ``text`` (already ``mark``ed) gives in ``unit``."""
    return [float(v) for v, u in AMOUNT.findall(text) if u == unit]


def has_amount(text: str, *units: Unit) -> bool:
    return any(u in units for _, u in AMOUNT.findall(text)) if units else bool(AMOUNT.search(text))


def spec_tiers(text: str, world: World) -> tuple[str, ...] | None:
    """The catalog tiers with every memory and vCPU amount ``text`` gives per node (None: it gives none)."""
    memory, vcpu = amounts(text, "gib"), amounts(text, "vcpu")
    if not (memory or vcpu):
        return None
    return tuple(
        t for t, i in world.tiers.items() if all(i.memory_gib == m for m in memory) and all(i.vcpu == v for v in vcpu)
    )


def said_amounts(text: str) -> str:
    """The memory and compute amounts ``text`` gives, as a person reads them ("16 GiB and 4 vCPU")."""
    parts = [f"{_whole(v)} GiB" for v in amounts(text, "gib")] + [f"{_whole(v)} vCPU" for v in amounts(text, "vcpu")]
    return " and ".join(parts)


_SHOWN: dict[str, str] = {
    "gib": "GiB",
    "mib": "MiB",
    "tib": "TiB",
    "vcpu": "vCPU",
    "ghz": "GHz",
    "usd": "dollars",
    "eur": "euros",
    "gbp": "pounds",
    "pct": "%",
    "ms": "ms",
    "sec": "seconds",
    "min": "minutes",
    "hour": "hours",
    "day": "days",
    "rate": "per hour",
}


def unit_of(text: str, value: int) -> str | None:
    """How ``text`` (``mark``ed) gives ``value`` with a unit ("16 GiB"), or None when it never does."""
    for number, unit in AMOUNT.findall(text):
        if float(number) == value:
            return f"{_whole(float(number))} {_SHOWN[unit]}"
    return None


def _whole(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)
