"""Error bodies (problem+json decision) and the order of checks from docs/contracts.md.

Each order test breaks several rules at once and asserts the documented one wins.
"""

from __future__ import annotations

import httpx2
import pytest

from backend_client.models import Problem
from reference_backend import seed
from tests.reference_backend.rules_helpers import (
    ADMIN,
    MEMBER,
    OUTSIDER,
    PENDING_CID,
    UNKNOWN_CID,
    accepted_cluster,
    add_pool,
    cluster_url,
    delete_pool,
    fund,
    get_pool,
    nodes_url,
    patch_pool,
    pool_url,
    pools_url,
    problem,
    replace_node,
    set_credit,
    set_inventory,
    set_phase,
)

pytestmark = pytest.mark.anyio


# --- the problem+json decision (status codes at a glance) ----------------------------------------


async def test_errors_are_problem_json_with_type_naming_the_rule(door: httpx2.AsyncClient) -> None:
    """R-PATCH-02 as an example: type https://door.test/problems/R-PATCH-02, title, status, detail, rule."""
    r = await patch_pool(door, "workers", {})
    p = problem(r, 422, "R-PATCH-02")
    assert p.type == "https://door.test/problems/R-PATCH-02"
    assert p.detail


async def test_errors_repeat_the_request_id(door: httpx2.AsyncClient) -> None:
    """Every response carries X-Request-Id; an error body repeats it as request_id (R-AUTH-01 here)."""
    ok = await door.get(pools_url(), headers=MEMBER)
    assert ok.headers.get("x-request-id")
    r = await door.get(pools_url())
    p = problem(r, 401, "R-AUTH-01")
    assert p.request_id and p.request_id == r.headers.get("x-request-id")


async def test_422_errors_name_each_field_with_its_rule(door: httpx2.AsyncClient) -> None:
    """R-ADD-01 and R-ADD-04 together: errors[] names both `name` and `count`."""
    await fund(door)
    p = problem(await add_pool(door, {"name": "Bad_Name", "size": "dks.c5.xlarge", "count": 500}), 422, field="name")
    assert {"name", "count"} <= {e.field.split(".")[-1] for e in p.errors}, p.errors
    assert all(e.message for e in p.errors)


async def test_malformed_json_is_400_not_500(door: httpx2.AsyncClient) -> None:
    """Malformed JSON → 400 problem; never a 500 for bad input (R-PATCH-01 body)."""
    r = await door.patch(
        pool_url("workers"), content=b'{"count": 3', headers={**ADMIN, "Content-Type": "application/json"}
    )
    problem(r, 400)


@pytest.mark.parametrize("body", [[1, 2], "count", 3, None])
async def test_body_that_is_not_an_object_is_422_or_400(door: httpx2.AsyncClient, body: object) -> None:
    """A JSON body that is not an object is refused as bad input (R-PATCH-01), never with a 500."""
    r = await patch_pool(door, "workers", body)
    assert r.status_code in (400, 422), r.text
    assert r.headers["content-type"].startswith("application/problem+json")


