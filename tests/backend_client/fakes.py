"""Door answers for ``httpx2.MockTransport`` handlers: bodies built from the contract models."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx2

from backend_client import DoorClient
from backend_client.models import Cluster, ClusterState, NodeList, NodePool, Operation

BASE_URL = "https://dks-api.example.test"
TOKEN = "unit-secret-token"
CLUSTER_ID = "3f9c1a2e-7b4d-4c58-9e21-5d6f8a0b1c2d"
NOW = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)


def pool(name: str = "workers", **changes: Any) -> NodePool:
    base = NodePool(
        id="a1b2c3d4-0000-4000-8000-000000000001",
        name=name,
        size="dks.c5.xlarge",
        count=2,
        auto_scale=False,
        min_nodes=None,
        max_nodes=None,
        labels={},
        tags={},
        root_volume_size_gib=80,
        lifecycle="active",
    )
    return base.model_copy(update=changes)


def cluster(*pools: NodePool) -> Cluster:
    return Cluster(
        id=CLUSTER_ID,
        name="payments-prod",
        organisation="payments",
        phase="Provisioned",
        kubernetes_version="v1.32.4",
        node_pools=list(pools) or [pool()],
        total_vcpu=8,
        total_memory_gib=16.0,
        total_volume_gib=160,
        created_at=NOW,
    )


def operation(op_id: str = "op-1", status: str = "running", **changes: Any) -> Operation:
    data: dict[str, Any] = {
        "id": op_id,
        "kind": "pool.update",
        "target": "workers",
        "pool": "workers",
        "status": status,
        "started_at": NOW,
        "finished_at": None if status == "running" else NOW,
        "error": None,
    }
    data.update(changes)
    return Operation.model_validate(data)


def state(*operations: Operation) -> ClusterState:
    return ClusterState(cluster_id=CLUSTER_ID, phase="Provisioned", operations=list(operations))


def node_list(*, cold: bool = False, stale: bool = False, next_refresh_at: datetime | None = None) -> NodeList:
    return NodeList.model_validate(
        {
            "cluster_id": CLUSTER_ID,
            "items": [
                {
                    "name": "payments-prod-workers-abc12",
                    "pool": "workers",
                    "status": "Running",
                    "kubernetes_version": "v1.32.4",
                    "ready": True,
                    "created_at": NOW,
                    "deleted_at": None,
                }
            ],
            "total": 1,
            "cold": cold,
            "stale": stale,
            "next_refresh_at": next_refresh_at,
        }
    )


def ok(model: Any, status: int = 200, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.Response(status, json=model.model_dump(mode="json"), headers=headers)


def problem(
    status: int,
    title: str,
    *,
    rule: str | None = None,
    detail: str | None = None,
    errors: Iterable[dict[str, str]] = (),
    headers: dict[str, str] | None = None,
    request_id: str | None = None,
) -> httpx2.Response:
    body: dict[str, Any] = {
        "type": f"https://door.test/problems/{rule or 'about-blank'}",
        "title": title,
        "status": status,
        "detail": detail,
        "rule": rule,
        "errors": list(errors),
    }
    if request_id is not None:
        body["request_id"] = request_id
    return httpx2.Response(
        status,
        content=json.dumps(body).encode(),
        headers={"content-type": "application/problem+json", **(headers or {})},
    )


Answer = httpx2.Response | Exception | Callable[[httpx2.Request], httpx2.Response]


@dataclass
class FakeDoor:
    """A MockTransport handler that records each request and answers from a script, in order.

    ``routes`` maps ``"METHOD /path"`` (path after ``/v1/public``) to a list of answers; the last
    answer repeats. An ``Exception`` answer is raised, as a transport would.
    """

    routes: dict[str, list[Answer]]
    requests: list[httpx2.Request] = field(default_factory=list)

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        key = f"{request.method} {request.url.path.removeprefix('/v1/public')}"
        answers = self.routes.get(key)
        if not answers:
            return problem(404, "Not Found", detail=f"no fake route {key}")
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            return answer(request)
        return answer

    def calls(self, key: str) -> list[httpx2.Request]:
        return [r for r in self.requests if f"{r.method} {r.url.path.removeprefix('/v1/public')}" == key]


@dataclass
class Sleeps:
    """An injected ``sleep`` that records the delays and returns at once."""

    delays: list[float] = field(default_factory=list)
    on_sleep: Callable[[float], None] | None = None

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self.on_sleep is not None:
            self.on_sleep(seconds)


def make_client(door: FakeDoor, sleeps: Sleeps | None = None, **kwargs: Any) -> DoorClient:
    return DoorClient(BASE_URL, TOKEN, transport=httpx2.MockTransport(door), sleep=sleeps or Sleeps(), **kwargs)


def sent_json(request: httpx2.Request) -> Any:
    return json.loads(request.content) if request.content else None
