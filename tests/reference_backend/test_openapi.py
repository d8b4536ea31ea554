"""/openapi.json describes every public route with the real response models and problem+json errors."""

from __future__ import annotations

import httpx2
import pytest

pytestmark = pytest.mark.anyio

PUBLIC_ROUTES = {
    ("get", "/v1/public/machine-tiers", "MachineTierList"),
    ("get", "/v1/public/clusters", "ClusterList"),
    ("get", "/v1/public/clusters/{cluster_id}", "Cluster"),
    ("get", "/v1/public/clusters/{cluster_id}/state", "ClusterState"),
    ("get", "/v1/public/clusters/{cluster_id}/node-pools", "NodePoolList"),
    ("post", "/v1/public/clusters/{cluster_id}/node-pools", "Cluster"),
    ("patch", "/v1/public/clusters/{cluster_id}/node-pools/{pool_name}", "Cluster"),
    ("delete", "/v1/public/clusters/{cluster_id}/node-pools/{pool_name}", "Cluster"),
    ("get", "/v1/public/clusters/{cluster_id}/nodes", "NodeList"),
    ("get", "/v1/public/clusters/{cluster_id}/node-pools/{pool_name}/nodes", "NodeList"),
    ("delete", "/v1/public/clusters/{cluster_id}/nodes/{node_name}", "NodeDeletePending"),
}


async def test_every_public_route_is_described_with_its_model_and_problem_errors(door: httpx2.AsyncClient) -> None:
    schema = (await door.get("/openapi.json")).json()
    described = {
        (method, path)
        for path, operations in schema["paths"].items()
        if path.startswith("/v1/public")
        for method in operations
    }
    assert described == {(m, p) for m, p, _ in PUBLIC_ROUTES}
    for method, path, model in PUBLIC_ROUTES:
        responses = schema["paths"][path][method]["responses"]
        success = responses["202" if method in {"post", "patch", "delete"} else "200"]
        assert success["content"]["application/json"]["schema"]["$ref"] == f"#/components/schemas/{model}"
        errors = [code for code in responses if code.startswith("4") or code.startswith("5")]
        assert errors, f"{method} {path} documents no error"
        for code in errors:
            problem = responses[code]["content"]["application/problem+json"]["schema"]["$ref"]
            assert problem == "#/components/schemas/Problem"


async def test_the_request_bodies_and_the_problem_schema_are_components(door: httpx2.AsyncClient) -> None:
    schema = (await door.get("/openapi.json")).json()
    components = schema["components"]["schemas"]
    assert {"Problem", "FieldError", "PublicNodePoolCreateRequest", "PublicNodePoolPatchRequest"} <= set(components)
    assert components["PublicNodePoolCreateRequest"]["additionalProperties"] is False
    post = schema["paths"]["/v1/public/clusters/{cluster_id}/node-pools"]["post"]
    body_ref = post["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert body_ref == "#/components/schemas/PublicNodePoolCreateRequest"
    assert {"rule", "errors", "request_id"} <= set(components["Problem"]["properties"])
