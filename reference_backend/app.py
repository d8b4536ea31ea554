"""The FastAPI application: the Door DKS public API under ``/v1/public`` and the admin plane.

Each public route walks the order of checks of docs/contracts.md: fault rules (middleware), token,
cluster and membership, role, body, idempotency key, then the backend's own checks and change,
which run synchronously so that a check and the change it guards cannot interleave with another
request. Every error is ``application/problem+json`` naming the rule; no input yields a 500.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Final

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend_client import models, rules
from backend_client.models import FieldError, PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from reference_backend import idempotency
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.errors import PROBLEM_BASE, FaultInjected, Refusal, title_for
from reference_backend.faults import Fault, FaultBook
from reference_backend.world import Cluster, Doc, Principal, encode_doc

log = logging.getLogger(__name__)

PREFIX: Final = "/v1/public"
MAX_BODY_BYTES: Final = 64 * 1024
PROBLEM_MEDIA_TYPE: Final = "application/problem+json"

Handler = Callable[[], Doc]


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {
        status: {
            "model": models.Problem,
            "description": title_for(status),
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }


_READ_ERRORS = problem_responses(401, 403, 404)
_MUTATION_ERRORS = problem_responses(400, 401, 402, 403, 404, 409, 413, 415, 422)
_NODE_READ_ERRORS = problem_responses(401, 403, 404, 409, 503)


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


def _request_id(request: Request) -> str | None:
    value = request.scope.get("state", {}).get("request_id")
    return value if isinstance(value, str) else None


def _fault_refusal(fault: Fault) -> Refusal:
    status = fault.spec.status or 503
    headers = {"Retry-After": str(fault.spec.retry_after)} if fault.spec.retry_after is not None else {}
    return FaultInjected(
        status, f"an injected fault ({fault.id}) answered this request.", headers=headers, title="Injected fault"
    )


# --- middleware: request id and fault rules ------------------------------------------------------


class RequestMiddleware:
    """Gives every request an id, applies fault rules (step 1 and step 14), never leaks a traceback,
    and records every answer outside the admin plane in the backend's request log."""

    def __init__(self, app: ASGIApp, faults: FaultBook, backend: ReferenceBackend) -> None:
        self.app = app
        self.faults = faults
        self.backend = backend

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = uuid.uuid4().hex
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        path: str = scope["path"]
        if not path.startswith("/_reference"):
            send = _logged(send, self.backend, scope)
        if scope["method"] == "HEAD":
            # HEAD is GET without the body (RFC 9110 §9.3.2): same status, headers and length.
            scope = {**scope, "method": "GET"}
            send = _without_body(send)
        fault = None if path.startswith("/_reference") else self.faults.pick(scope["method"], path)
        state["fault"] = fault
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
    keyed = any(name.lower() == b"idempotency-key" and value.strip() for name, value in scope.get("headers", []))

    async def send_and_log(message: Message) -> None:
        if message["type"] == "http.response.start":
            backend.log_request(method, path, int(message["status"]), idempotency_key=keyed)
        await send(message)

    return send_and_log


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


async def _spend_fault_latency(request: Request) -> None:
    """Fault latency is real time, spent after the idempotency key is reserved, before the change."""
    fault = request.scope.get("state", {}).get("fault")
    if isinstance(fault, Fault) and fault.spec.latency_ms and (fault.spec.status is None or fault.spec.when == "after"):
        await anyio.sleep(fault.spec.latency_ms / 1000)


# --- body parsing (step 5) -----------------------------------------------------------------------


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


