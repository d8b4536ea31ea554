"""``/openapi.json``: FastAPI's generated schema, completed with the rules the routes check themselves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from backend_client import models, rules
from backend_client.models import PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from reference_backend.edge import PREFIX, backend_of, problem_responses
from reference_backend.errors import title_for


def request_body(schema: str) -> dict[str, Any]:
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


def install_openapi(app: FastAPI) -> None:
    """The generated schema plus the request models the routes parse themselves (to keep the order of checks).

    Built on first use and kept, unless the app now serves a world with another catalog.
    """
    built_for: list[list[str]] = []

    def openapi() -> dict[str, Any]:
        tiers = sorted(backend_of(app).catalog)
        if app.openapi_schema and built_for == [tiers]:
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
        _document_request_rules(schema, tiers)
        app.openapi_schema = schema
        built_for[:] = [tiers]
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
