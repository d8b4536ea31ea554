"""Everything the Door client raises, one tree rooted at ``DoorError``::

    DoorError
    ├── DoorConnectionError          Door could not be reached, or the connection broke
    │   └── DoorTimeoutError         … or did not answer in time
    ├── DoorStatusError              Door answered with an error status (problem+json body)
    │   ├── BadRequest               400  unknown machine tier, bad node name, malformed JSON
    │   ├── Unauthorized             401  no or unknown token
    │   ├── PaymentRequired          402  prepaid credit cannot cover the change
    │   ├── Forbidden                403  not a member (reads) or not super_admin (mutations)
    │   ├── NotFound                 404  cluster, pool or node-pool gone
    │   ├── Conflict                 409  not Provisioned, last pool, name clash, operation in flight
    │   ├── UnprocessableEntity      422  empty patch, invalid fields or bounds (see ``problem.errors``)
    │   ├── ServiceUnavailable       503  node inventory temporarily unavailable (see ``retry_after``)
    │   └── ServerError              any other 5xx
    ├── DoorResponseError            a 2xx answer whose body is not the documented shape
    ├── OutcomeUnknown               a mutation without idempotency key failed ambiguously and
    │                                reading the cluster could not tell whether it took effect
    ├── OperationFailed              ``wait_for_operation``: the operation finished as failed
    ├── OperationTimeout             ``wait_for_operation``: it was still running at the deadline
    └── OperationNotFound            ``wait_for_operation``: no operation matched

Status errors are made in one place, ``make_status_error()``. Each carries the parsed
``application/problem+json`` body (``models.Problem``), the rule id that refused the request, the
request id (``X-Request-Id`` header, else the body's ``request_id``) and ``Retry-After`` in seconds
(read by ``_http_dates``: every RFC 9110 form, and None rather than an error for anything else).
``str(error)`` is a sentence a person can act on; no message or repr ever holds the token.
"""

from __future__ import annotations

import json
import re
from typing import Literal

import httpx2
from pydantic import ValidationError

from backend_client._constants import KEY_IN_FLIGHT_RULES, REQUEST_ID_HEADER
from backend_client._http_dates import parse_retry_after
from backend_client.models import Operation, Problem
from backend_client.rules import FIXES

__all__ = [
    "BadRequest",
    "Conflict",
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
    "make_status_error",
    "parse_retry_after",
]


class DoorError(Exception):
    """Base of every error the Door client raises."""

    # Set by the client on the error a call finally raises: True when an earlier attempt of the same
    # call may have reached Door (it was sent and no clear answer came back), so this error alone
    # does not prove that nothing changed.
    reached_before: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


# --- transport -----------------------------------------------------------------------------------


class DoorConnectionError(DoorError):
    """Door could not be reached or the connection broke before a complete answer.

    ``request_sent`` is False when the request never left (connect failed, pool exhausted), so
    nothing can have changed; True when Door may have received and processed it.
    """

    def __init__(self, method: str, url: str, *, request_sent: bool, reason: str) -> None:
        self.method = method
        self.url = url
        self.request_sent = request_sent
        if request_sent:
            outcome = "Door may have received the request"
        else:
            outcome = "the request was not sent, so nothing changed"
        super().__init__(f"{self._what()} {method} {url}: {reason}; {outcome}. Check the network and try again.")

    def _what(self) -> str:
        return "Could not reach Door for"


class DoorTimeoutError(DoorConnectionError):
    """Door did not answer within the client's timeout."""

    def _what(self) -> str:
        return "Door did not answer in time for"


# --- status --------------------------------------------------------------------------------------

# What a caller can do about a refusal comes from ``rules.FIXES`` by rule id; the class hint below is
# used when Door names no rule or one not listed there.
# R-ADD-09/R-PATCH-09 answered 409, not 422: the key is right, its first request is not finished.
_KEY_IN_FLIGHT_ADVICE = (
    "The first request with this idempotency key is still being handled; send the same request with the "
    "same key again shortly to get its answer. A new key would apply the change twice."
)


