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


async def test_the_schema_says_what_the_routes_accept(door: httpx2.AsyncClient) -> None:
    """R-ADD-01/04, R-PATCH-01/02/06, R-RNODE-03 are in the schema: a generated client or fuzzer
    built from it no longer sends `{}` or `{"count": null}` as a "valid" patch."""
    schema = (await door.get("/openapi.json")).json()
    components = schema["components"]["schemas"]
    create = components["PublicNodePoolCreateRequest"]["properties"]
    assert create["name"]["pattern"] == "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
    assert (create["count"]["minimum"], create["count"]["maximum"]) == (0, 200)
    patch = components["PublicNodePoolPatchRequest"]
    assert patch["minProperties"] == 1
    for field in ("count", "auto_scale", "labels", "tags"):
        assert "anyOf" not in patch["properties"][field] and "type" in patch["properties"][field], field
    assert {"type": "null"} in patch["properties"]["max_nodes"]["anyOf"]  # null clears it (R-PATCH-06)
    node = schema["paths"]["/v1/public/clusters/{cluster_id}/nodes/{node_name}"]["delete"]
    (name,) = [p for p in node["parameters"] if p["name"] == "node_name"]
    assert name["schema"]["pattern"] == "^[a-z0-9][-a-z0-9.]{0,252}[a-z0-9]$"


async def test_a_patch_with_a_null_count_is_refused_as_the_schema_says(door: httpx2.AsyncClient) -> None:
    response = await door.patch(
        "/v1/public/clusters/3f9c1a2e-7b4d-4c58-9e21-5d6f8a0b1c2d/node-pools/workers",
        headers={"Authorization": "Bearer demo-admin-token"},
        json={"count": None},
    )
    assert (response.status_code, response.json()["rule"]) == (422, "R-PATCH-01")


async def test_the_schema_states_the_tiers_the_conditional_rules_and_the_bearer_token(
    door: httpx2.AsyncClient,
) -> None:
    """R-ADD-03 (size is a catalog tier id), R-ADD-05 / R-ADD-06 as if/then, R-AUTH-01 as a bearer
    scheme; the cross-field comparisons JSON Schema cannot state are named in the description."""
    schema = (await door.get("/openapi.json")).json()
    create = schema["components"]["schemas"]["PublicNodePoolCreateRequest"]
    tiers = (await door.get("/v1/public/machine-tiers", headers={"Authorization": "Bearer demo-admin-token"})).json()
    assert create["properties"]["size"]["enum"] == sorted(t["id"] for t in tiers["items"])
    conditions = {(tuple(c["if"]["required"]), tuple(c["then"]["required"])) for c in create["allOf"]}
    assert conditions == {(("count",), ("auto_scale",)), (("auto_scale",), ("max_nodes",))}
    assert "R-ADD-06" in create["description"] and "R-PATCH-04" in create["description"]
    assert schema["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "R-AUTH-01",
    }
    public = [op for path, ops in schema["paths"].items() if path.startswith("/v1/public") for op in ops.values()]
    assert all(op["security"] == [{"bearer": []}] for op in public)