async def read_json_body(request: Request) -> tuple[Any, str]:
    """The parsed body (``None`` when empty) and its idempotency fingerprint.

    Raises 413 beyond 64 KiB, 415 when a body is sent with a Content-Type that is not JSON, and 400
    when it is not JSON, or when a string in it is not Unicode (an unpaired surrogate escape such as
    ``"\\ud800"``, which json accepts but no answer could encode).
    """
    too_large = Refusal(413, f"the request body exceeds {MAX_BODY_BYTES} bytes. Send a smaller body.")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large
        chunks.append(chunk)
    raw = b"".join(chunks)
    request._body = raw  # Starlette's cache: a later ``request.body()`` (FastAPI's own parsing) reuses it
    if not raw.strip():
        return None, idempotency.fingerprint(None)
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type and not _is_json(media_type):
        raise Refusal(
            415,
            f"the request body is sent as {media_type}, not JSON. Send it with Content-Type: application/json.",
            headers={"Accept-Patch": "application/json"} if request.method == "PATCH" else {},
        )
    try:
        body = json.loads(raw)
        return body, idempotency.fingerprint(body)
    except UnicodeEncodeError:
        raise Refusal(
            400, "the request body holds a string with an unpaired surrogate escape. Send valid Unicode text."
        ) from None
    except (ValueError, RecursionError) as error:
        raise Refusal(400, f"the request body is not valid JSON ({error}). Send a JSON object.") from None


def _is_json(media_type: str) -> bool:
    """``application/json`` or a JSON-based ``application/…+json`` (no Content-Type is taken as JSON)."""
    kind, _, subtype = media_type.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        kind = "nothing" if body is None else type(body).__name__
        raise Refusal(
            422,
            f"the request body must be a JSON object, got {kind}. Send a JSON object.",
            errors=[FieldError(field="body", message="must be a JSON object")],
        )
    return body


_CREATE_FIELD_RULES: Final = {
    "name": "R-ADD-01",
    "size": "R-ADD-03",
    "count": "R-ADD-04",
    "auto_scale": "R-ADD-06",
    "min_nodes": "R-ADD-06",
    "max_nodes": "R-ADD-06",
    "labels": "R-ADD-07",
    "tags": "R-ADD-07",
}


def _type_violations(error: ValidationError, field_rules: dict[str, str], unknown_rule: str) -> list[rules.Violation]:
    found = []
    for item in error.errors(include_url=False):
        field = ".".join(str(part) for part in item["loc"]) or "body"
        top = str(item["loc"][0]) if item["loc"] else ""
        if item["type"] == "extra_forbidden":
            found.append(
                rules.Violation(
                    unknown_rule,
                    422,
                    field,
                    f"unknown field {field}",
                    "Remove it; only documented fields are accepted.",
                )
            )
        else:
            found.append(
                rules.Violation(
                    field_rules.get(top, unknown_rule),
                    422,
                    field,
                    f"{field}: {item['msg']}",
                    "Send a value of the documented type.",
                )
            )
    return found


def parse_create(body: Any, backend: ReferenceBackend) -> PublicNodePoolCreateRequest:
    """Step 5 for ``POST node-pools``: shape (422, R-ADD-01/04/06/07), then the tier (400, R-ADD-03)."""
    try:
        request = PublicNodePoolCreateRequest.model_validate(_object(body))
    except ValidationError as error:
        raise Refusal.of(_type_violations(error, _CREATE_FIELD_RULES, "R-ADD-07")) from None
    violations = rules.create_shape_violations(request)
    if violations:
        raise Refusal.of(violations)
    tier = rules.tier_violation(request.size, backend.catalog)
    if tier is not None:
        raise Refusal.of([tier])
    return request


def parse_patch(body: Any) -> PublicNodePoolPatchRequest:
    """Step 5 for ``PATCH node-pools/{name}``: R-PATCH-01/02 on the raw keys, then types and ranges."""
    raw = _object(body)
    violations = rules.patch_field_violations(raw)
    known = {k: v for k, v in raw.items() if k in models.PATCHABLE_FIELDS}
    patch: PublicNodePoolPatchRequest | None = None
    try:
        patch = PublicNodePoolPatchRequest.model_validate(known)
    except ValidationError as error:
        violations += _type_violations(error, {"count": "R-PATCH-06"}, "R-PATCH-01")
    if patch is not None and known:
        violations += rules.patch_shape_violations(patch)
    if violations or patch is None:
        raise Refusal.of(violations)
    return patch


def parse_node_name(node_name: str) -> None:
    violation = rules.node_name_violation(node_name)
    if violation is not None:
        raise Refusal.of([violation])


# --- the app -------------------------------------------------------------------------------------