class DoorStatusError(DoorError):
    """Door answered with an error status; ``problem`` is its problem+json body."""

    status_code: int
    hint = "Check the request against the Door API documentation."

    def __init__(
        self,
        *,
        status_code: int,
        problem: Problem,
        method: str,
        url: str,
        request_id: str | None = None,
        retry_after: float | None = None,
        sentence: str | None = None,
    ) -> None:
        """``sentence`` replaces the message built from Door's answer: for an error the client itself
        concludes (``resolve_cluster`` finding no match), where "Door refused …" would not be true."""
        self.status_code = status_code
        self.problem = problem
        self.rule = problem.rule
        self.method = method
        self.url = url
        self.request_id = request_id if request_id is not None else problem.request_id
        self.retry_after = retry_after
        super().__init__(sentence if sentence is not None else self._sentence())

    @property
    def field_errors(self) -> dict[str, str]:
        """The fields Door named (422), each with its message."""
        return {error.field: error.message for error in self.problem.errors}

    def advice(self) -> str:
        """What to do about it: the rule's advice when Door named a rule, else the class's."""
        if self.status_code == 409 and self.rule in KEY_IN_FLIGHT_RULES:
            return _KEY_IN_FLIGHT_ADVICE
        rules = [self.rule, *(error.rule for error in self.problem.errors)]
        for rule in rules:
            if rule is not None and rule in FIXES:
                return FIXES[rule]
        return self.hint

    def _sentence(self) -> str:
        problem = self.problem
        rule = f" ({self.rule})" if self.rule else ""
        detail = (problem.detail or "").strip()
        # Door's detail may already be the rule's own explanation, "R-ADD-03 (size): what. Fix.":
        # then it says what to do, and only the rule prefix is redundant.
        explained = False
        if self.rule:
            prefix = re.match(rf"{re.escape(self.rule)}(?:\s*\((?P<field>[^)]*)\))?:\s*", detail)
            if prefix:
                explained = True
                field = prefix.group("field")
                detail = (f"{field}: " if field else "") + detail[prefix.end() :]
        head = f"Door refused {self.method} {self.url} with {self.status_code} {problem.title}{rule}"
        if detail and detail != problem.title:
            head += f": {detail.rstrip('.')}"
        parts = [head + "."]
        fields = [e for e in problem.errors if e.field != "body" and e.message.rstrip(".") not in detail]
        if fields:
            listed = "; ".join(
                f"{e.field}: {e.message.rstrip('.')}" + (f" ({e.rule})" if e.rule and e.rule != self.rule else "")
                for e in fields
            )
            parts.append(f"Field errors: {listed}.")
        if not explained:
            parts.append(self.advice())
        if self.retry_after is not None and "retry after" not in detail.lower():
            parts.append(f"Retry after {self.retry_after:g} s.")
        if self.request_id:
            parts.append(f"(request id {self.request_id})")
        return " ".join(parts)


class BadRequest(DoorStatusError):
    status_code: Literal[400] = 400
    hint = "Fix the request: check the machine tier (list_machine_tiers) or the node name."


class Unauthorized(DoorStatusError):
    status_code: Literal[401] = 401
    hint = FIXES["R-AUTH-01"]


class PaymentRequired(DoorStatusError):
    status_code: Literal[402] = 402
    hint = FIXES["R-CREDIT-01"]


class Forbidden(DoorStatusError):
    status_code: Literal[403] = 403
    hint = "Your token may not do this: reads need membership, changes need super_admin."


class NotFound(DoorStatusError):
    status_code: Literal[404] = 404
    hint = "Check the cluster id or name and the pool name; the cluster or pool may be gone."


class Conflict(DoorStatusError):
    status_code: Literal[409] = 409
    hint = "The cluster is not ready for this change now (phase, running operation, last pool or name clash)."


class UnprocessableEntity(DoorStatusError):
    status_code: Literal[422] = 422
    hint = "Fix the fields named above and send the request again."


class ServiceUnavailable(DoorStatusError):
    status_code: Literal[503] = 503
    hint = "Door is temporarily unavailable; try again shortly."


class ServerError(DoorStatusError):
    hint = "Door failed on its side; try again later, and quote the request id if it persists."


