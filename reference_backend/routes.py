"""The public routes (``/v1/public``): each walks the order of checks of docs/contracts.md.

Fault rules (middleware, ``edge``), token, cluster and membership, role, body (``bodies``),
idempotency key, then the backend's own checks and change, which run synchronously so that a
check and the change it guards cannot interleave with another request.

The routes are built once per process (``router``) and find the world in ``request.app.state.backend``,
so building an app costs next to nothing and one app can serve a fresh backend per test.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import Response

from backend_client import models
from reference_backend import idempotency, views
from reference_backend.backend import ReferenceBackend
from reference_backend.bodies import bearer, parse_create, parse_node_name, parse_patch, read_json_body
from reference_backend.edge import PREFIX, backend_of, problem_responses, request_id_of, spend_fault_latency
from reference_backend.openapi import request_body
from reference_backend.world import Cluster, Doc, Principal, encode_doc

Handler = Callable[[], Doc]

_READ_ERRORS: Final = problem_responses(401, 403, 404)
_MUTATION_ERRORS: Final = problem_responses(400, 401, 402, 403, 404, 409, 413, 415, 422)
_NODE_READ_ERRORS: Final = problem_responses(401, 403, 404, 409, 503)

router = APIRouter()


async def answer_mutation(
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
    headers = {"X-Request-Id": request_id_of(request) or ""}
    try:
        await spend_fault_latency(request)
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


def _who(backend: ReferenceBackend, request: Request) -> tuple[str, Principal]:
    backend.now()
    token = bearer(request)
    principal = backend.authenticate(token)
    assert token is not None
    return token, principal


async def _read(request: Request, produce: Callable[[ReferenceBackend, Principal], Doc]) -> Response:
    """A read: fault latency first, then the checks (in ``produce``) and the body, with no await between."""
    await spend_fault_latency(request)
    backend = backend_of(request.app)
    _, principal = _who(backend, request)
    return Response(encode_doc(produce(backend, principal)), media_type="application/json")


async def _read_cluster(
    request: Request, cluster_id: str, produce: Callable[[ReferenceBackend, Cluster], Doc]
) -> Response:
    return await _read(request, lambda backend, principal: produce(backend, backend.cluster_for(principal, cluster_id)))


async def _authorised_body(request: Request, cluster_id: str) -> tuple[ReferenceBackend, str, Principal, Any, str]:
    """Steps 2-5 of a mutation up to the parsed body: token, cluster, role, then the bytes."""
    backend = backend_of(request.app)
    token, principal = _who(backend, request)
    backend.cluster_for(principal, cluster_id)
    backend.require_super_admin(principal)
    body, fingerprint = await read_json_body(request)
    return backend, token, principal, body, fingerprint


def _on_cluster(
    backend: ReferenceBackend, principal: Principal, cluster_id: str, change: Callable[[Cluster], Doc]
) -> Handler:
    # Looked up again after the awaits (body, fault latency): a reset may have replaced the world.
    return lambda: change(backend.cluster_for(principal, cluster_id))


@router.get(
    f"{PREFIX}/machine-tiers",
    response_model=models.MachineTierList,
    responses=problem_responses(401),
    tags=["catalog"],
)
async def machine_tiers(request: Request) -> Response:
    """The machine-tier catalog: vCPU, memory, disk and hourly price of every size."""
    return await _read(request, lambda backend, _: views.catalog_body(backend.catalog))


@router.get(
    f"{PREFIX}/clusters", response_model=models.ClusterList, responses=problem_responses(401), tags=["clusters"]
)
async def list_clusters(request: Request, name: str | None = None) -> Response:
    """The clusters of the caller's organisation, optionally only the one with this exact name."""
    return await _read(request, lambda backend, principal: backend.list_clusters(principal, name))


@router.get(
    f"{PREFIX}/clusters/{{cluster_id}}", response_model=models.Cluster, responses=_READ_ERRORS, tags=["clusters"]
)
async def get_cluster(request: Request, cluster_id: str) -> Response:
    """R-POOL-03: the cluster with its pools embedded and the capacity totals (200 in any phase)."""
    return await _read_cluster(request, cluster_id, lambda backend, cluster: backend.cluster_body(cluster))


@router.get(
    f"{PREFIX}/clusters/{{cluster_id}}/state",
    response_model=models.ClusterState,
    responses=_READ_ERRORS,
    tags=["clusters"],
)
async def get_state(request: Request, cluster_id: str) -> Response:
    """R-OP-03: the phase, the running pool and node operations and the latest finished ones, newest first."""
    return await _read_cluster(request, cluster_id, lambda backend, cluster: backend.state_body(cluster))


