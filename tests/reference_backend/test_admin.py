"""The admin plane (`/_reference/…`): guarded by its token, absent without it, every route, fault rules."""

from __future__ import annotations

import httpx2
import pytest

from reference_backend import seed
from reference_backend.app import create_app
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.conftest import ADMIN_TOKEN, BASE_URL, auth

pytestmark = pytest.mark.anyio

REF = auth(ADMIN_TOKEN)
ADMIN = auth(seed.DEMO_ADMIN_TOKEN)
CLUSTER = f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}"
PATCH_ROUTE = "PATCH /v1/public/clusters/{cluster_id}/node-pools/{pool_name}"


async def test_the_admin_plane_is_absent_without_an_admin_token(backend: ReferenceBackend) -> None:
    app = create_app(backend)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE_URL) as client:
        assert (await client.get("/_reference/clock", headers=REF)).status_code == 404
        assert (await client.post("/_reference/reset", headers=REF, json={})).status_code == 404


@pytest.mark.parametrize("headers", [{}, auth("wrong"), {"Authorization": ADMIN_TOKEN}, ADMIN])
async def test_the_admin_plane_wants_its_own_token(door: httpx2.AsyncClient, headers: dict[str, str]) -> None:
    assert (await door.post("/_reference/clock/advance", headers=headers, json={"seconds": 5})).status_code == 401
    assert (await door.get("/_reference/clock", headers=REF)).json()["now"] == "2026-10-01T12:00:00Z"


async def test_the_clock_routes_read_advance_and_set_forward_only(door: httpx2.AsyncClient, clock: ManualClock) -> None:
    assert (await door.get("/_reference/clock", headers=REF)).json() == {
        "now": "2026-10-01T12:00:00Z",
        "mode": "manual",
        "time_scale": 0.0,
    }
    advanced = await door.post("/_reference/clock/advance", headers=REF, json={"seconds": 90.5})
    assert advanced.json()["now"] == "2026-10-01T12:01:30.500000Z"
    assert clock.now().isoformat() == "2026-10-01T12:01:30.500000+00:00"
    assert (await door.post("/_reference/clock/advance", headers=REF, json={"seconds": -1})).status_code == 422
    moved = await door.put("/_reference/clock", headers=REF, json={"now": "2026-10-02T00:00:00Z"})
    assert moved.json()["now"] == "2026-10-02T00:00:00Z"
    backwards = await door.put("/_reference/clock", headers=REF, json={"now": "2026-10-01T00:00:00Z"})
    assert backwards.status_code == 409
    assert backwards.headers["content-type"] == "application/problem+json"


async def test_advancing_the_clock_moves_the_world(door: httpx2.AsyncClient) -> None:
    """R-OP-03 on the admin clock: an operation finishes when the clock is advanced past its end."""
    await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"count": 3})
    await door.post("/_reference/clock/advance", headers=REF, json={"seconds": 120})
    state = (await door.get(f"{CLUSTER}/state", headers=ADMIN)).json()
    assert state["operations"][0]["status"] == "succeeded"


async def test_reset_restores_the_seed(door: httpx2.AsyncClient) -> None:
    await door.post(f"{CLUSTER}/node-pools", headers=ADMIN, json={"name": "batch", "size": "dks.c5.large"})
    assert (await door.post("/_reference/reset", headers=REF, json={"seed": "demo"})).json() == {"ok": True}
    assert (await door.get(f"{CLUSTER}/node-pools", headers=ADMIN)).json()["total"] == 1
    assert (await door.get(f"{CLUSTER}/state", headers=ADMIN)).json()["operations"] == []


async def test_the_empty_seed_has_no_tokens_until_the_admin_plane_adds_them(door: httpx2.AsyncClient) -> None:
    """Decision: `empty` is the catalog only; every public request is 401 (R-AUTH-01) until tokens are added."""
    await door.post("/_reference/reset", headers=REF, json={"seed": "empty"})
    assert (await door.get("/v1/public/clusters", headers=ADMIN)).status_code == 401
    token = {"organisation": "ops", "role": "super_admin", "user": "olga"}
    assert (await door.put("/_reference/tokens/ops-token", headers=REF, json=token)).json() == {
        "user": "olga",
        "organisation": "ops",
        "role": "super_admin",
    }
    listed = await door.get("/v1/public/clusters", headers=auth("ops-token"))
    assert (listed.status_code, listed.json()["total"]) == (200, 0)
    assert len((await door.get("/v1/public/machine-tiers", headers=auth("ops-token"))).json()["items"]) == 6


