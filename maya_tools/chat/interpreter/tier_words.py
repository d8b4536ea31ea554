"""A tier said by what it changes for a pool: "more memory for batch, same cpu", "the memory
optimised ones (r5)", "move batch to that one" after a question about tiers (issue 22)."""

from __future__ import annotations

import re

from maya_tools.chat.interpreter.names import TierInfo, World

_MEMORY = r"(?:memory|ram|mem)"
_CPU = r"(?:cpus?|vcpus?|cores?|compute)"
FAMILY = r"(?<![\w.])[cmr]\d(?![\w.])"
RELATIVE_SPEC = re.compile(
    rf"\b(?:more|less|fewer)\s+(?:{_MEMORY}|{_CPU})\b|\b(?:{_MEMORY}|{_CPU})[\s-]+(?:heavy|optimi[sz]ed)\b"
)
KEEP_NAME = re.compile(
    r"\b(?:keep(?:ing)?|same|old|retain(?:ing)?)\s+(?:the\s+|its\s+)?(?:old\s+|same\s+)?(?:pool\s+)?name\b"
    r"|\bkeep\s+(?:calling\s+it|it\s+(?:called|named))\b|\b(?:stay|remain)s?\s+(?:called|named)\b"
    r"|\bstill\s+(?:be\s+)?(?:called|named)\b|\b(?:want|need)\s+it\s+to\s+(?:be|stay)\s+(?:called|named)\b"
)


def tier_for_pool(text: str, world: World, now: str | None) -> str | None:
    """The one catalog tier the words single out relative to the pool's tier ``now``, or by family
    ("r5" when the catalog has one r5 tier); None when it is not one tier (the caller asks which)."""
    tiers = dict(world.tiers)
    if not tiers:
        return None
    if now in tiers:
        here = tiers[now]
        wanted = {t: i for t, i in tiers.items() if t != now and _fits(text, i, here)}
        if wanted != {t: i for t, i in tiers.items() if t != now}:  # the words narrowed something
            return _cheapest(wanted) if len(wanted) == 1 or re.search(r"\b(?:cheapest|least)\b", text) else None
    families = set(re.findall(f"({FAMILY})", text))
    if len(families) == 1:
        family = families.pop()
        found = [t for t in tiers if t.split(".")[-2:-1] == [family] and t != now]
        return found[0] if len(found) == 1 else None
    return None


def _fits(text: str, tier: TierInfo, here: TierInfo) -> bool:
    memory, vcpu = tier.memory_gib or 0, tier.vcpu or 0
    had_memory, had_vcpu = here.memory_gib or 0, here.vcpu or 0
    checks = [
        (rf"\bmore\s+{_MEMORY}|\b{_MEMORY}[\s-]+(?:heavy|optimi[sz]ed)", memory > had_memory),
        (rf"\bless\s+{_MEMORY}", memory < had_memory),
        (rf"\bsame\s+{_MEMORY}|\b{_MEMORY}\s+(?:stays|the\s+same)", memory == had_memory),
        (rf"\bmore\s+{_CPU}|\b{_CPU}[\s-]+(?:heavy|optimi[sz]ed)", vcpu > had_vcpu),
        (rf"\bless\s+{_CPU}|\bfewer\s+{_CPU}", vcpu < had_vcpu),
        (rf"\bsame\s+{_CPU}|\b{_CPU}\s+(?:stays|the\s+same)", vcpu == had_vcpu),
    ]
    return all(ok for pattern, ok in checks if re.search(pattern, text))


def _cheapest(tiers: dict[str, TierInfo]) -> str | None:
    return min(tiers, key=lambda t: tiers[t].price_per_hour or 0) if tiers else None
