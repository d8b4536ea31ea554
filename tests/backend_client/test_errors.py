"""Each error status becomes its class, carrying the problem, rule, request id and Retry-After."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import httpx2
import pytest

from backend_client import errors
from backend_client.errors import (
    BadRequest,
    Conflict,
    DoorConnectionError,
    DoorError,
    DoorStatusError,
    DoorTimeoutError,
    Forbidden,
    NotFound,
    PaymentRequired,
    ServerError,
    ServiceUnavailable,
    Unauthorized,
    UnprocessableEntity,
    make_status_error,
    parse_retry_after,
)
from backend_client.models import PublicNodePoolPatchRequest
from tests.backend_client.fakes import CLUSTER_ID, TOKEN, FakeDoor, Sleeps, make_client, problem

pytestmark = pytest.mark.anyio

STATUS_CLASSES = [
    (400, BadRequest, "R-ADD-03"),
    (401, Unauthorized, "R-AUTH-01"),
    (402, PaymentRequired, "R-CREDIT-01"),
    (403, Forbidden, "R-AUTH-03"),
    (404, NotFound, "R-AUTH-04"),
    (409, Conflict, "R-OP-01"),
    (422, UnprocessableEntity, "R-PATCH-02"),
    (503, ServiceUnavailable, "R-NODE-05"),
    (500, ServerError, None),
    (502, ServerError, None),
]


@pytest.mark.parametrize(("status", "cls", "rule"), STATUS_CLASSES)
async def test_each_status_raises_its_class(status: int, cls: type[DoorStatusError], rule: str | None) -> None:
    answer = problem(status, "Refused", rule=rule, detail="because", headers={"X-Request-Id": "req-7"})
    door = FakeDoor({f"GET /clusters/{CLUSTER_ID}": [answer]})
    async with make_client(door, max_retries=0) as client:
        with pytest.raises(cls) as caught:
            await client.get_cluster(CLUSTER_ID)
    error = caught.value
    assert type(error) is cls
    assert error.status_code == status
    assert error.rule == rule
    assert error.problem.detail == "because"
    assert error.request_id == "req-7"
    assert str(status) in str(error)
    if rule:
        assert rule in str(error)


def test_status_classes_declare_their_literal_status() -> None:
    for status, cls, _ in STATUS_CLASSES:
        if cls is not ServerError:
            assert cls.status_code == status
    assert errors.status_error_class(418) is DoorStatusError
    assert errors.status_error_class(599) is ServerError


def _response(status: int, **kwargs: object) -> httpx2.Response:
    response = problem(status, "Refused", **kwargs)  # type: ignore[arg-type]
    response.request = httpx2.Request("PATCH", "https://door.example/v1/public/clusters/c/node-pools/workers")
    return response


def test_422_message_names_each_field_and_what_to_do() -> None:
    error = make_status_error(
        _response(
            422,
            rule="R-PATCH-04",
            detail="the merged pool is invalid",
            errors=[
                {"field": "max_nodes", "message": "max_nodes is required when auto_scale=true", "rule": "R-PATCH-04"}
            ],
        )
    )
    text = str(error)
    assert isinstance(error, UnprocessableEntity)
    assert "422" in text and "R-PATCH-04" in text
    assert "max_nodes: max_nodes is required when auto_scale=true" in text
    assert "Fix the autoscaling bounds" in text
    assert error.field_errors == {"max_nodes": "max_nodes is required when auto_scale=true"}


def test_409_busy_pool_says_to_wait_for_the_operation() -> None:
    error = make_status_error(_response(409, rule="R-OP-01", detail="pool workers has an operation running"))
    assert "wait_for_operation" in str(error)
    assert "PATCH https://door.example/v1/public/clusters/c/node-pools/workers" in str(error)


def test_request_id_falls_back_to_the_body() -> None:
    error = make_status_error(_response(404, rule="R-AUTH-04", request_id="body-req-1"))
    assert error.request_id == "body-req-1"
    assert "body-req-1" in str(error)


def test_header_request_id_wins_over_the_body() -> None:
    error = make_status_error(_response(404, request_id="body", headers={"X-Request-Id": "header"}))
    assert error.request_id == "header"


def test_503_carries_retry_after_seconds() -> None:
    error = make_status_error(_response(503, rule="R-NODE-05", headers={"Retry-After": "5"}))
    assert isinstance(error, ServiceUnavailable)
    assert error.retry_after == 5.0
    assert "Retry after 5 s" in str(error)


def test_retry_after_as_http_date_is_measured_against_the_date_header() -> None:
    headers = {"Retry-After": "Thu, 01 Oct 2026 12:00:07 GMT", "Date": "Thu, 01 Oct 2026 12:00:00 GMT"}
    assert parse_retry_after(headers) == 7.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None
    when = datetime(2026, 10, 1, 12, 0, 2, tzinfo=UTC)
    assert parse_retry_after({"Retry-After": "Thu, 01 Oct 2026 12:00:00 GMT"}, now=when) == 0.0


def test_a_body_that_is_not_problem_json_still_gives_a_readable_error() -> None:
    response = httpx2.Response(502, text="<html>Bad Gateway</html>")
    response.request = httpx2.Request("GET", "https://door.example/v1/public/clusters")
    error = make_status_error(response)
    assert isinstance(error, ServerError)
    assert error.status_code == 502
    assert error.problem.title == "Bad Gateway"
    assert "502 Bad Gateway" in str(error)


def test_the_token_is_redacted_from_an_echoing_error_body() -> None:
    response = _response(401, rule="R-AUTH-01", detail=f"unknown token {TOKEN}")
    error = make_status_error(response, redact=(TOKEN,))
    assert TOKEN not in str(error)
    assert TOKEN not in repr(error)
    assert TOKEN not in (error.problem.detail or "")


async def test_no_error_message_or_repr_contains_the_token() -> None:
    door = FakeDoor(
        {
            f"PATCH /clusters/{CLUSTER_ID}/node-pools/workers": [
                problem(401, "Unauthorized", rule="R-AUTH-01", detail="no such token")
            ],
            f"GET /clusters/{CLUSTER_ID}": [httpx2.ConnectError("connection refused")],
        }
    )
    async with make_client(door, max_retries=0) as client:
        assert TOKEN not in repr(client)
        assert TOKEN not in repr(vars(client))
        with pytest.raises(Unauthorized) as unauthorized:
            await client.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=3))
        with pytest.raises(DoorConnectionError) as unreachable:
            await client.get_cluster(CLUSTER_ID)
    for error in (unauthorized.value, unreachable.value):
        assert TOKEN not in str(error)
        assert TOKEN not in repr(error)
        assert f"Bearer {TOKEN}" not in str(error)


async def test_connection_and_timeout_errors_are_apart_from_status_errors() -> None:
    door = FakeDoor(
        {
            "GET /machine-tiers": [httpx2.ReadTimeout("read timed out")],
            "GET /clusters": [httpx2.ConnectError("refused")],
        }
    )
    async with make_client(door, Sleeps(), max_retries=0) as client:
        with pytest.raises(DoorTimeoutError) as timeout:
            await client.list_machine_tiers()
        with pytest.raises(DoorConnectionError) as refused:
            await client.list_clusters()
    assert not isinstance(timeout.value, DoorStatusError)
    assert isinstance(timeout.value, DoorConnectionError)
    assert timeout.value.request_sent is True
    assert "did not answer in time" in str(timeout.value)
    assert refused.value.request_sent is False
    assert "nothing changed" in str(refused.value)


async def test_an_error_body_echoing_the_authorization_header_is_redacted_by_the_client() -> None:
    def echo(request: httpx2.Request) -> httpx2.Response:
        return problem(401, "Unauthorized", rule="R-AUTH-01", detail=f"rejected {request.headers['authorization']}")

    door = FakeDoor({f"GET /clusters/{CLUSTER_ID}": [echo]})
    async with make_client(door) as client:
        with pytest.raises(Unauthorized) as caught:
            await client.get_cluster(CLUSTER_ID)
    assert TOKEN not in str(caught.value)
    assert TOKEN not in repr(caught.value)
    assert TOKEN not in caught.value.problem.model_dump_json()


async def test_no_log_record_contains_the_token(caplog: pytest.LogCaptureFixture) -> None:
    """Retries and read-backs are logged; the token never is (httpx2's own logging included)."""
    door = FakeDoor(
        {
            f"GET /clusters/{CLUSTER_ID}": [httpx2.ReadTimeout(f"slow for {TOKEN}"), problem(500, "Oops")],
            f"PATCH /clusters/{CLUSTER_ID}/node-pools/workers": [httpx2.ReadTimeout("slow")],
        }
    )
    caplog.set_level(logging.DEBUG)
    async with make_client(door, Sleeps()) as client:
        with pytest.raises(DoorError):
            await client.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=3))
    assert any("retrying" in r.getMessage() for r in caplog.records)
    assert any("failed ambiguously" in r.getMessage() for r in caplog.records)
    for record in caplog.records:
        assert TOKEN not in record.getMessage()
