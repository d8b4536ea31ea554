"""Issue 10's table, measured in one run: each measure beside its anchor, interleaved and repeated.

Run: .venv/bin/python benchmarks/run.py [--repeat N] [--cards N] [--runs N] [--json PATH]
     [--postgres postgresql://… [--throughput-cards N] [--only-stores]] [--only-slow]

Anchors: the reference backend's own GET of the same data (for list_nodes, the backend in its own
uvicorn process on loopback; elsewhere the FastAPI app over ASGI, same process), an empty ``MCPServer`` with one trivial tool over the same SDK client, and a bare FastAPI
app answering the same JSON from memory. Tokens: o200k_base from ``bpe-openai`` (ships its
vocabularies, works offline) when installed, else bytes / 4; the JSON says which. Prints the table
(measure, ours, anchor, ratio, goal, met) and writes it as JSON (default benchmarks/results.json).
"""

from __future__ import annotations

import argparse
import json
import logging
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import date
from pathlib import Path
from typing import Any

import anyio
import httpx2
from fastapi import FastAPI
from fastapi.responses import Response
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import ElicitRequestParams, ElicitResult

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backend_client.models import PublicNodePoolCreateRequest  # noqa: E402
from benchmarks.measures import tools_list_texts  # noqa: E402
from confirmation_cards import SqliteCardStore  # noqa: E402
from maya_tools.server import build_server  # noqa: E402
from maya_tools.settings import Settings  # noqa: E402
from reference_backend.app import create_app  # noqa: E402
from reference_backend.backend import ReferenceBackend  # noqa: E402
from reference_backend.clock import ManualClock  # noqa: E402
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_ORGANISATION  # noqa: E402

HEADERS = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}

try:
    import bpe_openai  # type: ignore[import-not-found]

    _ENC = bpe_openai.get_encoding("o200k_base")
    TOKENIZER = "o200k_base (bpe-openai)"

    def tokens(text: str) -> int:
        return len(_ENC.encode(text))
except ImportError:  # pragma: no cover - depends on what is installed
    TOKENIZER = "bytes/4 (no tokenizer installed)"

    def tokens(text: str) -> int:
        return len(text.encode()) // 4


Row = dict[str, Any]
ROWS: list[Row] = []


def row(measure: str, ours: float, anchor: float | None, goal: str, met: bool, unit: str = "") -> None:
    ratio = ours / anchor if anchor else None
    ROWS.append(
        {
            "measure": measure,
            "ours": round(ours, 2),
            "anchor": None if anchor is None else round(anchor, 2),
            "ratio": None if ratio is None else round(ratio, 2),
            "goal": goal,
            "met": met,
            "unit": unit,
        }
    )


async def interleaved(repeat: int, *calls: Callable[[], Awaitable[object]]) -> list[float]:
    """Median milliseconds of each call, the calls taking turns ``repeat`` times."""
    samples: list[list[float]] = [[] for _ in calls]
    for _ in range(repeat):
        for i, call in enumerate(calls):
            started = time.perf_counter()
            await call()
            samples[i].append((time.perf_counter() - started) * 1000)
    return [statistics.median(s) for s in samples]


def big_backend(clock: ManualClock, pools: int = 200, nodes: int = 200) -> ReferenceBackend:
    backend = ReferenceBackend(clock)
    backend.set_credit(DEMO_ORGANISATION, 1e12)
    backend.install_cluster(
        name="big",
        organisation=DEMO_ORGANISATION,
        cluster_id="big",
        pools=[PublicNodePoolCreateRequest(name=f"p{i}", size="dks.c5.large", count=nodes) for i in range(pools)],
    )
    return backend


def text_of(result: Any) -> str:
    assert not result.is_error, result
    return "".join(getattr(block, "text", "") for block in result.content)


def empty_server() -> MCPServer[Any]:
    anchor: MCPServer[Any] = MCPServer("anchor")

    @anchor.tool()
    def ping() -> str:
        """Answer pong."""
        return "pong"

    return anchor


