"""The Door DKS API contract (``models``, ``rules``) and its typed async client."""

from backend_client import models, rules
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
