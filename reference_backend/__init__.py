"""The Door DKS node-pool API, rule for rule, on a simulated clock (docs/reference-backend.md).

``reference_backend.running(seed="demo")`` starts one on a loopback port for the block it opens; it
is loaded on first use (PEP 562), so that importing the world's modules loads no uvicorn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reference_backend.testing.live import LiveDoor, running

__all__ = ["LiveDoor", "running"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from reference_backend.testing import live

        value = getattr(live, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'reference_backend' has no attribute {name!r}")
