"""The admin plane (``/_reference/…``): reset, clock, clusters, phases, credit, tokens, inventory, faults, snapshots.

Mounted only when the app has an ``admin_token`` (``app.state.admin_token``); every route wants
``Authorization: Bearer <admin_token>`` (401 otherwise). It exists for tests, demos and benchmarks,
never for Door's public clients. Like the public routes, it is built once per process and finds the
world in ``request.app.state.backend``.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any, Final, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field

from backend_client.models import Cluster, Phase, PublicNodePoolCreateRequest
from reference_backend import views
from reference_backend.backend import ReferenceBackend, RequestRecord
from reference_backend.bodies import MAX_BODY_BYTES, read_json_body
from reference_backend.clock import AdjustableClock, ClockError
from reference_backend.edge import backend_of, problem_responses
from reference_backend.errors import Refusal
from reference_backend.faults import FaultRouteError, FaultSpec, FaultView
from reference_backend.snapshots import SnapshotError, parse
from reference_backend.world import Doc, iso

# A snapshot of 200 pools × 200 workers with their inventory is about 40 MB.
MAX_SNAPSHOT_BYTES: Final = 256 * 1024 * 1024


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResetBody(_Body):
    seed: Literal["demo", "empty"] = "demo"


class AdvanceBody(_Body):
    seconds: float = Field(ge=0, allow_inf_nan=False, strict=True)


class SetClockBody(_Body):
    now: datetime


class NewCluster(_Body):
    name: str
    organisation: str
    phase: Phase = "Provisioned"
    id: str | None = None
    kubernetes_version: str = "v1.32.4"
    tags: list[str] = Field(default_factory=list)
    node_pools: list[PublicNodePoolCreateRequest] = Field(default_factory=list)


class PhaseBody(_Body):
    phase: Phase


class CreditBody(_Body):
    credit: float = Field(
        allow_inf_nan=False, strict=True, description="a finite balance; NaN or infinity would disable the credit gate"
    )


class TokenBody(_Body):
    organisation: str
    role: Literal["super_admin", "member"]
    user: str


class InventoryBody(_Body):
    available: bool = Field(strict=True)


class RequestLogView(BaseModel):
    items: list[RequestRecord]
    next: int = Field(description="pass as `since` to get only the requests answered after these")


class ClockView(BaseModel):
    now: datetime
    mode: Literal["manual", "scaled"] | None = None
    time_scale: float | None = None


def _guard(request: Request) -> ReferenceBackend:
    """The world of this app, once the admin token (compared in constant time) is right; else 401."""
    admin_token: str = request.app.state.admin_token or ""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if (
        not admin_token
        or scheme.lower() != "bearer"
        or not hmac.compare_digest(token.strip().encode(), admin_token.encode())
    ):
        raise Refusal(
            401,
            "the admin plane needs Authorization: Bearer <admin token>.",
            headers={"WWW-Authenticate": "Bearer"},
        )
    backend = backend_of(request.app)
    backend.now()
    return backend


class AdminRoute(APIRoute):
    """The token first, then the body bytes (as on the public API), then FastAPI's own parsing.

    So an unauthenticated request is 401 whatever its body, and a body that is over 64 KiB, not
    JSON, or holds an unpaired surrogate escape (which no answer or state row could encode) is
    a 413/400 problem instead of a 422 or, once stored, a 500 on every later read.
    """

    max_body_bytes: int = MAX_BODY_BYTES

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        parse = super().get_route_handler()
        limit = self.max_body_bytes

        async def handler(request: Request) -> Response:
            _guard(request)
            if request.method in ("POST", "PUT", "PATCH"):
                request.state.json_body, _ = await read_json_body(request, limit)
            return await parse(request)

        return handler


class SnapshotRoute(AdminRoute):
    """A snapshot's restore carries a whole world, so its body may be far larger than any other."""

    max_body_bytes = MAX_SNAPSHOT_BYTES


router = APIRouter(
    prefix="/_reference",
    route_class=AdminRoute,
    tags=["reference admin plane"],
    responses=problem_responses(400, 401, 404, 409, 413, 415, 422),
)


def _clock(backend: ReferenceBackend) -> AdjustableClock:
    if not isinstance(backend.clock, AdjustableClock):
        raise Refusal(409, "this backend's clock cannot be moved.")
    return backend.clock


def _clock_view(backend: ReferenceBackend) -> ClockView:
    now = backend.now()
    current = backend.clock
    if isinstance(current, AdjustableClock):
        return ClockView(now=now, mode=current.mode, time_scale=current.time_scale)
    return ClockView(now=now)


@router.post("/reset")
async def reset(request: Request, body: ResetBody) -> dict[str, bool]:
    backend = backend_of(request.app)
    backend.reset(body.seed)
    backend.faults.clear()
    return {"ok": True}


@router.get("/clock", response_model=ClockView)
async def get_clock(request: Request) -> ClockView:
    backend = backend_of(request.app)
    return _clock_view(backend)