@router.get(
    f"{PREFIX}/clusters/{{cluster_id}}/node-pools",
    response_model=models.NodePoolList,
    responses=_READ_ERRORS,
    tags=["node pools"],
)
async def list_pools(request: Request, cluster_id: str) -> Response:
    """R-POOL-01: the pools of the cluster (200 in any phase, R-PHASE-02)."""
    return await _read_cluster(request, cluster_id, lambda backend, cluster: backend.pools_body(cluster))


@router.post(
    f"{PREFIX}/clusters/{{cluster_id}}/node-pools",
    status_code=202,
    response_model=models.Cluster,
    responses=_MUTATION_ERRORS,
    openapi_extra=request_body("PublicNodePoolCreateRequest"),
    tags=["node pools"],
)
async def add_pool(request: Request, cluster_id: str) -> Response:
    """Add a pool (R-ADD-*): 202 with the cluster; the workers come up in the background."""
    backend, token, principal, body, fingerprint = await _authorised_body(request, cluster_id)
    pool = parse_create(body, backend.catalog)
    change = _on_cluster(backend, principal, cluster_id, lambda cluster: backend.add_pool(cluster, pool))
    return await answer_mutation(request, backend, token, fingerprint, "R-ADD-09", change)


@router.patch(
    f"{PREFIX}/clusters/{{cluster_id}}/node-pools/{{pool_name}}",
    status_code=202,
    response_model=models.Cluster,
    responses=_MUTATION_ERRORS,
    openapi_extra=request_body("PublicNodePoolPatchRequest"),
    tags=["node pools"],
)
async def patch_pool(request: Request, cluster_id: str, pool_name: str) -> Response:
    """Change a pool (R-PATCH-*): 202 with the cluster; scaling happens in the background."""
    backend, token, principal, body, fingerprint = await _authorised_body(request, cluster_id)
    patch = parse_patch(body)
    change = _on_cluster(backend, principal, cluster_id, lambda cluster: backend.patch_pool(cluster, pool_name, patch))
    return await answer_mutation(request, backend, token, fingerprint, "R-PATCH-09", change)


@router.delete(
    f"{PREFIX}/clusters/{{cluster_id}}/node-pools/{{pool_name}}",
    status_code=202,
    response_model=models.Cluster,
    responses=_MUTATION_ERRORS,
    tags=["node pools"],
)
async def delete_pool(request: Request, cluster_id: str, pool_name: str) -> Response:
    """Remove a pool (R-DEL-*): it stays ``deleting`` until its workers are gone."""
    backend, token, principal, _, fingerprint = await _authorised_body(request, cluster_id)
    change = _on_cluster(backend, principal, cluster_id, lambda cluster: backend.delete_pool(cluster, pool_name))
    return await answer_mutation(request, backend, token, fingerprint, "R-ADD-09", change)


@router.get(
    f"{PREFIX}/clusters/{{cluster_id}}/nodes",
    response_model=models.NodeList,
    responses=_NODE_READ_ERRORS,
    tags=["nodes"],
)
async def list_nodes(request: Request, cluster_id: str) -> Response:
    """R-NODE-01..05: the best-known snapshot of every worker, always 200 (never 202)."""
    return await _read_cluster(request, cluster_id, lambda backend, cluster: backend.nodes_body(cluster))


@router.get(
    f"{PREFIX}/clusters/{{cluster_id}}/node-pools/{{pool_name}}/nodes",
    response_model=models.NodeList,
    responses=_NODE_READ_ERRORS,
    tags=["nodes"],
)
async def list_pool_nodes(request: Request, cluster_id: str, pool_name: str) -> Response:
    """R-NODE-01..05: the cluster snapshot filtered to one pool; 404 for an unknown pool."""
    return await _read_cluster(request, cluster_id, lambda backend, cluster: backend.nodes_body(cluster, pool_name))


@router.delete(
    f"{PREFIX}/clusters/{{cluster_id}}/nodes/{{node_name}}",
    status_code=202,
    response_model=models.NodeDeletePending,
    responses=_MUTATION_ERRORS,
    tags=["nodes"],
)
async def replace_node(request: Request, cluster_id: str, node_name: str) -> Response:
    """Replace a worker (R-RNODE-*): the pool keeps its count; an unknown name fails asynchronously."""
    backend, token, principal, _, fingerprint = await _authorised_body(request, cluster_id)
    parse_node_name(node_name)
    change = _on_cluster(backend, principal, cluster_id, lambda cluster: backend.replace_node(cluster, node_name))
    return await answer_mutation(request, backend, token, fingerprint, "R-ADD-09", change)
