"""Benchmark: a cluster of 200 pools × 200 workers in the reference backend.

Prints how long the reads that list everything take (cluster body, pool list, node list, one
pool's nodes), how long one PATCH takes with SQLite persistence, and the peak memory (resident set
size: tracemalloc would hook every allocation and multiply the timings tenfold). Figures only;
nothing is asserted. Run: .venv/bin/python benchmarks/large_cluster.py [--pools N --nodes N]
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


async def timed(client: httpx2.AsyncClient, method: str, path: str, repeat: int, **kwargs: object) -> tuple[float, int]:
    """Median milliseconds over ``repeat`` calls, and the response size of the last one."""
    samples: list[float] = []
    size = 0
    for _ in range(repeat):
        started = time.perf_counter()
        response = await client.request(method, path, headers=HEADERS, **kwargs)  # type: ignore[arg-type]
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code < 300, response.text[:300]
        size = len(response.content)
    return statistics.median(samples), size


async def main(pools: int, nodes: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock()
        backend = ReferenceBackend(clock, state_path=Path(tmp) / "state.sqlite3")
        started = time.perf_counter()
        backend.install_cluster(
            name="big",
            organisation="payments",
            cluster_id="big",
            pools=[PublicNodePoolCreateRequest(name=f"p{i}", size="dks.c5.large", count=nodes) for i in range(pools)],
        )
        print(f"install {pools} pools × {nodes} workers: {(time.perf_counter() - started) * 1000:.0f} ms")
        app = create_app(backend)
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://door.test") as door:
            await door.get("/v1/public/clusters/big/nodes", headers=HEADERS)  # cold: queues the first refresh
            clock.advance(2)
            for label, method, path in [
                ("GET cluster (pools + capacity)", "GET", "/v1/public/clusters/big"),
                ("GET node-pools", "GET", "/v1/public/clusters/big/node-pools"),
                ("GET nodes (all workers)", "GET", "/v1/public/clusters/big/nodes"),
                ("GET one pool's nodes", "GET", "/v1/public/clusters/big/node-pools/p7/nodes"),
            ]:
                median, size = await timed(door, method, path, repeat)
                print(f"{label:<34} median {median:8.1f} ms  body {size / 1024:8.0f} KiB")
            patch_ms: list[float] = []
            for i in range(repeat):
                started = time.perf_counter()
                response = await door.patch(
                    f"/v1/public/clusters/big/node-pools/p{i}", json={"labels": {"bench": str(i)}}, headers=HEADERS
                )
                patch_ms.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 202, response.text[:300]
            print(f"{'PATCH one pool (persisted)':<34} median {statistics.median(patch_ms):8.1f} ms")
        backend.close()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(f"peak resident memory: {peak_kib / 1024:.0f} MiB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pools", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.pools, args.nodes, args.repeat)
