"""The contract flows: recorded from the reference backend by ``scripts/record_cassettes.py`` and
replayed by ``tests/backend_client/test_cassettes.py``, both through ``DoorClient``. They live here,
beside the recorder, so that the recorder imports nothing from the tests.

A flow is the admin-plane setup that puts the world in shape (done outside the cassette, never
recorded) and the public calls made through the client (recorded). Its result is what the replay
test asserts on. Tokens are the demo seed's; none of them ends up in a cassette.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from backend_client import DoorClient, DoorStatusError
from backend_client.models import PublicNodePoolCreateRequest, PublicNodePoolPatchRequest

CLUSTER_ID = "3f9c1a2e-7b4d-4c58-9e21-5d6f8a0b1c2d"  # reference_backend.seed.DEMO_CLUSTER_ID
NODE_NAME = "payments-prod-workers-abc12"  # reference_backend.seed.DEMO_NODE_NAME
ADMIN = "demo-admin-token"
MEMBER = "demo-member-token"
OUTSIDER = "demo-outsider-token"
UNKNOWN = "no-such-token"
REPLAY_BASE_URL = "http://door.test"
"""Every cassette names this host, whatever port the recording server had."""

FORBIDDEN_IN_CASSETTES = (ADMIN, MEMBER, OUTSIDER, UNKNOWN, "Bearer")
"""No cassette may contain these (the recorder adds its own admin token to the list)."""
AUTH_SCHEME_PLACEHOLDER = "<auth-scheme>"

ClientFor = Callable[[str], DoorClient]
"""Makes a client for a token (its ``sleep`` advances the backend's clock while recording)."""


@dataclass(frozen=True)
class AdminCall:
    method: str
    path: str
    json: dict[str, Any] | None = None


@dataclass(frozen=True)
class Flow:
    name: str
    run: Callable[[ClientFor], Awaitable[dict[str, Any]]]
    setup: tuple[AdminCall, ...] = field(default=())

    @property
    def cassette(self) -> str:
        return f"{self.name}.yaml"


async def _refusal(call: Awaitable[object]) -> dict[str, Any]:
    """Run a call that must be refused and describe the error the client raised."""
    try:
        await call
    except DoorStatusError as error:
        return {
            "error": type(error).__name__,
            "status": error.status_code,
            "rule": error.rule,
            "fields": sorted(error.field_errors),
            "retry_after": error.retry_after,
            "request_id": error.request_id,
            "message": str(error),
        }
    raise AssertionError("the call was not refused")


# --- the main flows ------------------------------------------------------------------------------


async def list_everything(client_for: ClientFor) -> dict[str, Any]:
    async with client_for(MEMBER) as door:
        tiers = await door.list_machine_tiers()
        clusters = await door.list_clusters()
        resolved = await door.resolve_cluster("payments-prod")
        cluster = await door.get_cluster(CLUSTER_ID)
        state = await door.get_cluster_state(CLUSTER_ID)
        pools = await door.list_node_pools(CLUSTER_ID)
        first = await door.list_nodes(CLUSTER_ID)
        fresh = await door.list_nodes(CLUSTER_ID, fresh=True)
        workers = await door.list_nodes(CLUSTER_ID, "workers", fresh=True)
    return {
        "tiers": tiers,
        "clusters": clusters,
        "resolved": resolved,
        "cluster": cluster,
        "state": state,
        "pools": pools,
        "first_nodes": first,
        "fresh_nodes": fresh,
        "workers_nodes": workers,
    }


async def add_pool(client_for: ClientFor) -> dict[str, Any]:
    async with client_for(ADMIN) as door:
        request = PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge", count=1)
        cluster = await door.add_node_pool(CLUSTER_ID, request, idempotency_key="cassette-add-batch")
        operation = await door.wait_for_operation(CLUSTER_ID, target="batch", poll_interval=30.0)
        nodes = await door.list_nodes(CLUSTER_ID, "batch", fresh=True)
    return {"cluster": cluster, "operation": operation, "nodes": nodes}


async def scale_pool(client_for: ClientFor) -> dict[str, Any]:
    async with client_for(ADMIN) as door:
        cluster = await door.update_node_pool(
            CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=4), idempotency_key="cassette-scale-4"
        )
        operation = await door.wait_for_operation(CLUSTER_ID, target="workers", poll_interval=30.0)
        nodes = await door.list_nodes(CLUSTER_ID, "workers", fresh=True)
    return {"cluster": cluster, "operation": operation, "nodes": nodes}


async def autoscale_pool(client_for: ClientFor) -> dict[str, Any]:
    async with client_for(ADMIN) as door:
        patch = PublicNodePoolPatchRequest(auto_scale=True, min_nodes=2, max_nodes=6, count=2)
        cluster = await door.update_node_pool(CLUSTER_ID, "workers", patch)
    return {"cluster": cluster}


