"""The reference backend beside moto's EKS node groups: one scenario, both emulators, one run, the ratio.

Run: .venv/bin/python benchmarks/moto_compare.py [--rounds 100] [--warmup 5]

A round creates a pool (moto: a node group), scales it from 1 to 2 and deletes it. moto runs in
server mode (``ThreadedMotoServer`` on a free loopback port) reached through boto3; the reference
backend runs live on a loopback port (``reference_backend.running``, uvicorn in a thread) reached
through ``backend_client.DoorClient``. Both servers are threads of this process and their rounds
alternate, so both see the same machine. The reference backend provisions on a manual clock, so each
round also advances it through the admin plane (after the create, the scale and the delete: a pool's
operation must end before the next, R-OP-01, and a deleting pool drains for 30 s); the three calls are
timed apart from those advances, and the totals are given both ways. Then the rule-kind table
(``benchmarks/rule_kinds.py``). Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import reference_backend  # noqa: E402
from backend_client import DoorClient  # noqa: E402
from backend_client.models import PublicNodePoolCreateRequest, PublicNodePoolPatchRequest  # noqa: E402
from benchmarks.rule_kinds import ROLE, SUBNETS, moto_eks, observe, table  # noqa: E402
from reference_backend.seed import DEMO_CLUSTER_ID, DEMO_ORGANISATION  # noqa: E402
from reference_backend.testing.live import LiveDoor  # noqa: E402

Timings = dict[str, list[float]]


def moto_round(eks: Any, cluster: str, name: str, times: Timings) -> None:
    def timed(step: str, call: Callable[[], Any]) -> None:
        start = time.perf_counter()
        call()
        times[step].append(time.perf_counter() - start)

    timed(
        "create",
        lambda: eks.create_nodegroup(
            clusterName=cluster,
            nodegroupName=name,
            nodeRole=ROLE,
            subnets=SUBNETS,
            scalingConfig={"minSize": 1, "maxSize": 3, "desiredSize": 1},
            instanceTypes=["m5.large"],
        ),
    )
    timed(
        "scale",
        lambda: eks.update_nodegroup_config(clusterName=cluster, nodegroupName=name, scalingConfig={"desiredSize": 2}),
    )
    timed("delete", lambda: eks.delete_nodegroup(clusterName=cluster, nodegroupName=name))


async def reference_round(door: LiveDoor, client: DoorClient, name: str, times: Timings) -> None:
    async def timed(step: str, call: Callable[[], Any], advance: float) -> None:
        start = time.perf_counter()
        await call()
        times[step].append(time.perf_counter() - start)
        start = time.perf_counter()
        door.admin.advance(advance)  # the manual clock: the operation ends (create/scale), the pool drains (delete)
        times["clock"].append(time.perf_counter() - start)

    await timed(
        "create",
        lambda: client.add_node_pool(DEMO_CLUSTER_ID, PublicNodePoolCreateRequest(name=name, size="dks.c5.large")),
        130,
    )
    await timed("scale", lambda: client.update_node_pool(DEMO_CLUSTER_ID, name, PublicNodePoolPatchRequest(count=2)), 130)
    await timed("delete", lambda: client.remove_node_pool(DEMO_CLUSTER_ID, name), 40)


def summary(label: str, times: Timings, rounds: int) -> float:
    calls = sum(sum(times[step]) for step in ("create", "scale", "delete"))
    medians = ", ".join(f"{step} {statistics.median(times[step]) * 1000:.2f}" for step in ("create", "scale", "delete"))
    line = f"{label}: {calls:.2f} s for {rounds} rounds ({calls / rounds * 1000:.2f} ms a round); median ms: {medians}"
    if times.get("clock"):
        clock = sum(times["clock"])
        line += f"; with the clock advances {calls + clock:.2f} s ({(calls + clock) / rounds * 1000:.2f} ms a round)"
    print(line)
    return calls


async def main(rounds: int, warmup: int) -> None:
    print(
        f"moto {version('moto')}, boto3 {version('boto3')}, maya-tools {version('maya-tools')}; "
        f"Python {platform.python_version()} on {platform.machine()}; {rounds} rounds after {warmup} warm-up rounds"
    )
    with reference_backend.running() as door, moto_eks() as eks:
        door.admin.set_credit(DEMO_ORGANISATION, 1e9)
        eks.create_cluster(name="bench", roleArn=ROLE, resourcesVpcConfig={"subnetIds": SUBNETS})
        moto_times: Timings = {"create": [], "scale": [], "delete": []}
        ours: Timings = {"create": [], "scale": [], "delete": [], "clock": []}
        async with DoorClient(door.url, door.super_admin_token) as client:
            for i in range(warmup + rounds):
                if i == warmup:
                    for times in (moto_times, ours):
                        for step in times.values():
                            step.clear()
                moto_round(eks, "bench", f"bench-{i}", moto_times)
                await reference_round(door, client, f"bench-{i}", ours)
        moto_total = summary("moto (boto3 → ThreadedMotoServer)", moto_times, rounds)
        our_total = summary("reference backend (DoorClient → uvicorn)", ours, rounds)
        with_clock = our_total + sum(ours["clock"])
        print(
            f"ratio reference / moto: {our_total / moto_total:.3f} for the calls, "
            f"{with_clock / moto_total:.3f} with the clock advances"
        )
        print()
        door.admin.reset("demo")
        print("\n".join(table(observe(door, eks))))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.rounds, args.warmup)
