"""Bad input is a 4xx problem+json naming the rule and the fields, never a 500; the order of checks."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from reference_backend import seed
from tests.conftest import ADMIN_TOKEN, auth

pytestmark = pytest.mark.anyio

ADMIN = auth(seed.DEMO_ADMIN_TOKEN)
MEMBER = auth(seed.DEMO_MEMBER_TOKEN)
OUTSIDER = auth(seed.DEMO_OUTSIDER_TOKEN)
CLUSTER = f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}"
STAGING = f"/v1/public/clusters/{seed.DEMO_PENDING_CLUSTER_ID}"
UNKNOWN = "/v1/public/clusters/00000000-0000-4000-8000-000000000000"


def problem(response: httpx2.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["title"] and body["detail"] and body["type"].startswith("https://door.test/problems/")
    assert body["request_id"] == response.headers["x-request-id"]
    return body


async def test_malformed_json_is_400(door: httpx2.AsyncClient) -> None:
    response = await door.patch(
        f"{CLUSTER}/node-pools/workers", headers=ADMIN | {"content-type": "application/json"}, content=b'{"count": 3'
    )
    assert problem(response, 400)["type"] == "https://door.test/problems/bad-request"


async def test_invalid_utf8_is_400(door: httpx2.AsyncClient) -> None:
    response = await door.post(f"{CLUSTER}/node-pools", headers=ADMIN, content=b"\xff\xfe{}")
    problem(response, 400)


@pytest.mark.parametrize("idempotency_key", [None, "surrogate"])
async def test_an_unpaired_surrogate_escape_is_400_and_never_reaches_the_world(
    door: httpx2.AsyncClient, idempotency_key: str | None
) -> None:
    """json accepts "\\ud800"; no answer can encode it, so taking it would turn every later read into a 500."""
    headers = ADMIN | ({"Idempotency-Key": idempotency_key} if idempotency_key else {})
    body = b'{"name": "batch", "size": "dks.c5.large", "labels": {"team": "\\ud800"}}'
    problem(await door.post(f"{CLUSTER}/node-pools", headers=headers, content=body), 400)
    assert (await door.get(CLUSTER, headers=ADMIN)).status_code == 200
    assert [p["name"] for p in (await door.get(f"{CLUSTER}/node-pools", headers=ADMIN)).json()["items"]] == ["workers"]


@pytest.mark.parametrize("body", [b"[1, 2]", b'"text"', b"42", b"null", b""])
async def test_a_body_that_is_not_an_object_is_422(door: httpx2.AsyncClient, body: bytes) -> None:
    response = await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, content=body)
    assert problem(response, 422)["errors"][0]["field"] == "body"


async def test_wrong_types_are_422_naming_each_field(door: httpx2.AsyncClient) -> None:
    """R-PATCH-01/R-PATCH-06: strict types; every offending field is listed."""
    response = await door.patch(
        f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"count": "3", "auto_scale": "yes", "labels": {"a": 1}}
    )
    fields = {e["field"] for e in problem(response, 422)["errors"]}
    assert fields == {"count", "auto_scale", "labels.a"}


async def test_unknown_fields_on_create_are_422_naming_the_field(door: httpx2.AsyncClient) -> None:
    """R-ADD-07: unknown fields → 422."""
    response = await door.post(
        f"{CLUSTER}/node-pools", headers=ADMIN, json={"name": "batch", "size": "dks.c5.large", "colour": "red"}
    )
    body = problem(response, 422)
    assert body["rule"] == "R-ADD-07"
    assert [e["field"] for e in body["errors"]] == ["colour"]


async def test_size_and_unknown_fields_on_patch_are_422_each_named(door: httpx2.AsyncClient) -> None:
    """R-PATCH-01: size is immutable and other fields are refused, each with its fix in the detail."""
    response = await door.patch(
        f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"size": "dks.c5.large", "zone": "a", "count": 3}
    )
    body = problem(response, 422)
    assert [(e["field"], e["rule"]) for e in body["errors"]] == [("size", "R-PATCH-01"), ("zone", "R-PATCH-01")]
    assert "R-PATCH-10" in body["detail"]


async def test_an_oversized_body_is_413(door: httpx2.AsyncClient) -> None:
    body = {"labels": {f"k{i}": "v" * 100 for i in range(700)}}
    problem(await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json=body), 413)


async def test_an_oversized_chunked_body_is_413(door: httpx2.AsyncClient) -> None:
    async def chunks() -> Any:
        for _ in range(70):
            yield b" " * 1024

    problem(await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, content=chunks()), 413)


async def test_an_unknown_route_is_a_404_problem(door: httpx2.AsyncClient) -> None:
    problem(await door.get("/v1/public/nope", headers=ADMIN), 404)


async def test_a_wrong_method_is_a_405_problem(door: httpx2.AsyncClient) -> None:
    problem(await door.put(f"{CLUSTER}/node-pools", headers=ADMIN, json={}), 405)


async def test_the_admin_plane_without_its_token_is_401(door: httpx2.AsyncClient) -> None:
    problem(await door.get("/_reference/clock", headers=ADMIN), 401)


async def test_a_deep_json_body_is_refused_not_crashed(door: httpx2.AsyncClient) -> None:
    deep = b"[" * 50_000 + b"]" * 50_000
    response = await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, content=deep)
    assert 400 <= response.status_code < 500


# --- the order of checks (docs/contracts.md) --------------------------------------------------------


async def test_a_fault_before_answers_ahead_of_the_missing_token(door: httpx2.AsyncClient) -> None:
    """Step 1 beats step 2: a `before` fault answers even a request without a token."""
    await door.post("/_reference/faults", headers=auth(ADMIN_TOKEN), json={"route": "*", "status": 503, "count": 1})
    assert problem(await door.get(f"{CLUSTER}/node-pools"), 503)["title"] == "Injected fault"


async def test_no_token_beats_unknown_cluster_and_bad_body(door: httpx2.AsyncClient) -> None:
    """R-AUTH-01 (step 2) before R-AUTH-04 (step 3) and the body (step 5)."""
    response = await door.post(f"{UNKNOWN}/node-pools", content=b"{not json")
    assert problem(response, 401)["rule"] == "R-AUTH-01"
    assert problem(await door.get(CLUSTER, headers=auth("forged")), 401)["rule"] == "R-AUTH-01"


async def test_unknown_cluster_is_404_and_a_foreign_one_403_before_the_role(door: httpx2.AsyncClient) -> None:
    """R-AUTH-04 decision: 404 for a cluster that does not exist, 403 for a non-member; before R-AUTH-03."""
    assert (
        problem(await door.patch(f"{UNKNOWN}/node-pools/workers", headers=MEMBER, json={}), 404)["rule"] == "R-AUTH-04"
    )
    assert (
        problem(await door.patch(f"{CLUSTER}/node-pools/workers", headers=OUTSIDER, json={}), 403)["rule"]
        == "R-AUTH-02"
    )


async def test_a_member_is_403_before_the_body_is_looked_at(door: httpx2.AsyncClient) -> None:
    """R-AUTH-03 (step 4) beats an empty patch (step 5)."""
    assert (
        problem(await door.patch(f"{CLUSTER}/node-pools/workers", headers=MEMBER, json={}), 403)["rule"] == "R-AUTH-03"
    )


async def test_the_body_shape_beats_the_phase_and_an_unknown_pool(door: httpx2.AsyncClient) -> None:
    """Step 5 (R-PATCH-02) before step 7 (R-PHASE-01) and step 8 (R-PATCH-07)."""
    assert problem(await door.patch(f"{STAGING}/node-pools/nope", headers=ADMIN, json={}), 422)["rule"] == "R-PATCH-02"


async def test_a_bad_shape_beats_an_unknown_tier(door: httpx2.AsyncClient) -> None:
    """R-ADD-01 (422) before R-ADD-03 (400) within step 5; then the tier before the phase."""
    response = await door.post(f"{CLUSTER}/node-pools", headers=ADMIN, json={"name": "Bad_Name", "size": "dks.z9.huge"})
    assert problem(response, 422)["rule"] == "R-ADD-01"
    response = await door.post(f"{STAGING}/node-pools", headers=ADMIN, json={"name": "ok", "size": "dks.z9.huge"})
    assert problem(response, 400)["rule"] == "R-ADD-03"


async def test_a_bad_node_name_beats_the_phase(door: httpx2.AsyncClient) -> None:
    """R-RNODE-03 (step 5) before R-PHASE-01 (step 7)."""
    assert problem(await door.delete(f"{STAGING}/nodes/Not_A_Node", headers=ADMIN), 400)["rule"] == "R-RNODE-03"


async def test_the_phase_beats_an_unknown_pool(door: httpx2.AsyncClient) -> None:
    """R-PHASE-01 (step 7) before R-PATCH-07 (step 8)."""
    assert (
        problem(await door.patch(f"{STAGING}/node-pools/nope", headers=ADMIN, json={"count": 2}), 409)["rule"]
        == "R-PHASE-01"
    )


async def test_a_running_operation_beats_the_bounds_and_the_credit(door: httpx2.AsyncClient) -> None:
    """R-OP-01 (step 9) before R-PATCH-04 (step 10) and R-CREDIT-01 (step 12)."""
    assert (await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"labels": {}})).status_code == 202
    assert (
        problem(await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"count": 0}), 409)["rule"]
        == "R-OP-01"
    )
    assert (
        problem(await door.patch(f"{CLUSTER}/node-pools/workers", headers=ADMIN, json={"count": 200}), 409)["rule"]
        == "R-OP-01"
    )


async def test_the_bounds_beat_the_name_clash_and_the_clash_beats_the_credit(door: httpx2.AsyncClient) -> None:
    """R-ADD-05 (step 10) before R-ADD-02 (step 11), which comes before R-CREDIT-01 (step 12)."""
    await door.put("/_reference/organisations/payments", headers=auth(ADMIN_TOKEN), json={"credit": 100.0})
    response = await door.post(
        f"{CLUSTER}/node-pools", headers=ADMIN, json={"name": "workers", "size": "dks.c5.large", "count": 0}
    )
    assert problem(response, 422)["rule"] == "R-ADD-05"
    response = await door.post(
        f"{CLUSTER}/node-pools", headers=ADMIN, json={"name": "workers", "size": "dks.r5.xlarge", "count": 200}
    )
    assert problem(response, 409)["rule"] == "R-ADD-02"
    response = await door.post(
        f"{CLUSTER}/node-pools", headers=ADMIN, json={"name": "huge", "size": "dks.r5.xlarge", "count": 200}
    )
    assert problem(response, 402)["rule"] == "R-CREDIT-01"


async def test_the_last_pool_is_409_and_the_phase_comes_first(door: httpx2.AsyncClient) -> None:
    """R-DEL-01 (step 11); on a NodesReady cluster R-PHASE-01 (step 7) wins."""
    assert problem(await door.delete(f"{CLUSTER}/node-pools/workers", headers=ADMIN), 409)["rule"] == "R-DEL-01"
    assert problem(await door.delete(f"{STAGING}/node-pools/general", headers=ADMIN), 409)["rule"] == "R-PHASE-01"


async def test_a_phase_refusal_on_node_reads_beats_the_down_inventory(door: httpx2.AsyncClient) -> None:
    """R-PHASE-02 (step 7) and the unknown pool (step 8) before the 503 (step 13)."""
    await door.put("/_reference/inventory", headers=auth(ADMIN_TOKEN), json={"available": False})
    assert problem(await door.get(f"{STAGING}/nodes", headers=MEMBER), 409)["rule"] == "R-PHASE-02"
    assert problem(await door.get(f"{CLUSTER}/node-pools/nope/nodes", headers=MEMBER), 404)["rule"] == "R-NODE-05"
    assert problem(await door.get(f"{CLUSTER}/nodes", headers=MEMBER), 503)["rule"] == "R-NODE-05"


async def test_idempotency_replay_beats_the_phase(door: httpx2.AsyncClient) -> None:
    """Step 6 before step 7: a replay answers the first 202 even after the cluster left Provisioned."""
    keyed = ADMIN | {"Idempotency-Key": "order"}
    assert (await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed, json={"count": 3})).status_code == 202
    await door.put(
        f"/_reference/clusters/{seed.DEMO_CLUSTER_ID}/phase", headers=auth(ADMIN_TOKEN), json={"phase": "NodesReady"}
    )
    assert (await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed, json={"count": 3})).status_code == 202
    assert (
        problem(await door.patch(f"{CLUSTER}/node-pools/workers", headers=keyed, json={"count": 4}), 422)["rule"]
        == "R-PATCH-09"
    )


async def test_a_bug_is_a_500_problem_without_a_traceback(
    door: httpx2.AsyncClient, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never a traceback on the wire: an unexpected error still answers problem+json."""

    def broken(*_: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(backend, "cluster_body", broken)
    body = problem(await door.get(CLUSTER, headers=ADMIN), 500)
    assert "secret internals" not in str(body) and "Traceback" not in str(body)


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("OPTIONS", f"{CLUSTER}/node-pools", "GET, HEAD, POST"),
        ("PUT", f"{CLUSTER}/node-pools/workers", "DELETE, PATCH"),
        ("POST", f"{CLUSTER}/nodes/payments-prod-workers-abc12", "DELETE"),
        ("DELETE", "/_reference/clock", "GET, HEAD, PUT"),
    ],
)
async def test_a_405_lists_every_method_of_the_path_in_allow(
    door: httpx2.AsyncClient, method: str, path: str, allowed: str
) -> None:
    """Starlette named only the first route of the path: `Allow: GET` on node-pools hid the POST."""
    response = await door.request(method, path, headers=ADMIN)
    problem(response, 405)
    assert response.headers["allow"] == allowed