async def test_body_over_64_kib_is_413(door: httpx2.AsyncClient) -> None:
    """Bodies are capped at 64 KiB → 413 problem (R-ADD-07 labels as the carrier)."""
    await fund(door)
    labels = {f"k{i}": "v" * 100 for i in range(800)}
    problem(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge", "labels": labels}), 413)
    assert await get_pool(door, "batch") is None


async def test_503_carries_retry_after(door: httpx2.AsyncClient) -> None:
    """R-NODE-05: a 503 is a problem with Retry-After."""
    await set_inventory(door, False)
    r = await door.get(nodes_url(), headers=ADMIN)
    problem(r, 503, "R-NODE-05")
    assert int(r.headers["retry-after"]) > 0


# --- order of checks -----------------------------------------------------------------------------


async def test_order_401_beats_404_unknown_cluster(door: httpx2.AsyncClient) -> None:
    """Order 2 before 3: no token on an unknown cluster → 401 (R-AUTH-01), not 404 (R-AUTH-04)."""
    problem(await door.patch(pool_url("workers", UNKNOWN_CID), json={}), 401, "R-AUTH-01")


async def test_order_403_non_member_beats_a_bad_body(door: httpx2.AsyncClient) -> None:
    """Order 3 before 5: an outsider's empty PATCH on an existing cluster → 403 (R-AUTH-02), not 422."""
    problem(await patch_pool(door, "workers", {}, headers=OUTSIDER), 403, {"R-AUTH-02", "R-AUTH-04"})


async def test_order_404_unknown_cluster_beats_the_role(door: httpx2.AsyncClient) -> None:
    """Order 3 before 4: a member mutating an unknown cluster → 404 (R-AUTH-04), not 403 (R-AUTH-03)."""
    problem(await patch_pool(door, "workers", {"count": 3}, cid=UNKNOWN_CID, headers=MEMBER), 404, "R-AUTH-04")


async def test_order_403_role_beats_phase_and_unknown_pool(door: httpx2.AsyncClient) -> None:
    """Order 4 before 7 and 8: a member PATCHing an unknown pool on a NodesReady cluster → 403 (R-AUTH-03)."""
    await set_phase(door, "NodesReady")
    problem(await patch_pool(door, "nope", {"count": 3}, headers=MEMBER), 403, "R-AUTH-03")


async def test_order_422_shape_beats_409_phase(door: httpx2.AsyncClient) -> None:
    """Order 5 before 7: an empty PATCH on a cluster that is not Provisioned → 422 (R-PATCH-02)."""
    await set_phase(door, "NodesReady")
    problem(await patch_pool(door, "workers", {}), 422, "R-PATCH-02")
    problem(await patch_pool(door, "workers", {"size": "dks.m5.xlarge"}), 422, "R-PATCH-01", field="size")


async def test_order_422_name_beats_400_unknown_tier(door: httpx2.AsyncClient) -> None:
    """Order 5: shape (R-ADD-01) before the tier lookup (R-ADD-03): bad name + unknown tier → 422."""
    await fund(door)
    problem(await add_pool(door, {"name": "Bad_Name", "size": "dks.z9.mega"}), 422, "R-ADD-01", field="name")


async def test_order_400_unknown_tier_beats_phase_and_name_clash(door: httpx2.AsyncClient) -> None:
    """Order 5 before 7 and 11: unknown tier named `workers` on a NodesReady cluster → 400 (R-ADD-03)."""
    await set_phase(door, "NodesReady")
    problem(await add_pool(door, {"name": "workers", "size": "dks.z9.mega"}), 400, "R-ADD-03")


async def test_order_400_bad_node_name_beats_phase(door: httpx2.AsyncClient) -> None:
    """Order 5 before 7: a bad node name on a NodesReady cluster → 400 (R-RNODE-03)."""
    problem(await replace_node(door, "Bad_Node", cid=PENDING_CID), 400, "R-RNODE-03")


async def test_order_idempotent_replay_beats_phase(door: httpx2.AsyncClient) -> None:
    """Order 6 before 7: a replay (R-PATCH-09) is answered even after the cluster left Provisioned."""
    await fund(door)
    headers = {**ADMIN, "Idempotency-Key": "card-order-1"}
    first = await patch_pool(door, "workers", {"count": 3}, headers=headers)
    assert first.status_code == 202, first.text
    await set_phase(door, "Deprovisioning")
    again = await patch_pool(door, "workers", {"count": 3}, headers=headers)
    assert again.status_code == 202, again.text
    assert again.json() == first.json()
    assert again.headers.get("idempotent-replayed") == "true"


async def test_order_key_reuse_beats_phase(door: httpx2.AsyncClient) -> None:
    """Order 6 before 7: same key + other body on a cluster no longer Provisioned → 422 (R-PATCH-09)."""
    await fund(door)
    headers = {**ADMIN, "Idempotency-Key": "card-order-2"}
    accepted_cluster(await patch_pool(door, "workers", {"count": 3}, headers=headers))
    await set_phase(door, "NodesReady")
    problem(await patch_pool(door, "workers", {"count": 4}, headers=headers), 422, "R-PATCH-09")


async def test_order_409_phase_beats_404_unknown_pool(door: httpx2.AsyncClient) -> None:
    """Order 7 before 8: PATCH and DELETE of an unknown pool on a NodesReady cluster → 409 (R-PHASE-01)."""
    await set_phase(door, "NodesReady")
    problem(await patch_pool(door, "nope", {"count": 3}), 409, "R-PHASE-01")
    problem(await delete_pool(door, "nope"), 409, "R-PHASE-01")


async def test_order_409_phase_beats_merged_autoscaling_and_credit(door: httpx2.AsyncClient) -> None:
    """Order 7 before 10 and 12: an invalid merged pool with no credit on a NodesReady cluster → 409 (R-PHASE-01)."""
    await set_credit(door, 0)
    await set_phase(door, "NodesReady")
    problem(await patch_pool(door, "workers", {"auto_scale": True}), 409, "R-PHASE-01")
    problem(await patch_pool(door, "workers", {"count": 9}), 409, "R-PHASE-01")


async def test_order_node_read_409_phase_beats_404_unknown_pool(door: httpx2.AsyncClient) -> None:
    """Order 7 before 8: node read of an unknown pool on a NodesReady cluster → 409 (R-NODE-05)."""
    await set_phase(door, "NodesReady")
    problem(await door.get(nodes_url(pool="nope"), headers=ADMIN), 409, {"R-NODE-05", "R-PHASE-02"})


async def test_order_node_read_404_unknown_pool_beats_503(door: httpx2.AsyncClient) -> None:
    """Order 8 before 13: inventory down + unknown pool → 404 (R-NODE-05)."""
    await set_inventory(door, False)
    r = await door.get(nodes_url(pool="nope"), headers=ADMIN)
    problem(r, 404, "R-NODE-05")


async def test_order_node_read_409_phase_beats_503(door: httpx2.AsyncClient) -> None:
    """Order 7 before 13: inventory down on a NodesReady cluster → 409 (R-NODE-05), not 503."""
    await set_inventory(door, False)
    await set_phase(door, "NodesReady")
    problem(await door.get(nodes_url(), headers=ADMIN), 409, {"R-NODE-05", "R-PHASE-02"})


async def test_order_404_unknown_pool_beats_merged_validation(door: httpx2.AsyncClient) -> None:
    """Order 8 before 10: `auto_scale: true` without max on an unknown pool → 404 (R-PATCH-07)."""
    problem(await patch_pool(door, "nope", {"auto_scale": True}), 404, "R-PATCH-07")


async def test_order_409_operation_beats_merged_validation(door: httpx2.AsyncClient) -> None:
    """Order 9 before 10: while workers scale, `count: 0` (R-PATCH-04) → 409 (R-OP-01)."""
    await fund(door)
    accepted_cluster(await patch_pool(door, "workers", {"count": 3}))
    problem(await patch_pool(door, "workers", {"count": 0}), 409, "R-OP-01")


async def test_order_409_operation_beats_last_pool(door: httpx2.AsyncClient) -> None:
    """Order 9 before 11: deleting the only pool while it scales → 409 (R-OP-01), not R-DEL-01."""
    await fund(door)
    accepted_cluster(await patch_pool(door, "workers", {"count": 3}))
    problem(await delete_pool(door, "workers"), 409, "R-OP-01")


async def test_order_422_autoscaling_beats_409_name_clash(door: httpx2.AsyncClient) -> None:
    """Order 10 before 11: adding `workers` with auto_scale and no max → 422 (R-ADD-06), not 409 (R-ADD-02)."""
    await fund(door)
    problem(await add_pool(door, {"name": "workers", "size": "dks.c5.xlarge", "auto_scale": True}), 422, "R-ADD-06")
    problem(await add_pool(door, {"name": "workers", "size": "dks.c5.xlarge", "count": 0}), 422, "R-ADD-05")


async def test_order_422_merged_pool_beats_402_credit(door: httpx2.AsyncClient) -> None:
    """Order 10 before 12: an invalid autoscaling patch with no credit → 422 (R-PATCH-04), not 402."""
    await set_credit(door, 0)
    problem(
        await patch_pool(door, "workers", {"auto_scale": True, "min_nodes": 3, "max_nodes": 9, "count": 10}),
        422,
        "R-PATCH-04",
    )


async def test_order_409_name_clash_beats_402_credit(door: httpx2.AsyncClient) -> None:
    """Order 11 before 12: adding `workers` again with no credit → 409 (R-ADD-02), not 402."""
    await set_credit(door, 0)
    problem(await add_pool(door, {"name": "workers", "size": "dks.c5.xlarge", "count": 5}), 409, "R-ADD-02")


async def test_order_402_credit_is_the_last_refusal(door: httpx2.AsyncClient) -> None:
    """Order 12: a valid add with no credit → 402 (R-CREDIT-01)."""
    await set_credit(door, 0)
    p = problem(await add_pool(door, {"name": "batch", "size": "dks.c5.xlarge"}), 402, {"R-CREDIT-01", "R-ADD-08"})
    assert isinstance(p, Problem)


async def test_order_member_may_still_read_while_mutations_are_refused(door: httpx2.AsyncClient) -> None:
    """R-AUTH-02 and R-AUTH-03 together: the same member token reads 200 and mutates 403."""
    assert (await door.get(cluster_url(), headers=MEMBER)).status_code == 200
    problem(await delete_pool(door, "workers", headers=MEMBER), 403, "R-AUTH-03")
    problem(await replace_node(door, seed.DEMO_NODE_NAME, headers=MEMBER), 403, "R-AUTH-03")
