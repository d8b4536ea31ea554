"""Which JSON library reads a 40,000-worker node list fastest into what ``list_nodes`` needs (issue 31).

Run: .venv/bin/python benchmarks/decoders.py [--repeat N]   (orjson is measured when installed:
``pip install orjson``; it is not a dependency)

Each way reads the same body (the reference backend's ``GET …/nodes`` of 200 pools × 200 workers)
and counts the workers by pool and status, as ``backend_client.nodes.node_page`` must; the last row
is ``node_page`` itself (the count, the page of 50 validated as ``Node`` models, the envelope).
Prints the median and the fastest of ``--repeat`` runs, in milliseconds, interleaved.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from operator import itemgetter
from pathlib import Path
from typing import Any

import anyio
import httpx2
import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backend_client.models import NodeStatus, PublicNodePoolCreateRequest  # noqa: E402
from backend_client.nodes import node_page  # noqa: E402
from reference_backend.app import create_app  # noqa: E402
from reference_backend.backend import ReferenceBackend  # noqa: E402
from reference_backend.clock import ManualClock  # noqa: E402
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_ORGANISATION  # noqa: E402

HEADERS = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}

POOL_AND_STATUS = itemgetter("pool", "status")


class Worker(msgspec.Struct, frozen=True, gc=False):
    pool: str | None = None
    status: str = "None"


class KnownWorker(msgspec.Struct, frozen=True, gc=False):
    pool: str | None = None
    status: NodeStatus = "Unknown"


class Workers(msgspec.Struct, gc=False):
    items: list[Worker]


class KnownWorkers(msgspec.Struct, gc=False):
    items: list[KnownWorker]


async def body() -> bytes:
    clock = ManualClock()
    backend = ReferenceBackend(clock)
    backend.set_credit(DEMO_ORGANISATION, 1e12)
    pools = [PublicNodePoolCreateRequest(name=f"p{i}", size="dks.c5.large", count=200) for i in range(200)]
    backend.install_cluster(name="big", organisation=DEMO_ORGANISATION, cluster_id="big", pools=pools)
    transport = httpx2.ASGITransport(app=create_app(backend))
    async with httpx2.AsyncClient(transport=transport, base_url="http://door.test") as door:
        await door.get("/v1/public/clusters/big/nodes", headers=HEADERS)  # cold: queues the snapshot
        clock.advance(5)
        return (await door.get("/v1/public/clusters/big/nodes", headers=HEADERS)).content


def ways() -> dict[str, Callable[[bytes], object]]:
    found: dict[str, Callable[[bytes], object]] = {
        "json (stdlib): dicts, then Counter": lambda b: Counter(map(POOL_AND_STATUS, json.loads(b)["items"])),
    }
    try:
        import orjson  # type: ignore[import-not-found,unused-ignore]

        found["orjson: dicts, then Counter"] = lambda b: Counter(map(POOL_AND_STATUS, orjson.loads(b)["items"]))
    except ImportError:
        print("orjson is not installed: its row is left out (pip install orjson)")
    workers, known = msgspec.json.Decoder(Workers), msgspec.json.Decoder(KnownWorkers)
    found["msgspec: dicts, then Counter"] = lambda b: Counter(map(POOL_AND_STATUS, msgspec.json.decode(b)["items"]))
    found["msgspec: (pool, status) structs, counted"] = lambda b: Counter(workers.decode(b).items)
    found["msgspec: structs, statuses as the contract's literals"] = lambda b: Counter(known.decode(b).items)
    found["node_page (count + page of 50 + envelope)"] = lambda b: node_page(b, limit=50)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    content = anyio.run(body)
    found = ways()
    samples: dict[str, list[float]] = {name: [] for name in found}
    for _ in range(args.repeat):
        for name, way in found.items():
            started = time.perf_counter()
            way(content)
            samples[name].append((time.perf_counter() - started) * 1000)
    print(f"body: {len(content) / 1e6:.1f} MB, {args.repeat} runs each, interleaved")
    print(f"{'way':<58} {'median':>8} {'fastest':>8}")
    for name, times in samples.items():
        print(f"{name:<58} {statistics.median(times):>8.1f} {min(times):>8.1f}")
    result: Any = node_page(content)
    assert result.total == 40_000


if __name__ == "__main__":
    main()
