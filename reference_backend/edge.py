"""The HTTP edge: request ids, fault rules, the request log, and every refusal as problem+json.

Nothing here knows a route. ``RequestMiddleware`` and the error handlers find the world through
``scope["app"].state.backend``, so an app built once can serve whichever backend it is pointed at.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Final

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend_client import models
from backend_client.models import FieldError
from reference_backend.backend import ReferenceBackend
from reference_backend.bodies import bearer
from reference_backend.errors import FaultInjected, Refusal, title_for
from reference_backend.faults import Fault

log = logging.getLogger(__name__)

PREFIX: Final = "/v1/public"
PROBLEM_MEDIA_TYPE: Final = "application/problem+json"


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {
        status: {
            "model": models.Problem,
            "description": title_for(status),
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }


def backend_of(app: Any) -> ReferenceBackend:
    """The world an app serves now (``app.state.backend``; tests may point one app at a fresh world)."""
    backend = app.state.backend
    assert isinstance(backend, ReferenceBackend)
    return backend


# --- problem bodies ------------------------------------------------------------------------------


def problem_response(refusal: Refusal, request_id: str | None) -> JSONResponse:
    """The problem+json answer to a refusal (RFC 9457), repeating the request id."""
    problem = models.Problem(
        type=refusal.type,
        title=refusal.title or title_for(refusal.status),
        status=refusal.status,
        detail=refusal.detail,
        rule=refusal.rule,
        errors=list(refusal.errors),
        request_id=request_id,
    )
    headers = dict(refusal.headers)
    if request_id:
        headers["X-Request-Id"] = request_id
    return JSONResponse(
        problem.model_dump(mode="json"), status_code=refusal.status, headers=headers, media_type=PROBLEM_MEDIA_TYPE
    )


def request_id_of(request: Request) -> str | None:
    value = request.scope.get("state", {}).get("request_id")
    return value if isinstance(value, str) else None


def _fault_refusal(fault: Fault) -> Refusal:
    status = fault.spec.status or 503
    headers = {"Retry-After": str(fault.spec.retry_after)} if fault.spec.retry_after is not None else {}
    return FaultInjected(
        status, f"an injected fault ({fault.id}) answered this request.", headers=headers, title="Injected fault"
    )


# --- middleware: request id and fault rules ------------------------------------------------------


# --- middleware: request id and fault rules ------------------------------------------------------


class RequestMiddleware:
    """Gives every request an id, applies fault rules (step 1 and step 14), never leaks a traceback,
    and records every answer outside the admin plane in the backend's request log."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        backend = backend_of(scope["app"])
        request_id = uuid.uuid4().hex
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        path: str = scope["path"]
        if not path.startswith("/_reference"):
            send = _logged(send, backend, scope)
        if scope["method"] == "HEAD":
            # HEAD is GET without the body (RFC 9110 §9.3.2): same status, headers and length.
            scope = {**scope, "method": "GET"}
            send = _without_body(send)
        fault = None if path.startswith("/_reference") else backend.faults.pick(scope["method"], path)
        state["fault"] = fault
        if fault is not None and fault.spec.headers:
            send = _with_lines(send, fault.spec.headers)
        if fault is not None and fault.spec.status is not None and fault.spec.when == "before":
            if fault.spec.latency_ms:
                await anyio.sleep(fault.spec.latency_ms / 1000)
            await problem_response(_fault_refusal(fault), request_id)(scope, receive, send)
            return
        replace = fault is not None and fault.spec.status is not None and fault.spec.when == "after"
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if replace:
                return  # the change took effect; its answer is "lost" and replaced below
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"x-request-id" for name, _ in headers):
                    headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            # Admin-plane paths can carry a token (/_reference/tokens/{token}): log the route family only.
            shown = "/_reference/…" if path.startswith("/_reference") else path
            log.exception("unexpected error answering %s %s", scope["method"], shown)
            if started and not replace:
                raise
            refusal = Refusal(500, "the reference backend failed unexpectedly; this is a bug.")
            await problem_response(refusal, request_id)(scope, receive, send)
            return
        if replace and fault is not None:
            await problem_response(_fault_refusal(fault), request_id)(scope, receive, send)


