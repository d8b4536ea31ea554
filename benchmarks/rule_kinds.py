"""The same requests against the reference backend and against moto's EKS node groups: which of the API page's
rule kinds each emulator enforces, as observed (shared by ``benchmarks/moto_compare.py``, which prints the
table, and ``tests/reference_backend/test_moto_parity.py``, which holds docs/reference-backend.md to it).

Both run on loopback in this process: the reference backend through ``reference_backend.running``
(uvicorn in a thread), moto in server mode (``ThreadedMotoServer``, werkzeug in a thread) reached with
boto3 and fake credentials. A moto node group stands for a pool (``scalingConfig.desiredSize`` is the
count, ``minSize``/``maxSize`` the autoscaling bounds). Each probe starts from a fresh world.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx2

from reference_backend.seed import DEMO_CLUSTER_ID, DEMO_ORGANISATION
from reference_backend.testing.live import LiveDoor

CLUSTER = f"/v1/public/clusters/{DEMO_CLUSTER_ID}"
EKS_CLUSTER = "payments-prod"
ROLE = "arn:aws:iam::123456789012:role/eks-nodes"
SUBNETS = ["subnet-0a1b2c3d"]


@dataclass(frozen=True)
class Answer:
    enforced: bool
    said: str

    def cell(self) -> str:
        return f"{'**yes**' if self.enforced else 'no'}: {self.said}"


@dataclass(frozen=True)
class Observed:
    kind: str
    rule: str
    reference: Answer
    moto: Answer

    def row(self) -> str:
        return f"| {self.kind} | {self.rule} | {self.reference.cell()} | {self.moto.cell()} |"


HEADER = [
    "| rule kind | Door's rule | reference backend | moto (EKS node groups, server mode) |",
    "|---|---|---|---|",
]


@contextmanager
def moto_eks() -> Iterator[Any]:
    """moto's server on a free loopback port and a boto3 EKS client of it (fake credentials)."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield boto3.client(
            "eks",
            region_name="us-east-1",
            endpoint_url=f"http://{host}:{port}",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
    finally:
        server.stop()


def fresh_moto(eks: Any, name: str = "workers") -> str:
    """A new ACTIVE cluster (its own name, so no probe sees another's) with one node group of 2 (min 1,
    max 3), as the demo seed's pool; returns the cluster's name."""
    cluster = f"{EKS_CLUSTER}-{len(eks.list_clusters()['clusters'])}"
    eks.create_cluster(name=cluster, roleArn=ROLE, resourcesVpcConfig={"subnetIds": SUBNETS})
    eks.create_nodegroup(
        clusterName=cluster,
        nodegroupName=name,
        nodeRole=ROLE,
        subnets=SUBNETS,
        scalingConfig={"minSize": 1, "maxSize": 3, "desiredSize": 2},
        instanceTypes=["m5.xlarge"],
    )
    return cluster


def _moto_call(call: Callable[[], dict[str, Any]]) -> tuple[int, str]:
    """The HTTP status moto answered and, for an error, its code."""
    from botocore.exceptions import ClientError

    try:
        answer = call()
    except ClientError as error:
        return int(error.response["ResponseMetadata"]["HTTPStatusCode"]), str(error.response["Error"]["Code"])
    return int(answer["ResponseMetadata"]["HTTPStatusCode"]), str(answer.get("update", {}).get("status", "ok"))


def _update(eks: Any, cluster: str, **scaling: int) -> tuple[int, str]:
    return _moto_call(
        lambda: eks.update_nodegroup_config(clusterName=cluster, nodegroupName="workers", scalingConfig=scaling)
    )


def _refused(status: int) -> bool:
    return 400 <= status < 500


def concurrent_operation(door: LiveDoor, http: httpx2.Client, eks: Any) -> Observed:
    first = http.patch(f"{CLUSTER}/node-pools/workers", json={"count": 3}).status_code
    second = http.patch(f"{CLUSTER}/node-pools/workers", json={"count": 4}).status_code
    cluster = fresh_moto(eks)
    _, first_update = _update(eks, cluster, desiredSize=3)
    status, said = _update(eks, cluster, desiredSize=1)
    return Observed(
        "concurrent-operation 409",
        "R-OP-01",
        Answer(first == 202 and second == 409, f"a second PATCH while the first runs → {second}"),
        Answer(_refused(status), f"a second `UpdateNodegroupConfig` at once → {status} ({first_update}, then {said})"),
    )


