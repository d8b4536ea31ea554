"""Settling a mutation that failed ambiguously by reading the cluster back (no idempotency key)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from backend_client.errors import DoorError, DoorStatusError, OutcomeUnknown

log = logging.getLogger("backend_client")

R = TypeVar("R")


async def settle(what: str, error: DoorError, read_back: Callable[[], Awaitable[R | None]]) -> R:
    """An ambiguous failure of the mutation ``what`` settled by ``read_back``: its result when Door's
    state shows the change, else the error (Door answered) or ``OutcomeUnknown`` (it may still apply)."""
    log.info("%s failed ambiguously (%s); reading the cluster back", what, type(error).__name__)
    try:
        result = await read_back()
    except DoorError as read_error:
        raise OutcomeUnknown(
            f"{what} failed ({error}) and reading the cluster back failed too ({read_error}). "
            "It is unknown whether the change happened: read the cluster before trying again, "
            "or retry with an idempotency key.",
            cause=error,
        ) from error
    if result is not None:
        log.info("%s took effect despite the failed answer", what)
        return result
    if isinstance(error, DoorStatusError):
        # Door finished with the request and answered; the state shows no change.
        error.message += " Reading the cluster back shows the change was not applied; it is safe to try again."
        error.args = (error.message,)
        raise error
    raise OutcomeUnknown(
        f"{what} failed ({error}). The cluster does not show the change yet, but Door may still be "
        "processing it, so it is unknown whether it happened: read the cluster again before retrying, "
        "or retry with an idempotency key.",
        cause=error,
    ) from error