async def reads(repeat: int, tmp: Path) -> None:
    clock = ManualClock()
    backend = big_backend(clock)
    app = create_app(backend)
    settings = Settings(card_store=str(tmp / "reads.sqlite3"), door_token=DEMO_ADMIN_TOKEN, approver="bench")
    server = build_server(settings, backend=backend)
    async with (
        Client(server, mode="legacy") as client,
        Client(empty_server(), mode="legacy") as anchor,
        httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://door.test") as door,
    ):
        await client.call_tool("list_nodes", {"cluster": "big"})  # cold: queues the first snapshot
        clock.advance(5)
        first = await client.call_tool("list_nodes", {"cluster": "big"})
        t = tokens(text_of(first))
        row("list_nodes text for the model (tokens)", t, None, "≤ 2,000", t <= 2000, "tokens")
        structured = len(json.dumps(first.structured_content))
        row("list_nodes structuredContent (KB)", structured / 1024, None, "(reported)", True, "KB")

        for tool in ("get_cluster", "list_node_pools"):
            result = await client.call_tool(tool, {"cluster": "big"})
            t = tokens(text_of(result))
            row(f"{tool} 200 pools, default (tokens)", t, None, "≤ 2,000, pageable", t <= 2000, "tokens")
        body = (await door.get("/v1/public/clusters/big", headers=HEADERS)).content
        bare = FastAPI()

        @bare.get("/cluster")
        async def cluster() -> Response:
            return Response(body, media_type="application/json")

        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=bare), base_url="http://bare") as plain:
            ours, trivial, served = await interleaved(
                repeat,
                lambda: client.call_tool("get_cluster", {"cluster": "big"}),
                lambda: anchor.call_tool("ping", {}),
                lambda: plain.get("/cluster"),
            )
        row("get_cluster 200 pools round trip (ms) vs empty MCPServer", ours, trivial, "(reported)", True, "ms")
        row("bare FastAPI serving the same cluster JSON (ms)", served, None, "(anchor)", True, "ms")

        listed = await client.list_tools()
        wire, facing = tools_list_texts(listed.tools)
        anchor_list = await anchor.list_tools()
        anchor_wire = json.dumps(
            [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in anchor_list.tools]
        )
        kb = len(wire) / 1024
        row("tools/list on the wire (KB)", kb, len(anchor_wire) / 1024, "≤ 24 KB", kb <= 24, "KB")
        t = tokens(facing)
        row("tools/list model-facing part (tokens)", t, None, "≤ 2,500", t <= 2500, "tokens")


BACKEND_PROCESS = """
import sys, uvicorn
from backend_client.models import PublicNodePoolCreateRequest
from reference_backend.app import create_app
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ORGANISATION
backend = ReferenceBackend(ManualClock())
backend.set_credit(DEMO_ORGANISATION, 1e12)
pools = [PublicNodePoolCreateRequest(name=f"p{i}", size="dks.c5.large", count=200) for i in range(200)]
backend.install_cluster(name="big", organisation=DEMO_ORGANISATION, cluster_id="big", pools=pools)
uvicorn.run(create_app(backend, admin_token="bench"), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


SERVER_RSS_PROCESS = """
import sys, anyio, httpx2, logging
from mcp import Client
from maya_tools.server import build_server
from maya_tools.settings import Settings
logging.disable(logging.INFO)
url, store = sys.argv[1], sys.argv[2]
def peak_mb():  # VmHWM: this process's own peak (ru_maxrss would keep the parent's across exec)
    status = open("/proc/self/status").read()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024
async def main():
    before = peak_mb()
    settings = Settings(card_store=store, door_api_url=url, door_token=sys.argv[3], approver="bench")
    async with Client(build_server(settings), mode="legacy") as client, httpx2.AsyncClient(base_url=url) as door:
        await client.call_tool("list_nodes", {"cluster": "big"})
        await door.post("/_reference/clock/advance", json={"seconds": 40}, headers={"Authorization": "Bearer bench"})
        result = await client.call_tool("list_nodes", {"cluster": "big"})
        assert not result.is_error and result.structured_content["total"] == 40000, result
    print(before, peak_mb())