def _logged(send: Send, backend: ReferenceBackend, scope: Scope) -> Send:
    """``send``, recording the status actually answered before the client can see it."""
    method: str = scope["method"]
    path: str = scope["path"]
    headers = scope.get("headers", [])
    keyed = any(name.lower() == b"idempotency-key" and value.strip() for name, value in headers)
    token = bearer(Request(scope))

    async def send_and_log(message: Message) -> None:
        if message["type"] == "http.response.start":
            backend.log_request(method, path, int(message["status"]), idempotency_key=keyed, token=token)
        await send(message)

    return send_and_log


def _with_lines(send: Send, lines: dict[str, str]) -> Send:
    """``send``, the fault's header lines added after the answer's own (a proxy's, in effect)."""
    extra = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in lines.items()]

    async def send_with_lines(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return send_with_lines


def _without_body(send: Send) -> Send:
    async def send_headers_only(message: Message) -> None:
        if message["type"] == "http.response.body":
            if message.get("more_body", False):
                return
            message = {"type": "http.response.body", "body": b"", "more_body": False}
        await send(message)

    return send_headers_only


_METHODS: Final = ("DELETE", "GET", "PATCH", "POST", "PUT")


def allowed_methods(app: FastAPI, scope: Scope) -> list[str]:
    """Every method some route serves at this request's path (HEAD wherever GET is), for ``Allow``."""
    allowed: set[str] = set()
    for method in _METHODS:
        probe = {**scope, "method": method}
        if any(route.matches(probe)[0] is Match.FULL for route in app.router.routes):
            allowed.add(method)
    if "GET" in allowed:
        allowed.add("HEAD")
    return sorted(allowed)


async def spend_fault_latency(request: Request) -> None:
    """Fault latency is real time, spent after the idempotency key is reserved, before the change."""
    fault = request.scope.get("state", {}).get("fault")
    if isinstance(fault, Fault) and fault.spec.latency_ms and (fault.spec.status is None or fault.spec.when == "after"):
        await anyio.sleep(fault.spec.latency_ms / 1000)


# --- error handlers ------------------------------------------------------------------------------


def install_error_handlers(app: FastAPI) -> None:
    """Every refusal, unknown route, wrong method and FastAPI validation error as a problem+json answer."""

    @app.exception_handler(Refusal)
    async def on_refusal(request: Request, refusal: Refusal) -> Response:
        return problem_response(refusal, request_id_of(request))

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, error: StarletteHTTPException) -> Response:
        detail = "no such route. See /openapi.json for the routes." if error.status_code == 404 else str(error.detail)
        headers = dict(error.headers or {})
        path = request.url.path
        if (
            error.status_code == 404
            and path.endswith("/")
            and allowed_methods(request.app, {**request.scope, "path": path[:-1]})
        ):
            detail = f"no such route: {path} ends with a slash. Send it as {path.rstrip('/')}."
        if error.status_code == 405:
            # Starlette names only the first route matching the path; two routes share most paths.
            allowed = allowed_methods(request.app, request.scope)
            headers["Allow"] = ", ".join(allowed)
            detail = f"{request.method} is not served here. Use one of: {', '.join(allowed)}."
        return problem_response(Refusal(error.status_code, detail, headers=headers), request_id_of(request))

    @app.exception_handler(RequestValidationError)
    async def on_validation(request: Request, error: RequestValidationError) -> Response:
        errors = [
            FieldError(field=".".join(str(p) for p in item["loc"] if p != "body") or "body", message=str(item["msg"]))
            for item in error.errors()
        ]
        detail = "; ".join(f"{e.field}: {e.message}" for e in errors) or "invalid request"
        return problem_response(Refusal(422, detail, errors=errors), request_id_of(request))