_STATUS_CLASSES: dict[int, type[DoorStatusError]] = {
    400: BadRequest,
    401: Unauthorized,
    402: PaymentRequired,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: UnprocessableEntity,
    503: ServiceUnavailable,
}


def status_error_class(status_code: int) -> type[DoorStatusError]:
    """The class ``make_status_error`` raises for a status."""
    if status_code in _STATUS_CLASSES:
        return _STATUS_CLASSES[status_code]
    if status_code >= 500:
        return ServerError
    return DoorStatusError


def _problem_from(response: httpx2.Response, redact: tuple[str, ...]) -> Problem:
    text = response.text
    for secret in redact:
        if secret:
            text = text.replace(secret, "[redacted]")
    try:
        data = json.loads(text) if text else None
    except ValueError:
        data = None
    if isinstance(data, dict):
        data.setdefault("status", response.status_code)
        data.setdefault("title", response.reason_phrase or f"HTTP {response.status_code}")
        try:
            return Problem.model_validate(data)
        except ValidationError:
            pass
    detail = text.strip()[:300] or None
    return Problem(
        title=response.reason_phrase or f"HTTP {response.status_code}", status=response.status_code, detail=detail
    )


def make_status_error(response: httpx2.Response, *, redact: tuple[str, ...] = ()) -> DoorStatusError:
    """The error for a non-2xx answer; every string in ``redact`` (the token) is cut from its texts."""
    problem = _problem_from(response, redact)
    cls = status_error_class(response.status_code)
    request = response.request
    return cls(
        status_code=response.status_code,
        problem=problem,
        method=request.method,
        url=str(request.url.copy_with(query=None)),
        request_id=response.headers.get(REQUEST_ID_HEADER),
        retry_after=parse_retry_after(response.headers),
    )


# --- other ---------------------------------------------------------------------------------------


class DoorResponseError(DoorError):
    """A success answer whose body does not match the documented model."""


class OutcomeUnknown(DoorError):
    """A mutation without an idempotency key failed ambiguously and the outcome could not be read back.

    ``cause`` is the failure (connection error, timeout or 5xx). Whether the change happened is
    unknown: read the cluster before trying again, or send the retry with an idempotency key.
    """

    def __init__(self, message: str, *, cause: DoorError) -> None:
        super().__init__(message)
        self.cause = cause


class OperationFailed(DoorError):
    """The operation being waited for finished with status ``failed``."""

    def __init__(self, operation: Operation) -> None:
        self.operation = operation
        reason = operation.error or operation.message or "no reason given"
        super().__init__(
            f"Operation {operation.id} ({operation.kind} on {operation.target}) failed: {reason}. "
            "Read the cluster state and the node list to see what is left, then decide whether to try again."
        )


class OperationTimeout(DoorError, TimeoutError):
    """The operation being waited for was still running when the wait ended."""

    def __init__(self, operation: Operation, timeout: float) -> None:
        self.operation = operation
        self.timeout = timeout
        super().__init__(
            f"Operation {operation.id} ({operation.kind} on {operation.target}) was still {operation.status} "
            f"after {timeout:g} s. It continues on Door's side; wait again or follow it with get_cluster_state."
        )


class OperationNotFound(DoorError, LookupError):
    """No operation in the cluster state matched what ``wait_for_operation`` was asked to follow."""


def cluster_not_found(base_url: str, name_or_id: str) -> NotFound:
    """The client's own conclusion that no cluster has this id or name (R-AUTH-04).

    Door answered both reads (404 for the id, an empty list for the name): the 404 is the client's
    conclusion, so its message must not say Door refused GET /clusters.
    """
    detail = f"no cluster of yours has the id or name {name_or_id!r}"
    return NotFound(
        status_code=404,
        problem=Problem(
            type="https://door.test/problems/R-AUTH-04",
            title="Not Found",
            status=404,
            detail=detail,
            rule="R-AUTH-04",
        ),
        method="GET",
        url=f"{base_url}/clusters",
        sentence=f"No cluster of yours has the id or name {name_or_id!r} (R-AUTH-04): Door has no cluster "
        "of yours with that id, and none of your clusters has that name. Check the cluster id or name "
        "(list_clusters shows yours); it may have been torn down.",
    )