async def test_a_deleted_token_is_401(door: httpx2.AsyncClient) -> None:
    """R-AUTH-01."""
    assert (await door.delete(f"/_reference/tokens/{seed.DEMO_MEMBER_TOKEN}", headers=REF)).status_code == 204
    assert (await door.get(CLUSTER, headers=auth(seed.DEMO_MEMBER_TOKEN))).status_code == 401


async def test_an_admin_cluster_is_born_running_and_listed(door: httpx2.AsyncClient) -> None:
    body = {
        "name": "bench",
        "organisation": "payments",
        "id": "bench-1",
        "node_pools": [{"name": "a", "size": "dks.m5.large", "count": 3}],
    }
    created = await door.post("/_reference/clusters", headers=REF, json=body)
    assert created.status_code == 201
    assert (created.json()["id"], created.json()["total_vcpu"]) == ("bench-1", 6)
    assert (await door.post("/_reference/clusters", headers=REF, json=body)).status_code == 409
    await door.get("/v1/public/clusters/bench-1/nodes", headers=ADMIN)
    await door.post("/_reference/clock/advance", headers=REF, json={"seconds": 2})
    nodes = (await door.get("/v1/public/clusters/bench-1/nodes", headers=ADMIN)).json()["items"]
    assert [n["status"] for n in nodes] == ["Running"] * 3
    assert all(n["name"].startswith("bench-a-") for n in nodes)
    listed = (await door.get("/v1/public/clusters", headers=ADMIN, params={"name": "bench"})).json()
    assert [c["id"] for c in listed["items"]] == ["bench-1"]


async def test_an_admin_cluster_with_an_invalid_pool_is_422(door: httpx2.AsyncClient) -> None:
    body = {"name": "x", "organisation": "payments", "node_pools": [{"name": "a", "size": "dks.m5.large", "count": 0}]}
    response = await door.post("/_reference/clusters", headers=REF, json=body)
    assert (response.status_code, response.json()["rule"]) == (422, "R-ADD-05")


async def test_the_phase_route_gates_mutations(door: httpx2.AsyncClient) -> None:
    """R-PHASE-01: after the admin plane sets NodesReady, mutations are 409; Deprovisioned is 404 (R-AUTH-04)."""
    phase = f"/_reference/clusters/{seed.DEMO_CLUSTER_ID}/phase"
    assert (await door.put(phase, headers=REF, json={"phase": "NodesReady"})).json()["phase"] == "NodesReady"
    assert (await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"count": 3})).status_code == 409
    await door.put(phase, headers=REF, json={"phase": "Deprovisioned"})
    assert (await door.get(CLUSTER, headers=ADMIN)).status_code == 404
    assert (
        await door.put("/_reference/clusters/nope/phase", headers=REF, json={"phase": "Provisioned"})
    ).status_code == 404


async def test_the_credit_route_gates_raises(door: httpx2.AsyncClient) -> None:
    """R-CREDIT-01: with 1.0 of credit adding a node (0.17/h × 24 h = 4.08) is 402."""
    credited = await door.put("/_reference/organisations/payments", headers=REF, json={"credit": 1.0})
    assert credited.json() == {"name": "payments", "credit": 1.0}
    response = await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"count": 3})
    assert (response.status_code, response.json()["rule"]) == (402, "R-CREDIT-01")


