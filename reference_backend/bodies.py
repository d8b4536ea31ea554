"""Step 5 of the order of checks: the body's bytes, then its JSON, then the request model and its rules.

A route reads the body itself (``read_json_body``) rather than through FastAPI, so that the token,
the cluster and the role are checked before a byte of it, and every refusal names its rule.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from fastapi import Request
from pydantic import ValidationError

from backend_client import models, rules
from backend_client.models import FieldError, MachineTier, PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from reference_backend import idempotency
from reference_backend.errors import Refusal

MAX_BODY_BYTES: Final = 64 * 1024


def bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


async def read_json_body(request: Request, limit: int = MAX_BODY_BYTES) -> tuple[Any, str]:
    """The parsed body (``None`` when empty) and its idempotency fingerprint.

    Raises 413 beyond ``limit`` bytes (64 KiB; a snapshot's restore allows more), 415 when a body is
    sent with a Content-Type that is not JSON, and 400 when it is not JSON, or when a string in it is
    not Unicode (an unpaired surrogate escape such as ``"\\ud800"``, which json accepts but no answer
    could encode).
    """
    too_large = Refusal(413, f"the request body exceeds {limit} bytes. Send a smaller body.")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
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


def parse_create(body: Any, catalog: Mapping[str, MachineTier]) -> PublicNodePoolCreateRequest:
    """Step 5 for ``POST node-pools``: shape (422, R-ADD-01/04/06/07), then the tier (400, R-ADD-03)."""
    try:
        request = PublicNodePoolCreateRequest.model_validate(_object(body))
    except ValidationError as error:
        raise Refusal.of(_type_violations(error, _CREATE_FIELD_RULES, "R-ADD-07")) from None
    violations = rules.create_shape_violations(request)
    if violations:
        raise Refusal.of(violations)
    tier = rules.tier_violation(request.size, catalog)
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
