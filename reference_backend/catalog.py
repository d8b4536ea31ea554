"""The machine-tier catalog (``GET /v1/public/machine-tiers``)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from backend_client.models import MachineTier, TierSpec


def _tier(tier_id: str, vcpu: int, memory_gib: float, disk_gib: int, price: float) -> MachineTier:
    return MachineTier(
        id=tier_id, vcpu=vcpu, memory_gib=memory_gib, spec=TierSpec(disk_gib=disk_gib), price_per_hour=price
    )


TIERS: Final = MappingProxyType(
    {
        t.id: t
        for t in (
            _tier("dks.c5.large", 2, 4, 40, 0.085),
            _tier("dks.c5.xlarge", 4, 8, 80, 0.17),
            _tier("dks.c5.2xlarge", 8, 16, 160, 0.34),
            _tier("dks.m5.large", 2, 8, 40, 0.096),
            _tier("dks.m5.xlarge", 4, 16, 80, 0.192),
            _tier("dks.r5.xlarge", 4, 32, 80, 0.252),
        )
    }
)
