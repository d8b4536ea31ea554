"""Turning a response body into a contract model, or into a ``DoorResponseError`` that says so."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import httpx2
from pydantic import BaseModel, ValidationError

from backend_client.errors import DoorResponseError

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def parse(response: httpx2.Response, model: type[M]) -> M:
    """The body as ``model``; ``DoorResponseError`` when it is not one."""
    return parse_with(response, model.__name__, model.model_validate_json)


def parse_with(response: httpx2.Response, what: str, read: Callable[[bytes], T]) -> T:
    """The body read by ``read`` (which raises ``ValueError`` on a body it cannot read)."""
    try:
        return read(response.content)
    except ValueError as exc:
        request = response.request
        if isinstance(exc, ValidationError):
            problem = f"{exc.error_count()} problem(s), first: {exc.errors()[0]['msg']}"
        else:
            problem = str(exc)
        raise DoorResponseError(
            f"Door answered {request.method} {request.url.copy_with(query=None)} with {response.status_code}, "
            f"but the body is not a {what} ({problem}). The API may have changed; upgrade the client."
        ) from exc