anyio.run(main)
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def remote_reads(repeat: int, tmp: Path) -> None:
    """list_nodes against the reference backend in its own process (uvicorn on loopback), so this
    process's peak RSS is the server's own (and the SDK client's, and this script's)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    backend = await anyio.open_process([sys.executable, "-c", BACKEND_PROCESS, str(port)], cwd=ROOT, stdout=None)
    try:
        async with httpx2.AsyncClient(base_url=url, timeout=30) as door:
            for _ in range(600):  # the backend builds 40,000 workers, then listens
                try:
                    await door.get("/v1/public/machine-tiers", headers=HEADERS)
                    break
                except httpx2.TransportError:
                    await anyio.sleep(0.1)
            settings = Settings(
                card_store=str(tmp / "remote.sqlite3"), door_api_url=url, door_token=DEMO_ADMIN_TOKEN, approver="bench"
            )
            async with Client(build_server(settings), mode="legacy") as client:
                await client.call_tool("list_nodes", {"cluster": "big"})  # cold: queues the first snapshot
                admin = {"Authorization": "Bearer bench"}
                await door.post("/_reference/clock/advance", json={"seconds": 5}, headers=admin)
                text_of(await client.call_tool("list_nodes", {"cluster": "big"}))
                ours, raw = await interleaved(
                    repeat,
                    lambda: client.call_tool("list_nodes", {"cluster": "big"}),
                    lambda: door.get("/v1/public/clusters/big/nodes", headers=HEADERS),
                )
            # Peak RSS of a process that is only the server (and its SDK client): the reference
            # backend and this script's tokenizer (o200k_base, ~150 MB) live in other processes.
            measured = await anyio.run_process(
                [sys.executable, "-c", SERVER_RSS_PROCESS, url, str(tmp / "rss.sqlite3"), DEMO_ADMIN_TOKEN], cwd=ROOT
            )
            rss_before, rss_after = (float(v) for v in measured.stdout.split())
    finally:
        backend.terminate()
        await backend.wait()
    row("list_nodes 40,000 workers, default page (ms)", ours, raw, "≤ 2× backend GET", ours <= 2 * raw, "ms")
    row("peak RSS after the first list_nodes (MB)", rss_after, rss_before, "≤ 130 MB", rss_after <= 130, "MB")


async def approved_runs(tmp: Path, runs: int) -> None:
    """``runs`` approved scale_node_pool changes (count 3, 4, 3, …) over the default (2026-07-28)
    client, the backend's clock advanced between so each operation finishes: first vs last fifth."""
    clock = ManualClock()
    backend = ReferenceBackend(clock)
    backend.set_credit(DEMO_ORGANISATION, 1e12)
    settings = Settings(card_store=str(tmp / "runs.sqlite3"), door_token=DEMO_ADMIN_TOKEN, approver="bench")

    async def person(context: Any, params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"approve": True})

    samples: list[float] = []
    async with Client(build_server(settings, backend=backend), elicitation_callback=person) as client:
        for i in range(runs):
            started = time.perf_counter()
            result = await client.call_tool(
                "scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3 + i % 2}
            )
            samples.append((time.perf_counter() - started) * 1000)
            assert (result.structured_content or {}).get("status") == "executed", result
            clock.advance(300)  # the scale operation finishes before the next run
    fifth = runs // 5
    first, last = statistics.median(samples[:fifth]), statistics.median(samples[-fifth:])
    row(
        f"approved change over {runs} runs (2026-07-28): last vs first fifth (ms)",
        last,
        first,
        "≤ 1.2×",
        last <= 1.2 * first,
        "ms",
    )


async def planning(tmp: Path, cards: int) -> None:
    """Preview of a pending card with 1 and with ``cards`` cards in the store; backend requests per plan."""
    clock = ManualClock()
    backend = ReferenceBackend(clock)
    backend.set_credit(DEMO_ORGANISATION, 1e12)
    results: dict[int, float] = {}
    for filled in (1, cards):
        path = tmp / f"cards-{filled}.sqlite3"
        settings = Settings(card_store=str(path), door_token=DEMO_ADMIN_TOKEN, approver="bench")
        server = build_server(settings, backend=backend)
        async with Client(server, mode="legacy") as client:
            first = await client.call_tool(
                "scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3}
            )
            assert not first.is_error, first
            card_id = (first.structured_content or {})["card"]["id"]
            store = SqliteCardStore(str(path))
            model = await store.get(card_id)
            assert model is not None
            for i in range(filled - 1):
                await store.create(model.model_copy(update={"id": f"card_fill{i}", "body_digest": f"fill{i}"}))
            await store.close()
            samples = []
            for count in range(4, 24):
                seq = backend.last_request_seq
                started = time.perf_counter()
                result = await client.call_tool(
                    "scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": count}
                )
                samples.append((time.perf_counter() - started) * 1000)
                assert not result.is_error, result
                requests = len(backend.requests_since(seq))
            results[filled] = statistics.median(samples)
    ratio = results[cards] / results[1]
    row(
        f"pending card preview, {cards:,} vs 1 cards in the store (ms)",
        results[cards],
        results[1],
        "≤ 1.2×",
        ratio <= 1.2,
        "ms",
    )
    row("backend requests to plan one card (warm catalog)", requests, None, "≤ 2", requests <= 2, "requests")


def cold_start(repeat: int, tmp: Path) -> None:
    """A fresh interpreter that builds the server pointed at Door (nothing is sent to it), opens its
    SQLite card store and answers initialize + tools/list, against one with an empty ``MCPServer``."""
    store = tmp / "cold" / "cards.sqlite3"
    store.parent.mkdir(exist_ok=True)
    ours_code = (
        "import os, anyio; os.environ['DOOR_API_URL']='http://door.invalid'; os.environ['DOOR_TOKEN']='t';"
        f"os.environ['MAYA_CARD_STORE']={str(store)!r};"
        "from mcp import Client; from maya_tools.server import build_server; from maya_tools.settings import Settings\n"
        "async def main():\n"
        "    async with Client(build_server(Settings.from_env()), mode='legacy') as c:\n"
        "        await c.list_tools()\n"
        "anyio.run(main)"
    )
    anchor_code = (
        "import anyio; from mcp import Client; from mcp.server.mcpserver import MCPServer\n"
        "s = MCPServer('anchor')\n@s.tool()\ndef ping() -> str:\n    return 'pong'\n"
        "async def main():\n    async with Client(s, mode='legacy') as c:\n        await c.list_tools()\n"
        "anyio.run(main)"
    )
    samples: dict[str, list[float]] = {"ours": [], "anchor": []}
    for _ in range(repeat):
        for name, code in (("ours", ours_code), ("anchor", anchor_code)):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True)
            samples[name].append((time.perf_counter() - started) * 1000)
    ours, anchor = statistics.median(samples["ours"]), statistics.median(samples["anchor"])
    row("cold start: process, initialize + tools/list (ms)", ours, anchor, "≤ 1.2×", ours <= 1.2 * anchor, "ms")