async def remove_pool(client_for: ClientFor) -> dict[str, Any]:
    async with client_for(ADMIN) as door:
        request = PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge", count=1)
        await door.add_node_pool(CLUSTER_ID, request)
        await door.wait_for_operation(CLUSTER_ID, target="batch", poll_interval=30.0)
        removed = await door.remove_node_pool(CLUSTER_ID, "batch", idempotency_key="cassette-remove-batch")
        operation = await door.wait_for_operation(CLUSTER_ID, target="batch", poll_interval=30.0)
        pools = await door.list_node_pools(CLUSTER_ID)
    return {"removed": removed, "operation": operation, "pools": pools}


async def replace_node(client_for: ClientFor) -> dict[str, Any]:
    async with client_for(ADMIN) as door:
        pending = await door.replace_node(CLUSTER_ID, NODE_NAME)
        operation = await door.wait_for_operation(CLUSTER_ID, target=NODE_NAME, poll_interval=30.0)
        nodes = await door.list_nodes(CLUSTER_ID, fresh=True)
    return {"pending": pending, "operation": operation, "nodes": nodes}


# --- every documented error status ---------------------------------------------------------------


async def error_400_unknown_tier(client_for: ClientFor) -> dict[str, Any]:
    async with client_for(ADMIN) as door:
        request = PublicNodePoolCreateRequest(name="batch", size="dks.nope.huge")
        return await _refusal(door.add_node_pool(CLUSTER_ID, request))


async def error_401_unknown_token(client_for: ClientFor) -> dict[str, Any]:
    async with client_for(UNKNOWN) as door:
        return await _refusal(door.list_node_pools(CLUSTER_ID))


async def error_402_credit(client_for: ClientFor) -> dict[str, Any]:
    async with client_for(ADMIN) as door:
        return await _refusal(door.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=10)))


async def error_403_member_mutating(client_for: ClientFor) -> dict[str, Any]:
    async with client_for(MEMBER) as door:
        return await _refusal(door.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=3)))


async def error_404_unknown_cluster(client_for: ClientFor) -> dict[str, Any]:
    async with client_for(ADMIN) as door:
        return await _refusal(door.get_cluster("00000000-0000-4000-8000-000000000000"))


async def error_409_last_pool(client_for: ClientFor) -> dict[str, Any]:
    async with client_for(ADMIN) as door:
        return await _refusal(door.remove_node_pool(CLUSTER_ID, "workers"))


async def error_422_empty_patch(client_for: ClientFor) -> dict[str, Any]:
    async with client_for(ADMIN) as door:
        return await _refusal(door.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest()))


async def error_503_inventory_down(client_for: ClientFor) -> dict[str, Any]:
    async with client_for(MEMBER) as door:
        return await _refusal(door.list_nodes(CLUSTER_ID))


FLOWS: tuple[Flow, ...] = (
    Flow("list_everything", list_everything),
    Flow("add_pool", add_pool),
    Flow("scale_pool", scale_pool),
    Flow("autoscale_pool", autoscale_pool),
    Flow("remove_pool", remove_pool),
    Flow("replace_node", replace_node),
    Flow("error_400_unknown_tier", error_400_unknown_tier),
    Flow("error_401_unknown_token", error_401_unknown_token),
    Flow(
        "error_402_credit",
        error_402_credit,
        setup=(AdminCall("PUT", "/_reference/organisations/payments", {"credit": 0}),),
    ),
    Flow("error_403_member_mutating", error_403_member_mutating),
    Flow("error_404_unknown_cluster", error_404_unknown_cluster),
    Flow("error_409_last_pool", error_409_last_pool),
    Flow("error_422_empty_patch", error_422_empty_patch),
    Flow(
        "error_503_inventory_down",
        error_503_inventory_down,
        setup=(AdminCall("PUT", "/_reference/inventory", {"available": False}),),
    ),
)


# --- vcr -----------------------------------------------------------------------------------------


def _to_replay_host(request: Any) -> Any:
    """Drop admin-plane calls; name the replay host instead of the recording server's port."""
    if "/_reference/" in request.uri:
        return None
    parsed = request.parsed_uri
    if parsed.netloc != "door.test":
        request = copy.deepcopy(request)
        request.uri = parsed._replace(scheme="http", netloc="door.test").geturl()
    return request


def _scrub_response(response: dict[str, Any]) -> dict[str, Any]:
    """Keep the word "Bearer" out of recordings (401 advice text, ``WWW-Authenticate``), so a plain
    search for it finds a leaked credential and nothing else."""
    headers = response["headers"]
    for name, values in headers.items():
        headers[name] = [value.replace("Bearer", AUTH_SCHEME_PLACEHOLDER) for value in values]
    body = response["body"]["string"]
    if isinstance(body, bytes) and b"Bearer" in body:
        body = body.replace(b"Bearer", AUTH_SCHEME_PLACEHOLDER.encode())
        response["body"]["string"] = body
        for name in headers:
            if name.lower() == "content-length":
                headers[name] = [str(len(body))]
    return response


def vcr_options() -> dict[str, Any]:
    """The cassette options shared by the recorder and the replay tests."""
    return {
        "serializer": "yaml",
        # host: the recording server's random port, and the URIs already name door.test
        "filter_headers": ["authorization", "host"],
        "before_record_request": _to_replay_host,
        "before_record_response": _scrub_response,
        "match_on": ["method", "scheme", "host", "port", "path", "query", "body"],
        "decode_compressed_response": True,
    }