async def test_a_fault_with_a_count_fires_that_many_times(door: httpx2.AsyncClient) -> None:
    fault = {"route": "GET /v1/public/clusters/{cluster_id}", "status": 503, "count": 2, "retry_after": 7}
    created = await door.post("/_reference/faults", headers=REF, json=fault)
    assert created.status_code == 201
    assert created.json()["id"]
    assert [f["remaining"] for f in (await door.get("/_reference/faults", headers=REF)).json()] == [2]
    first = await door.get(CLUSTER, headers=ADMIN)
    assert (first.status_code, first.headers["retry-after"]) == (503, "7")
    assert (await door.get(f"{CLUSTER}/node-pools", headers=ADMIN)).status_code == 200  # another route
    assert (await door.get(CLUSTER, headers=ADMIN)).status_code == 503
    assert (await door.get(CLUSTER, headers=ADMIN)).status_code == 200


async def test_a_fault_without_a_count_fires_until_removed(door: httpx2.AsyncClient) -> None:
    await door.post("/_reference/faults", headers=REF, json={"route": "*", "status": 500, "count": None})
    assert [(await door.get(CLUSTER, headers=ADMIN)).status_code for _ in range(3)] == [500, 500, 500]
    assert (await door.delete("/_reference/faults", headers=REF)).status_code == 204
    assert (await door.get(CLUSTER, headers=ADMIN)).status_code == 200
    assert (await door.get("/_reference/faults", headers=REF)).json() == []


async def test_a_fault_with_a_probability_is_reproducible_from_its_seed(door: httpx2.AsyncClient) -> None:
    async def run() -> list[int]:
        await door.delete("/_reference/faults", headers=REF)
        fault = {"route": "*", "status": 503, "count": None, "probability": 0.5, "seed": 42}
        await door.post("/_reference/faults", headers=REF, json=fault)
        return [(await door.get(CLUSTER, headers=ADMIN)).status_code for _ in range(20)]

    first, second = await run(), await run()
    assert first == second
    assert set(first) == {200, 503}


async def test_a_fault_after_lets_the_change_happen_and_loses_the_answer(door: httpx2.AsyncClient) -> None:
    """when=after: the pool is scaled, the answer is replaced; a retry with the same key replays the 202."""
    await door.post("/_reference/faults", headers=REF, json={"route": PATCH_ROUTE, "status": 502, "when": "after"})
    keyed = ADMIN | {"Idempotency-Key": "lost"}
    lost = await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed, json={"count": 3})
    assert lost.status_code == 502
    pools = (await door.get(f"{CLUSTER}/node-pools", headers=ADMIN)).json()["items"]
    assert pools[0]["count"] == 3
    retry = await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed, json={"count": 3})
    assert (retry.status_code, retry.headers["idempotent-replayed"]) == (202, "true")


async def test_a_fault_with_headers_adds_those_lines_to_its_routes_answers_as_a_proxy_would(
    door: httpx2.AsyncClient,
) -> None:
    """status null: Door's own answer, with a second ``Date`` line (one without a zone) after its own."""
    fault = {
        "route": "GET /v1/public/clusters/{cluster_id}/nodes",
        "status": None,
        "count": None,
        "headers": {"Date": "Thu, 01 Oct 2026 12:00:00", "Via": "1.1 proxy"},
    }
    assert (await door.post("/_reference/faults", headers=REF, json=fault)).status_code == 201
    first = await door.get(f"{CLUSTER}/nodes", headers=ADMIN)
    second = await door.get(f"{CLUSTER}/nodes", headers=ADMIN)
    other = await door.get(CLUSTER, headers=ADMIN)
    assert (first.status_code, first.json()["cluster_id"]) == (200, seed.DEMO_CLUSTER_ID)
    assert first.headers.get_list("date") == second.headers.get_list("date") == ["Thu, 01 Oct 2026 12:00:00"]
    assert first.headers["via"] == "1.1 proxy" and first.headers["x-request-id"]
    assert "date" not in other.headers and "via" not in other.headers  # another route: untouched
    # a refusal carries them too
    await door.post("/_reference/faults", headers=REF, json={"status": 503, "headers": {"Retry-After": "soon"}})
    refused = await door.get(CLUSTER, headers=ADMIN)
    assert (refused.status_code, refused.headers["retry-after"]) == (503, "soon")


