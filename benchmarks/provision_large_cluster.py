"""Benchmark: scaling a cluster of 200 pools from 1 to 200 workers each, through the public API.

Installs a cluster of ``--pools`` pools of one Running worker, optionally gives it a history of
finished operations (``--history R``: R rounds of a labels-only PATCH of every pool, each run to
completion; the engine's cost per event must not grow with it), PATCHes every pool to ``--nodes``
workers, then advances the manual clock ``--step`` simulated seconds at a time (each step one
``GET …/state``, which applies every event due) until no operation is running. Prints the time
of the PATCHes, the total time of the simulation and the time per simulated step (mean and the
slowest step, where tens of thousands of workers change state at one instant). Figures only;
nothing is asserted. Run: .venv/bin/python benchmarks/provision_large_cluster.py
[--pools N --nodes N --step S --history R --memory]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

import anyio
import httpx2

from backend_client.models import PublicNodePoolCreateRequest
from reference_backend.app import create_app
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ADMIN_TOKEN

HEADERS = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
CLUSTER = "/v1/public/clusters/big"


async def main(pools: int, nodes: int, step: float, history: int, memory: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock()
        backend = ReferenceBackend(clock, state_path=None if memory else Path(tmp) / "state.sqlite3")
        backend.set_credit("payments", 1e12)  # R-CREDIT-01 must not refuse the scale-up
        backend.install_cluster(
            name="big",
            organisation="payments",
            cluster_id="big",
            pools=[PublicNodePoolCreateRequest(name=f"p{i}", size="dks.c5.large", count=1) for i in range(pools)],
        )
        print(
            f"{pools} pools × 1 → {nodes} workers, step {step:g} s, {history * pools} finished operations before, "
            f"{'in memory' if memory else 'SQLite'}"
        )
        app = create_app(backend)
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://door.test") as door:
            for round_ in range(history):
                for i in range(pools):
                    labels = {"round": str(round_)}
                    response = await door.patch(f"{CLUSTER}/node-pools/p{i}", json={"labels": labels}, headers=HEADERS)
                    assert response.status_code == 202, response.text[:300]
                clock.advance(2)  # a labels-only PATCH is an operation of one second
            patch_ms: list[float] = []
            for i in range(pools):
                started = time.perf_counter()
                response = await door.patch(f"{CLUSTER}/node-pools/p{i}", json={"count": nodes}, headers=HEADERS)
                patch_ms.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 202, response.text[:300]
            print(
                f"PATCH {pools} pools: total {sum(patch_ms):8.0f} ms, median {statistics.median(patch_ms):6.1f} ms, "
                f"slowest {max(patch_ms):6.1f} ms"
            )
            step_ms: list[float] = []
            running = pools
            started_all = time.perf_counter()
            while running:
                clock.advance(step)
                started = time.perf_counter()
                response = await door.get(f"{CLUSTER}/state", headers=HEADERS)
                step_ms.append((time.perf_counter() - started) * 1000)
                running = sum(1 for op in response.json()["operations"] if op["status"] == "running")
            total_ms = (time.perf_counter() - started_all) * 1000
            print(
                f"simulate until every operation finished: {len(step_ms)} steps ({len(step_ms) * step:g} s simulated), "
                f"total {total_ms:8.0f} ms"
            )
            print(
                f"per simulated step: mean {statistics.mean(step_ms):8.1f} ms, median {statistics.median(step_ms):6.1f} ms, "
                f"slowest {max(step_ms):8.1f} ms"
            )
        backend.close()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(f"peak resident memory: {peak_kib / 1024:.0f} MiB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pools", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--step", type=float, default=1.0, help="simulated seconds per step")
    parser.add_argument("--history", type=int, default=0, help="rounds of finished operations before the scale-up")
    parser.add_argument("--memory", action="store_true", help="no state file (the default persists to SQLite)")
    args = parser.parse_args()
    anyio.run(main, args.pools, args.nodes, args.step, args.history, args.memory)