async def busiest_step() -> None:
    clock = ManualClock()
    backend = big_backend(clock, nodes=1)
    app = create_app(backend)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://door.test") as door:
        for i in range(200):
            response = await door.patch(
                f"/v1/public/clusters/big/node-pools/p{i}", json={"count": 200}, headers=HEADERS
            )
            assert response.status_code == 202, response.text[:200]
        steps: list[float] = []
        running = 1
        while running:
            clock.advance(1)
            started = time.perf_counter()
            response = await door.get("/v1/public/clusters/big/state", headers=HEADERS)
            steps.append((time.perf_counter() - started) * 1000)
            running = sum(1 for op in response.json()["operations"] if op["status"] == "running")
    row(
        "reference backend: busiest step, 200 pools provisioning (ms)",
        max(steps),
        statistics.median(steps),
        "≤ 100 ms",
        max(steps) <= 100,
        "ms",
    )


async def store_throughput(tmp: Path, postgres: str | None, cards: int) -> None:
    """Card create + approve per second: SQLite, PostgreSQL (one server), PostgreSQL (three replicas)."""
    from benchmarks.stores import sqlite_location, throughput

    def fresh(clock: ManualClock) -> ReferenceBackend:
        return big_backend(clock, pools=cards, nodes=1)

    clock = ManualClock()
    sqlite = await throughput(fresh(clock), clock, [sqlite_location(tmp)], cards)
    row(f"card create + approve, SQLite file ({cards} cards, 10 at a time)", sqlite, None, "reported", True, "cards/s")
    if postgres is None:
        print("PostgreSQL lines skipped: pass --postgres postgresql://… (an empty database or schema)")
        return
    clock = ManualClock()
    one = await throughput(fresh(clock), clock, [postgres], cards)
    row(f"card create + approve, PostgreSQL, one server ({cards} cards)", one, sqlite, "reported", True, "cards/s")
    clock = ManualClock()
    three = await throughput(fresh(clock), clock, [postgres] * 3, cards)
    row(f"card create + approve, PostgreSQL, three replicas ({cards} cards)", three, sqlite, "reported", True, "cards/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cards", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results.json")
    parser.add_argument("--postgres", help="a postgresql:// URL for the card-store throughput lines")
    parser.add_argument("--throughput-cards", type=int, default=200)
    parser.add_argument("--only-stores", action="store_true", help="measure only the card-store throughput lines")
    parser.add_argument(
        "--only-slow", action="store_true", help="measure only list_nodes (time and peak RSS) and the cold start"
    )
    args = parser.parse_args()
    logging.disable(logging.INFO)  # the HTTP clients log every request
    every = not (args.only_stores or args.only_slow)
    with tempfile.TemporaryDirectory() as tmp:
        if not args.only_stores:
            anyio.run(remote_reads, args.repeat, Path(tmp))  # first: the peak RSS is measured there
        if every:
            anyio.run(reads, args.repeat, Path(tmp))
            anyio.run(planning, Path(tmp), args.cards)
            anyio.run(approved_runs, Path(tmp), args.runs)
        if not args.only_slow:
            anyio.run(store_throughput, Path(tmp), args.postgres, args.throughput_cards)
        if every:
            anyio.run(busiest_step)
        if not args.only_stores:
            cold_start(args.repeat, Path(tmp))
    header = f"{'measure':<64} {'ours':>10} {'anchor':>10} {'ratio':>7}  {'goal':<20} met"
    print(header)
    for r in ROWS:
        anchor = "" if r["anchor"] is None else f"{r['anchor']:>10}"
        ratio = "" if r["ratio"] is None else f"{r['ratio']:>7}"
        print(
            f"{r['measure']:<64} {r['ours']:>10} {anchor:>10} {ratio:>7}  {r['goal']:<20} {'met' if r['met'] else 'NOT met'}"
        )
    args.json.write_text(json.dumps({"date": date.today().isoformat(), "tokenizer": TOKENIZER, "rows": ROWS}, indent=2))
    print(f"tokenizer: {TOKENIZER}; written to {args.json}")


if __name__ == "__main__":
    main()