def bounds_validation(door: LiveDoor, http: httpx2.Client, eks: Any) -> Observed:
    body = {"auto_scale": True, "min_nodes": 5, "max_nodes": 2}
    status = http.patch(f"{CLUSTER}/node-pools/workers", json=body).status_code
    moto_status, said = _update(eks, fresh_moto(eks), minSize=5, maxSize=2, desiredSize=3)
    return Observed(
        "bounds validation",
        "R-PATCH-04",
        Answer(status == 422, f"`min_nodes` 5 > `max_nodes` 2 → {status}"),
        Answer(_refused(moto_status), f"`minSize` 5 > `maxSize` 2 → {moto_status} ({said})"),
    )


def last_pool_refusal(door: LiveDoor, http: httpx2.Client, eks: Any) -> Observed:
    status = http.delete(f"{CLUSTER}/node-pools/workers").status_code
    cluster = fresh_moto(eks)
    moto_status, _ = _moto_call(lambda: eks.delete_nodegroup(clusterName=cluster, nodegroupName="workers"))
    left = eks.list_nodegroups(clusterName=cluster)["nodegroups"]
    return Observed(
        "last-pool refusal",
        "R-DEL-01",
        Answer(status == 409, f"DELETE of the only pool → {status}"),
        Answer(_refused(moto_status), f"`DeleteNodegroup` of the only node group → {moto_status}, {len(left)} left"),
    )


def credit_gate(door: LiveDoor, http: httpx2.Client, eks: Any) -> Observed:
    door.admin.set_credit(DEMO_ORGANISATION, 0.0)
    status = http.patch(f"{CLUSTER}/node-pools/workers", json={"count": 3}).status_code
    moto_status, said = _update(eks, fresh_moto(eks), minSize=1, maxSize=100, desiredSize=100)
    return Observed(
        "credit gate",
        "R-CREDIT-01",
        Answer(status == 402, f"a scale-up with no prepaid credit → {status}"),
        Answer(_refused(moto_status), f"no credit or price: `desiredSize` 2 → 100 → {moto_status} ({said})"),
    )


def stale_while_revalidate(door: LiveDoor, http: httpx2.Client, eks: Any) -> Observed:
    first = http.get(f"{CLUSTER}/nodes").json()
    door.admin.advance(2)
    fresh = http.get(f"{CLUSTER}/nodes").json()
    door.admin.advance(31)
    stale = http.get(f"{CLUSTER}/nodes").json()
    swr = first["cold"] and not first["items"] and not (fresh["cold"] or fresh["stale"]) and stale["stale"]
    cluster = fresh_moto(eks)
    _update(eks, cluster, desiredSize=3)
    group = eks.describe_nodegroup(clusterName=cluster, nodegroupName="workers")["nodegroup"]
    freshness = sorted({"cold", "stale", "next_refresh_at", "nextRefreshAt"} & set(group))
    return Observed(
        "stale-while-revalidate reads",
        "R-NODE-03, R-NODE-04",
        Answer(
            bool(swr),
            f"first node read `cold` {str(first['cold']).lower()} with {len(first['items'])} items, "
            f"fresh after 2 s, `stale` {str(stale['stale']).lower()} after 31 more",
        ),
        Answer(
            bool(freshness),
            f"`DescribeNodegroup` right after a change shows `desiredSize` {group['scalingConfig']['desiredSize']} "
            f"and status {group['status']}, with {'fields ' + ', '.join(freshness) if freshness else 'no freshness field'}",
        ),
    )


PROBES = (concurrent_operation, bounds_validation, last_pool_refusal, credit_gate, stale_while_revalidate)


def observe(door: LiveDoor, eks: Any) -> list[Observed]:
    """Every probe, each on a fresh demo world and a new moto cluster."""
    found = []
    with httpx2.Client(base_url=door.url, headers=door.headers(), timeout=30) as http:
        for probe in PROBES:
            door.admin.reset("demo")
            found.append(probe(door, http, eks))
    return found


def table(observed: list[Observed]) -> list[str]:
    return [*HEADER, *(o.row() for o in observed)]