def create_app(backend: ReferenceBackend | None = None, *, admin_token: str | None = None) -> FastAPI:
    """The reference backend app; ``app.state.backend`` is the world, the admin plane needs ``admin_token``."""
    world = backend if backend is not None else ReferenceBackend(ManualClock())
    faults = world.faults
    app = FastAPI(
        title="Door DKS node pools (reference backend)",
        version="1.0.0",
        description="A faithful stand-in for the Door Kubernetes Service node-pool public API.",
        # A trailing slash is a 404 problem naming the fix, not a bodiless 307 built from the Host header.
        redirect_slashes=False,
    )
    app.state.backend = world
    app.state.faults = faults
    app.add_middleware(RequestMiddleware, faults=faults, backend=world)
    _install_error_handlers(app)
    _install_public_routes(app, world)
    if admin_token:
        from reference_backend.admin import admin_router

        app.include_router(admin_router(world, faults, admin_token))
    _install_openapi(app, world)
    return app


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(Refusal)
    async def on_refusal(request: Request, refusal: Refusal) -> Response:
        return problem_response(refusal, _request_id(request))

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, error: StarletteHTTPException) -> Response:
        detail = "no such route. See /openapi.json for the routes." if error.status_code == 404 else str(error.detail)
        headers = dict(error.headers or {})
        path = request.url.path
        if (
            error.status_code == 404
            and path.endswith("/")
            and allowed_methods(app, {**request.scope, "path": path[:-1]})
        ):
            detail = f"no such route: {path} ends with a slash. Send it as {path.rstrip('/')}."
        if error.status_code == 405:
            # Starlette names only the first route matching the path; two routes share most paths.
            allowed = allowed_methods(app, request.scope)
            headers["Allow"] = ", ".join(allowed)
            detail = f"{request.method} is not served here. Use one of: {', '.join(allowed)}."
        return problem_response(Refusal(error.status_code, detail, headers=headers), _request_id(request))

    @app.exception_handler(RequestValidationError)
    async def on_validation(request: Request, error: RequestValidationError) -> Response:
        errors = [
            FieldError(field=".".join(str(p) for p in item["loc"] if p != "body") or "body", message=str(item["msg"]))
            for item in error.errors()
        ]
        detail = "; ".join(f"{e.field}: {e.message}" for e in errors) or "invalid request"
        return problem_response(Refusal(422, detail, errors=errors), _request_id(request))


async def _answer_mutation(
    request: Request,
    backend: ReferenceBackend,
    token: str,
    fingerprint: str,
    rule: str,
    change: Handler,
) -> Response:
    """Steps 6 and 14 of a mutation: the idempotency key around the change, then the 202."""
    key = request.headers.get("idempotency-key")
    key_scope = None
    if key:
        key_scope = idempotency.scope(token, request.method, request.url.path, key)
        stored = backend.idempotency.begin(key_scope, fingerprint, backend.now(), rule)
        if stored is not None:
            return Response(
                stored.body,
                status_code=stored.status,
                headers={**stored.headers, "Idempotent-Replayed": "true"},
                media_type="application/json",
            )
    headers = {"X-Request-Id": _request_id(request) or ""}
    try:
        await _spend_fault_latency(request)
        # Synchronous from here: the checks and the change are atomic (R-OP-01), and the change and
        # the answer it stores for replay are written to the state file in one transaction.
        with backend.transaction():
            now = backend.now()
            text = json.dumps(change(), separators=(",", ":"))
            if key_scope is not None:
                expires_at = idempotency.IdempotencyStore.expiry(now)
                answer = idempotency.StoredAnswer(fingerprint, 202, text, headers, expires_at)
                backend.remember_answer(key_scope, answer)
    except BaseException:
        if key_scope is not None:
            backend.remember_answer(key_scope, None)
        raise
    return Response(text, status_code=202, headers=headers, media_type="application/json")