@router.post("/clock/advance", response_model=ClockView)
async def advance(request: Request, body: AdvanceBody) -> ClockView:
    backend = backend_of(request.app)
    try:
        _clock(backend).advance(body.seconds)
    except ClockError as error:
        raise Refusal(422, f"{error}. Advance by a smaller amount.") from None
    return _clock_view(backend)


@router.put("/clock", response_model=ClockView)
async def set_clock(request: Request, body: SetClockBody) -> ClockView:
    backend = backend_of(request.app)
    try:
        _clock(backend).set(body.now)
    except ClockError as error:
        raise Refusal(409, f"{error}. The clock only moves forward.") from None
    return _clock_view(backend)


@router.post("/clusters", status_code=201, response_model=Cluster)
async def new_cluster(request: Request, body: NewCluster) -> Doc:
    backend = backend_of(request.app)
    cluster = backend.install_cluster(
        name=body.name,
        organisation=body.organisation,
        phase=body.phase,
        cluster_id=body.id,
        kubernetes_version=body.kubernetes_version,
        pools=body.node_pools,
        tags=body.tags,
    )
    if backend.credit(body.organisation) is None:
        backend.set_credit(body.organisation, 0.0)
    return backend.cluster_body(cluster)


@router.put("/clusters/{cluster_id}/phase", response_model=Cluster)
async def set_phase(request: Request, cluster_id: str, body: PhaseBody) -> Doc:
    backend = backend_of(request.app)
    cluster = backend.cluster(cluster_id)
    if cluster is None:
        raise Refusal(404, f"no cluster {cluster_id}.")
    backend.set_phase(cluster, body.phase)
    return backend.cluster_body(cluster)


@router.put("/organisations/{name}")
async def set_credit(request: Request, name: str, body: CreditBody) -> dict[str, Any]:
    backend = backend_of(request.app)
    organisation = backend.set_credit(name, body.credit)
    return {"name": organisation.name, "credit": organisation.credit}


@router.put("/tokens/{token}")
async def put_token(request: Request, token: str, body: TokenBody) -> dict[str, str]:
    backend = backend_of(request.app)
    principal = backend.put_token(token, body.user, body.organisation, body.role)
    return views.principal_body(principal)


@router.delete("/tokens/{token}", status_code=204)
async def delete_token(request: Request, token: str) -> Response:
    backend = backend_of(request.app)
    backend.delete_token(token)
    return Response(status_code=204)


@router.put("/inventory")
async def set_inventory(request: Request, body: InventoryBody) -> dict[str, bool]:
    backend = backend_of(request.app)
    backend.set_inventory(body.available)
    return {"available": backend.inventory_available}


@router.get("/requests", response_model=RequestLogView)
async def list_requests(
    request: Request,
    since: int = Query(0, ge=0, description="the `next` of the previous call"),
) -> RequestLogView:
    """Requests answered outside the admin plane, oldest first: method, path, status, whether an
    Idempotency-Key was sent; never a token, header or query. Only the last 10,000 are kept."""
    backend = backend_of(request.app)
    return RequestLogView(items=backend.requests_since(since), next=backend.last_request_seq)


async def save_snapshot(request: Request) -> Response:
    """The whole world as a snapshot file (``reference_backend.snapshots``): JSON, sorted keys."""
    backend = backend_of(request.app)
    return Response(backend.save_snapshot(), media_type="application/json")


async def restore_snapshot(request: Request) -> dict[str, Any]:
    """Replace the world, its time included, with the snapshot in the body; fault rules are cleared, as on a reset."""
    backend = backend_of(request.app)
    try:
        backend.restore_snapshot(parse(request.state.json_body))
    except SnapshotError as error:
        raise Refusal(422, str(error)) from None
    backend.faults.clear()
    return {"ok": True, "now": iso(backend.now())}


router.add_api_route(
    "/snapshot",
    save_snapshot,
    methods=["GET"],
    response_class=Response,
    responses={200: {"content": {"application/json": {}}, "description": "the snapshot file"}},
)
router.add_api_route("/snapshot", restore_snapshot, methods=["PUT"], route_class_override=SnapshotRoute)


@router.post("/faults", status_code=201, response_model=FaultView)
async def add_fault(request: Request, spec: FaultSpec) -> FaultView:
    backend = backend_of(request.app)
    try:
        return backend.faults.add(spec).view()
    except FaultRouteError as error:
        raise Refusal(422, str(error)) from None


@router.get("/faults", response_model=list[FaultView])
async def list_faults(request: Request) -> list[FaultView]:
    backend = backend_of(request.app)
    return [f.view() for f in backend.faults.all()]


@router.delete("/faults", status_code=204)
async def clear_faults(request: Request) -> Response:
    backend = backend_of(request.app)
    backend.faults.clear()
    return Response(status_code=204)


__all__ = ["AdminRoute", "router"]
