"""The Door DKS API contract (``models``, ``rules``) and its typed async client.

The contract imports alone: ``import backend_client.models`` (or ``rules``) loads neither the client
nor httpx2, so the reference backend truly depends on the contract only. The client and the error
tree are loaded on first use of their names here (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from backend_client import models, rules

if TYPE_CHECKING:
    from backend_client.client import DoorClient
    from backend_client.errors import (
        BadRequest,
        Conflict,
        DoorConnectionError,
        DoorError,
        DoorResponseError,
        DoorStatusError,
        DoorTimeoutError,
        Forbidden,
        NotFound,
        OperationFailed,
        OperationNotFound,
        OperationTimeout,
        OutcomeUnknown,
        PaymentRequired,
        ServerError,
        ServiceUnavailable,
        Unauthorized,
        UnprocessableEntity,
    )

_LAZY = {"DoorClient": "backend_client.client"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name, "backend_client.errors" if name in __all__ else None)
    if module is None:
        raise AttributeError(f"module 'backend_client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "BadRequest",
    "Conflict",
    "DoorClient",
    "DoorConnectionError",
    "DoorError",
    "DoorResponseError",
    "DoorStatusError",
    "DoorTimeoutError",
    "Forbidden",
    "NotFound",
    "OperationFailed",
    "OperationNotFound",
    "OperationTimeout",
    "OutcomeUnknown",
    "PaymentRequired",
    "ServerError",
    "ServiceUnavailable",
    "Unauthorized",
    "UnprocessableEntity",
    "models",
    "rules",
]