def _install_public_routes(app: FastAPI, backend: ReferenceBackend) -> None:
    def who(request: Request) -> tuple[str, Principal]:
        backend.now()
        token = _bearer(request)
        principal = backend.authenticate(token)
        assert token is not None
        return token, principal

    async def read(request: Request, produce: Callable[[Principal], Doc]) -> Response:
        """A read: fault latency first, then the checks (in ``produce``) and the body, with no await between."""
        await _spend_fault_latency(request)
        _, principal = who(request)
        return Response(encode_doc(produce(principal)), media_type="application/json")

    async def read_cluster(request: Request, cluster_id: str, produce: Callable[[Cluster], Doc]) -> Response:
        return await read(request, lambda principal: produce(backend.cluster_for(principal, cluster_id)))

    async def authorised_body(request: Request, cluster_id: str) -> tuple[str, Principal, Any, str]:
        """Steps 2-5 of a mutation up to the parsed body: token, cluster, role, then the bytes."""
        token, principal = who(request)
        backend.cluster_for(principal, cluster_id)
        backend.require_super_admin(principal)
        body, fingerprint = await read_json_body(request)
        return token, principal, body, fingerprint

    def on_cluster(principal: Principal, cluster_id: str, change: Callable[[Cluster], Doc]) -> Handler:
        # Looked up again after the awaits (body, fault latency): a reset may have replaced the world.
        return lambda: change(backend.cluster_for(principal, cluster_id))

    @app.get(
        f"{PREFIX}/machine-tiers",
        response_model=models.MachineTierList,
        responses=problem_responses(401),
        tags=["catalog"],
    )
    async def machine_tiers(request: Request) -> Response:
        """The machine-tier catalog: vCPU, memory, disk and hourly price of every size."""
        items = [t.model_dump(mode="json") for t in backend.catalog.values()]
        return await read(request, lambda _: {"schema_version": models.CATALOG_SCHEMA, "items": items})

    @app.get(
        f"{PREFIX}/clusters", response_model=models.ClusterList, responses=problem_responses(401), tags=["clusters"]
    )
    async def list_clusters(request: Request, name: str | None = None) -> Response:
        """The clusters of the caller's organisation, optionally only the one with this exact name."""
        return await read(request, lambda principal: backend.list_clusters(principal, name))

    @app.get(
        f"{PREFIX}/clusters/{{cluster_id}}", response_model=models.Cluster, responses=_READ_ERRORS, tags=["clusters"]
    )
    async def get_cluster(request: Request, cluster_id: str) -> Response:
        """R-POOL-03: the cluster with its pools embedded and the capacity totals (200 in any phase)."""
        return await read_cluster(request, cluster_id, backend.cluster_body)

    @app.get(
        f"{PREFIX}/clusters/{{cluster_id}}/state",
        response_model=models.ClusterState,
        responses=_READ_ERRORS,
        tags=["clusters"],
    )
    async def get_state(request: Request, cluster_id: str) -> Response:
        """R-OP-03: the phase and every pool or node operation, newest first."""
        return await read_cluster(request, cluster_id, backend.state_body)

    @app.get(
        f"{PREFIX}/clusters/{{cluster_id}}/node-pools",
        response_model=models.NodePoolList,
        responses=_READ_ERRORS,
        tags=["node pools"],
    )
    async def list_pools(request: Request, cluster_id: str) -> Response:
        """R-POOL-01: the pools of the cluster (200 in any phase, R-PHASE-02)."""
        return await read_cluster(request, cluster_id, backend.pools_body)

    @app.post(
        f"{PREFIX}/clusters/{{cluster_id}}/node-pools",
        status_code=202,
        response_model=models.Cluster,
        responses=_MUTATION_ERRORS,
        openapi_extra=_request_body("PublicNodePoolCreateRequest"),
        tags=["node pools"],
    )
    async def add_pool(request: Request, cluster_id: str) -> Response:
        """Add a pool (R-ADD-*): 202 with the cluster; the workers come up in the background."""
        token, principal, body, fingerprint = await authorised_body(request, cluster_id)
        pool = parse_create(body, backend)
        change = on_cluster(principal, cluster_id, lambda cluster: backend.add_pool(cluster, pool))
        return await _answer_mutation(request, backend, token, fingerprint, "R-ADD-09", change)

    @app.patch(
        f"{PREFIX}/clusters/{{cluster_id}}/node-pools/{{pool_name}}",
        status_code=202,
        response_model=models.Cluster,
        responses=_MUTATION_ERRORS,
        openapi_extra=_request_body("PublicNodePoolPatchRequest"),
        tags=["node pools"],
    )
    async def patch_pool(request: Request, cluster_id: str, pool_name: str) -> Response:
        """Change a pool (R-PATCH-*): 202 with the cluster; scaling happens in the background."""
        token, principal, body, fingerprint = await authorised_body(request, cluster_id)
        patch = parse_patch(body)
        change = on_cluster(principal, cluster_id, lambda cluster: backend.patch_pool(cluster, pool_name, patch))
        return await _answer_mutation(request, backend, token, fingerprint, "R-PATCH-09", change)

    @app.delete(
        f"{PREFIX}/clusters/{{cluster_id}}/node-pools/{{pool_name}}",
        status_code=202,
        response_model=models.Cluster,
        responses=_MUTATION_ERRORS,
        tags=["node pools"],
    )
    async def delete_pool(request: Request, cluster_id: str, pool_name: str) -> Response:
        """Remove a pool (R-DEL-*): it stays ``deleting`` until its workers are gone."""
        token, principal, _, fingerprint = await authorised_body(request, cluster_id)
        change = on_cluster(principal, cluster_id, lambda cluster: backend.delete_pool(cluster, pool_name))
        return await _answer_mutation(request, backend, token, fingerprint, "R-ADD-09", change)

    @app.get(
        f"{PREFIX}/clusters/{{cluster_id}}/nodes",
        response_model=models.NodeList,
        responses=_NODE_READ_ERRORS,
        tags=["nodes"],
    )
    async def list_nodes(request: Request, cluster_id: str) -> Response:
        """R-NODE-01..05: the best-known snapshot of every worker, always 200 (never 202)."""
        return await read_cluster(request, cluster_id, backend.nodes_body)

    @app.get(
        f"{PREFIX}/clusters/{{cluster_id}}/node-pools/{{pool_name}}/nodes",
        response_model=models.NodeList,
        responses=_NODE_READ_ERRORS,
        tags=["nodes"],
    )
    async def list_pool_nodes(request: Request, cluster_id: str, pool_name: str) -> Response:
        """R-NODE-01..05: the cluster snapshot filtered to one pool; 404 for an unknown pool."""
        return await read_cluster(request, cluster_id, lambda cluster: backend.nodes_body(cluster, pool_name))

    @app.delete(
        f"{PREFIX}/clusters/{{cluster_id}}/nodes/{{node_name}}",
        status_code=202,
        response_model=models.NodeDeletePending,
        responses=_MUTATION_ERRORS,
        tags=["nodes"],
    )
    async def replace_node(request: Request, cluster_id: str, node_name: str) -> Response:
        """Replace a worker (R-RNODE-*): the pool keeps its count; an unknown name fails asynchronously."""
        token, principal, _, fingerprint = await authorised_body(request, cluster_id)
        parse_node_name(node_name)
        change = on_cluster(principal, cluster_id, lambda cluster: backend.replace_node(cluster, node_name))
        return await _answer_mutation(request, backend, token, fingerprint, "R-ADD-09", change)