@pytest.mark.parametrize(
    "headers",
    [{"Date": "a\r\nSet-Cookie: x=1"}, {"Content-Length": "5"}, {"transfer-encoding": "chunked"}, {"Bad Name": "x"}],
)
async def test_a_fault_cannot_add_a_line_that_splits_or_reframes_the_answer(
    door: httpx2.AsyncClient, headers: dict[str, str]
) -> None:
    refused = await door.post("/_reference/faults", headers=REF, json={"route": "*", "headers": headers})
    assert refused.status_code == 422
    assert (await door.get("/_reference/faults", headers=REF)).json() == []


async def test_a_fault_with_an_invalid_route_is_422(door: httpx2.AsyncClient) -> None:
    assert (await door.post("/_reference/faults", headers=REF, json={"route": "nonsense"})).status_code == 422
    assert (await door.post("/_reference/faults", headers=REF, json={"route": "*", "extra": 1})).status_code == 422


async def test_the_admin_plane_is_never_faulted(door: httpx2.AsyncClient) -> None:
    await door.post("/_reference/faults", headers=REF, json={"route": "*", "status": 503, "count": None})
    assert (await door.get("/_reference/clock", headers=REF)).status_code == 200
    assert (await door.delete("/_reference/faults", headers=REF)).status_code == 204


@pytest.mark.parametrize("seconds", [1e308, 1e15])
async def test_advancing_the_clock_beyond_its_range_is_422_and_leaves_it_alone(
    door: httpx2.AsyncClient, seconds: float
) -> None:
    """A datetime cannot hold the year 10,000: the admin plane refuses instead of failing with a 500."""
    response = await door.post("/_reference/clock/advance", headers=REF, json={"seconds": seconds})
    assert (response.status_code, response.headers["content-type"]) == (422, "application/problem+json")
    assert (await door.get("/_reference/clock", headers=REF)).json()["now"] == "2026-10-01T12:00:00Z"
    assert (await door.get(CLUSTER, headers=ADMIN)).status_code == 200


async def test_setting_the_clock_near_the_end_of_time_is_409_so_the_world_keeps_working(
    door: httpx2.AsyncClient,
) -> None:
    """Every simulated duration is added to the clock: one at 9999-12-31 would make every change a 500."""
    far = await door.put("/_reference/clock", headers=REF, json={"now": "9999-12-31T00:00:00Z"})
    assert far.status_code == 409
    assert (await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"count": 3})).status_code == 202


PROBLEM = "application/problem+json"


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/_reference/clusters", b'{"name": "x\\ud800", "organisation": "payments"}'),
        ("/_reference/tokens/t1", b'{"user": "u\\udc00", "organisation": "payments", "role": "member"}'),
        ("/_reference/faults", b'{"route": "GET /v1/public/\\ud800", "status": 503}'),
    ],
)
async def test_an_unpaired_surrogate_in_an_admin_body_is_400_and_never_poisons_the_world(
    door: httpx2.AsyncClient, route: str, body: bytes
) -> None:
    """Accepted, such a string made the admin answer and then every read of the world a 500."""
    method = door.post if route in ("/_reference/clusters", "/_reference/faults") else door.put
    headers = {**REF, "Content-Type": "application/json"}
    response = await method(route, headers=headers, content=body)
    assert (response.status_code, response.headers["content-type"]) == (400, PROBLEM)
    assert "surrogate" in response.json()["detail"]
    assert (await door.get("/v1/public/clusters", headers=ADMIN)).status_code == 200
    assert (await door.get("/_reference/faults", headers=REF)).status_code == 200


async def test_the_admin_token_is_checked_before_the_body(door: httpx2.AsyncClient) -> None:
    """Order of checks on the admin plane too: no token is 401 whatever the body; bad JSON is 400."""
    headers = {"Content-Type": "application/json"}
    anonymous = await door.post("/_reference/clock/advance", headers=headers, content=b"{bad")
    assert (anonymous.status_code, anonymous.headers["content-type"]) == (401, PROBLEM)
    malformed = await door.post("/_reference/clock/advance", headers={**REF, **headers}, content=b"{bad")
    assert (malformed.status_code, malformed.headers["content-type"]) == (400, PROBLEM)
    huge = await door.post("/_reference/clusters", headers={**REF, **headers}, content=b" " * (65 * 1024) + b"{}")
    assert (huge.status_code, huge.headers["content-type"]) == (413, PROBLEM)
    assert (await door.post("/_reference/clock/advance", headers=REF, json={"seconds": 1})).status_code == 200


