"""/openapi.json describes exactly what the reference backend accepts and answers (schemathesis).

For every public operation, schemathesis generates requests the published schema calls valid
(positive data, derandomized, a bounded number per operation) and sends them in-process to the
ASGI app. Each answer must be no server error, must accept the request (2xx, or a 401/403/404/409
the schema documents: e.g. R-DEL-01 for the last pool), and must match the documented response
schema, status and content type.

The only refusals of valid-looking data allowed are the cross-field rules no JSON Schema can
state (``reference_backend.app.CROSS_FIELD_RULES``: comparisons between two fields, or with the
stored pool). They are re-derived here from the request and the stored pool, independently of
``backend_client.rules``, so a 422 is forgiven only when the rule it names really applies.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from backend_client.models import NodePool, PublicNodePoolCreateRequest
from reference_backend import seed
from reference_backend.app import create_app
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock

EXAMPLES_PER_OPERATION = 200
CREDIT = 1e12  # R-CREDIT-01 (402) is about money, not about the shape of a request
ADMIN = {"Authorization": f"Bearer {seed.DEMO_ADMIN_TOKEN}"}
BOUNDS = ("count", "auto_scale", "min_nodes", "max_nodes")


def _breaks_a_cross_field_rule(method: str, body: Any, stored: NodePool, problem: dict[str, Any]) -> bool:
    """Whether a 422 is a documented cross-field refusal: R-ADD-06 on a create, R-PATCH-04 on a patch
    merged with the stored pool (R-PATCH-03); re-derived here, not through ``backend_client.rules``."""
    if method == "POST":
        rule, before = "R-ADD-06", {"count": 1, "auto_scale": False, "min_nodes": None, "max_nodes": None}
    elif method == "PATCH":
        rule, before = "R-PATCH-04", {name: getattr(stored, name) for name in BOUNDS}
    else:
        return False
    if problem.get("rule") != rule or not isinstance(body, dict):
        return False
    merged = before | {name: body[name] for name in BOUNDS if name in body}
    if not merged["auto_scale"]:
        return method == "PATCH" and merged["count"] == 0  # on a create the schema states R-ADD-05
    low = 1 if merged["min_nodes"] is None else merged["min_nodes"]
    high = merged["max_nodes"]
    if high is None:
        return method == "PATCH"  # on a create the schema states "auto_scale=true needs max_nodes"
    return bool(low > high or not low <= merged["count"] <= high)


def test_schemathesis_finds_no_server_error_no_rejected_valid_request_and_no_schema_violation() -> None:
    """R-ADD-01/03/04/05/06, R-PATCH-01/02/06, R-RNODE-03 as published in /openapi.json: what the
    schema calls valid is accepted (whole-number floats such as `170.0` included), and every answer
    is the documented one."""
    # Imported here: schemathesis and hypothesis take seconds to import (and to assertion-rewrite, as
    # pytest plugin distributions), which the test process that does not run this test is spared.
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from schemathesis import GenerationMode
    from schemathesis.errors import FailureGroup
    from schemathesis.openapi.checks import RejectedPositiveData

    backend = ReferenceBackend(ManualClock())
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(backend))
    failures: list[str] = []
    examples: Counter[str] = Counter()
    statuses: Counter[tuple[str, int]] = Counter()
    started = time.monotonic()

    for result in schema.get_all_operations():
        operation = result.ok()
        fixed = {"cluster_id": seed.DEMO_CLUSTER_ID}
        if "{pool_name}" in operation.path:
            fixed["pool_name"] = seed.DEMO_POOL_NAME
        strategy = operation.as_strategy(GenerationMode.POSITIVE, path_parameters=fixed, headers=ADMIN)

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],  # no shrinking: every failure is collected, not raised
            suppress_health_check=list(HealthCheck),
            deadline=None,
        )
        @given(case=strategy)
        def exercise(case: schemathesis.Case) -> None:
            backend.reset("demo")
            backend.set_credit(seed.DEMO_ORGANISATION, CREDIT)
            cluster = backend.cluster(seed.DEMO_CLUSTER_ID)
            assert cluster is not None
            stored = next(p for p in cluster.pools.values() if p.name == seed.DEMO_POOL_NAME).to_model()
            # A second pool, so that deleting `workers` is not always R-DEL-01 (409).
            backend.install_pool(cluster, PublicNodePoolCreateRequest(name="spare", size="dks.c5.large"))
            response = case.call(headers=ADMIN)
            examples[case.operation.label] += 1
            statuses[(case.operation.label, response.status_code)] += 1
            try:
                case.validate_response(response, headers=ADMIN)
            except FailureGroup as group:
                for failure in group.exceptions:
                    if (
                        isinstance(failure, RejectedPositiveData)
                        and response.status_code == 422
                        and _breaks_a_cross_field_rule(case.method, case.body, stored, response.json())
                    ):
                        continue
                    failures.append(
                        f"{case.operation.label} {case.body!r} → {response.status_code} {response.text[:300]}: "
                        f"{type(failure).__name__}: {failure.title}"
                    )

        exercise()

    elapsed = time.monotonic() - started
    assert failures == [], "\n".join(failures[:20])
    assert len(examples) == 11, examples  # every public operation was exercised
    # The generated bodies reached the rules and were accepted, not all stopped at one refusal.
    accepted = {label for (label, status), _ in statuses.items() if 200 <= status < 300}
    assert {
        "POST /v1/public/clusters/{cluster_id}/node-pools",
        "PATCH /v1/public/clusters/{cluster_id}/node-pools/{pool_name}",
        "DELETE /v1/public/clusters/{cluster_id}/node-pools/{pool_name}",
        "DELETE /v1/public/clusters/{cluster_id}/nodes/{node_name}",
    } <= accepted, statuses
    assert elapsed < 60, f"{sum(examples.values())} examples took {elapsed:.1f} s"