@pytest.mark.parametrize("path", ["/v1/public/machine-tiers", f"{CLUSTER}/node-pools", f"{CLUSTER}", "/openapi.json"])
async def test_head_is_a_get_without_the_body(door: httpx2.AsyncClient, path: str) -> None:
    get = await door.get(path, headers=ADMIN)
    head = await door.head(path, headers=ADMIN)
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["content-type"] == get.headers["content-type"]
    assert head.headers["content-length"] == str(len(get.content))


async def test_head_keeps_the_checks_of_get(door: httpx2.AsyncClient) -> None:
    assert (await door.head(f"{CLUSTER}/node-pools")).status_code == 401
    assert (await door.head(f"{CLUSTER}/node-pools", headers=OUTSIDER)).status_code == 403
    assert (await door.head(f"{STAGING}/nodes", headers=ADMIN)).status_code == 409


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", f"{CLUSTER}/node-pools/"),
        ("DELETE", f"{CLUSTER}/nodes/payments-prod-workers-abc12/"),
        ("GET", "/v1/public/clusters/"),
    ],
)
async def test_a_trailing_slash_is_a_404_problem_naming_the_fix(
    door: httpx2.AsyncClient, method: str, path: str
) -> None:
    """Not a bodiless 307 redirect (whose Location echoes the Host header): a problem saying what to send."""
    response = await door.request(method, path, headers=ADMIN)
    assert "ends with a slash" in problem(response, 404)["detail"]
    assert "location" not in response.headers


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml"])
async def test_a_body_that_is_not_sent_as_json_is_415(door: httpx2.AsyncClient, content_type: str) -> None:
    """A JSON-looking body sent as text/plain or a form was accepted as if it were JSON."""
    headers = ADMIN | {"content-type": content_type}
    patch = await door.patch(f"{CLUSTER}/node-pools/workers", headers=headers, content=b'{"count": 3}')
    assert "application/json" in problem(patch, 415)["detail"]
    assert patch.headers["accept-patch"] == "application/json"
    create = await door.post(f"{CLUSTER}/node-pools", headers=headers, content=b'{"name": "b", "size": "dks.c5.large"}')
    problem(create, 415)
    admin = await door.put(
        "/_reference/inventory",
        headers=auth(ADMIN_TOKEN) | {"content-type": content_type},
        content=b'{"available": false}',
    )
    problem(admin, 415)
    assert (await door.get(CLUSTER, headers=ADMIN)).json()["node_pools"][0]["count"] == 2


@pytest.mark.parametrize("content_type", [None, "application/json; charset=utf-8", "application/merge-patch+json"])
async def test_json_media_types_and_no_content_type_are_accepted(
    door: httpx2.AsyncClient, content_type: str | None
) -> None:
    headers = ADMIN | ({"content-type": content_type} if content_type else {})
    response = await door.patch(f"{CLUSTER}/node-pools/workers", headers=headers, content=b'{"count": 3}')
    assert response.status_code == 202, response.text