@pytest.mark.parametrize("credit", ["NaN", "Infinity", "-Infinity"])
async def test_a_non_finite_credit_is_422_and_the_credit_gate_holds(door: httpx2.AsyncClient, credit: str) -> None:
    """R-CREDIT-01: NaN compares false with every price, so it would have let every raise through."""
    headers = {**REF, "Content-Type": "application/json"}
    assert (await door.put("/_reference/organisations/payments", headers=REF, json={"credit": 0})).status_code == 200
    response = await door.put("/_reference/organisations/payments", headers=headers, content=f'{{"credit": {credit}}}')
    assert (response.status_code, response.headers["content-type"]) == (422, PROBLEM)
    raise_ = await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"count": 3})
    assert raise_.status_code == 402


async def test_the_admin_routes_document_their_problem_answers(door: httpx2.AsyncClient) -> None:
    schema = (await door.get("/openapi.json")).json()
    for path, operations in schema["paths"].items():
        if path.startswith("/_reference"):
            for operation in operations.values():
                assert {"401", "422"} <= set(operation["responses"]), path
                assert PROBLEM in operation["responses"]["401"]["content"], path


@pytest.mark.parametrize(
    ("method", "route", "body"),
    [
        ("PUT", "/_reference/inventory", {"available": 0}),
        ("PUT", "/_reference/organisations/payments", {"credit": False}),
        ("POST", "/_reference/clock/advance", {"seconds": True}),
        ("POST", "/_reference/faults", {"route": "*", "retry_after": False}),
        ("POST", "/_reference/faults", {"route": "*", "count": 1.5}),
    ],
)
async def test_admin_bodies_are_as_strict_as_the_public_ones(
    door: httpx2.AsyncClient, method: str, route: str, body: dict[str, object]
) -> None:
    """`{"available": 0}` took the inventory down and `{"seconds": true}` moved the clock a second."""
    response = await door.request(method, route, headers=REF, json=body)
    assert (response.status_code, response.headers["content-type"]) == (422, PROBLEM)
    assert (await door.get(f"{CLUSTER}/nodes", headers=ADMIN)).status_code == 200
    assert (await door.get("/_reference/clock", headers=REF)).json()["now"] == "2026-10-01T12:00:00Z"
    assert (await door.get("/_reference/faults", headers=REF)).json() == []


async def test_an_admin_cluster_keeps_the_invariants_of_the_public_api(door: httpx2.AsyncClient) -> None:
    """Two pools of one name (R-ADD-02), a second `payments-prod` (so `?name=` found two ids) and an id
    no URL can reach were all installed."""
    twins = {"name": "twins", "organisation": "payments", "node_pools": [{"name": "a", "size": "dks.c5.large"}] * 2}
    response = await door.post("/_reference/clusters", headers=REF, json=twins)
    assert (response.status_code, response.json()["rule"]) == (422, "R-ADD-02")
    clash = await door.post(
        "/_reference/clusters", headers=REF, json={"name": "payments-prod", "organisation": "payments"}
    )
    assert (clash.status_code, clash.headers["content-type"]) == (409, PROBLEM)
    for bad_id in ("a/b", "..", "", "x y"):
        body = {"name": f"c{len(bad_id)}", "organisation": "payments", "id": bad_id}
        assert (await door.post("/_reference/clusters", headers=REF, json=body)).status_code == 422, bad_id
    listed = (await door.get("/v1/public/clusters", params={"name": "payments-prod"}, headers=ADMIN)).json()
    assert [c["id"] for c in listed["items"]] == [seed.DEMO_CLUSTER_ID]
    elsewhere = await door.post(
        "/_reference/clusters", headers=REF, json={"name": "payments-prod", "organisation": "acme"}
    )
    assert elsewhere.status_code == 201  # names are unique per organisation only