def _request_body(schema: str) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
        }
    }


_SCHEMA_MODELS: Final[Sequence[type[BaseModel]]] = (
    PublicNodePoolCreateRequest,
    PublicNodePoolPatchRequest,
    models.Problem,
)


def _install_openapi(app: FastAPI, backend: ReferenceBackend) -> None:
    """The generated schema plus the request models the routes parse themselves (to keep the order of checks)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        for path, operations in schema["paths"].items():
            for operation in operations.values():
                if path.startswith(PREFIX) and "422" in operation["responses"]:
                    # Our 422 is a problem naming the rule and fields, not FastAPI's HTTPValidationError.
                    operation["responses"]["422"] = problem_responses(422)[422] | {"description": title_for(422)}
                    operation["responses"]["422"].pop("model")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in _SCHEMA_MODELS:
            model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(model_schema.pop("$defs", {}))
            components.setdefault(model.__name__, model_schema)
        _document_request_rules(schema, sorted(backend.catalog))
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


CROSS_FIELD_RULES: Final = (
    "Cross-field rules JSON Schema cannot state, refused with 422 naming the rule: with auto_scale=true, "
    "min_nodes (null → 1) ≤ max_nodes and min_nodes ≤ count ≤ max_nodes (R-ADD-06 on create; R-PATCH-04 on "
    "a patch, checked after merging it with the stored pool, so a patch's other R-PATCH-04 refusals depend "
    "on the stored pool too)."
)


def _document_request_rules(schema: dict[str, Any], tiers: Sequence[str]) -> None:
    """Write the rules the routes check themselves into the schema, so a client can see them up front.

    The request models are shared with the client and stay lax (the routes name the rule of each
    refusal); the published schema says what is accepted: R-ADD-01 name pattern, R-ADD-03 the tier
    ids, R-ADD-04 / R-PATCH-06 ranges, R-ADD-05 (count=0 needs auto_scale=true) and R-ADD-06
    (auto_scale=true needs max_nodes) as if/then, R-PATCH-01 (a sent count, auto_scale, labels or
    tags is never null), R-PATCH-02 (at least one field), R-RNODE-03 node name pattern (a mismatch
    is the documented 400), R-AUTH-01 the bearer token. What no JSON Schema can say (comparisons
    between two fields, or with the stored pool) is in the descriptions (``CROSS_FIELD_RULES``).
    """
    components = schema["components"]["schemas"]
    components_security = schema["components"].setdefault("securitySchemes", {})
    components_security["bearer"] = {"type": "http", "scheme": "bearer", "description": "R-AUTH-01"}
    for path, operations in schema["paths"].items():
        if path.startswith(PREFIX):
            for operation in operations.values():
                operation["security"] = [{"bearer": []}]
    create_schema = components["PublicNodePoolCreateRequest"]
    create = create_schema["properties"]
    create["name"].update(pattern=rules.DNS_LABEL.pattern, minLength=1, maxLength=63)
    create["size"].update(enum=list(tiers), description="R-ADD-03: a machine tier id of GET /v1/public/machine-tiers.")
    create["count"].update(minimum=0, maximum=rules.MAX_COUNT)
    _integer_range(create["min_nodes"], minimum=0)
    _integer_range(create["max_nodes"], minimum=0, maximum=rules.MAX_COUNT)
    create_schema["allOf"] = [
        {  # R-ADD-05
            "if": {"properties": {"count": {"const": 0}}, "required": ["count"]},
            "then": {"properties": {"auto_scale": {"const": True}}, "required": ["auto_scale"]},
        },
        {  # R-ADD-06
            "if": {"properties": {"auto_scale": {"const": True}}, "required": ["auto_scale"]},
            "then": {"properties": {"max_nodes": {"type": "integer"}}, "required": ["max_nodes"]},
        },
    ]
    create_schema["description"] = f"{create_schema.get('description', '')}\n\n{CROSS_FIELD_RULES}".strip()
    patch_schema = components["PublicNodePoolPatchRequest"]
    patch_schema["minProperties"] = 1
    patch_schema["description"] = f"{patch_schema.get('description', '')}\n\n{CROSS_FIELD_RULES}".strip()
    patch = patch_schema["properties"]
    for name in ("count", "auto_scale", "labels", "tags"):
        field = patch[name]
        options = [option for option in field.pop("anyOf", []) if option.get("type") != "null"]
        field.pop("default", None)
        if options:
            field.update(options[0])
    patch["count"].update(minimum=0, maximum=rules.MAX_COUNT)
    _integer_range(patch["min_nodes"], minimum=0)
    _integer_range(patch["max_nodes"], minimum=0, maximum=rules.MAX_COUNT)
    node_route = schema["paths"].get(f"{PREFIX}/clusters/{{cluster_id}}/nodes/{{node_name}}", {})
    for operation in node_route.values():
        for parameter in operation.get("parameters", []):
            if parameter["name"] == "node_name":
                parameter["schema"].update(pattern=rules.NODE_NAME.pattern, maxLength=254)


def _integer_range(field: dict[str, Any], **bounds: int) -> None:
    for option in field.get("anyOf", [field]):
        if option.get("type") == "integer":
            option.update(bounds)


__all__ = ["PROBLEM_BASE", "create_app", "problem_response"]
