"""Card create + approve throughput on the SQLite and the PostgreSQL card store, and on three replicas.

Each card scales its own pool of a 200-pool cluster (so no card waits on another's operation); the
cards are planned first, untimed; then each is stored and approved (the guarded claim, the re-read
of the target, the keyed PATCH to an in-process reference backend, the final transition), 10 at a
time. "Three replicas" is three stores with their own connection pools and approval services on one
database, the cards spread over them. Door's cost is the same in every line, so the differences are
the stores'.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import httpx2

from backend_client import DoorClient
from backend_client.models import PublicNodePoolPatchRequest
from confirmation_cards import ApprovalService, Card, CardStore, Planner
from confirmation_cards.stores import open_store
from reference_backend.app import create_app
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ADMIN_TOKEN

CONCURRENCY = 10


async def _no_sleep(_: float) -> None: ...


async def throughput(backend: ReferenceBackend, clock: ManualClock, locations: list[str], cards: int) -> float:
    """Cards stored and approved per second, spread over one store per location."""
    app = create_app()
    app.state.backend = backend
    door = DoorClient("http://door.bench", DEMO_ADMIN_TOKEN, transport=httpx2.ASGITransport(app=app), sleep=_no_sleep)
    planner = Planner(door, clock=clock.now)
    planned: list[Card] = [
        await planner.scale_node_pool("big", f"p{i}", PublicNodePoolPatchRequest(count=2)) for i in range(cards)
    ]
    stores: list[CardStore] = [await open_store(location, pool_size=CONCURRENCY) for location in locations]
    services = [ApprovalService(store, clock=clock.now) for store in stores]
    limit = anyio.Semaphore(CONCURRENCY)

    async def one(n: int, card: Card) -> None:
        async with limit:
            store, service = stores[n % len(stores)], services[n % len(services)]
            await store.create(card)
            done = await service.approve(card.id, approver="bench", door=door)
            assert done.status.value == "executed", done.result

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for n, card in enumerate(planned):
            group.start_soon(one, n, card)
    elapsed = time.perf_counter() - started
    for store in stores:
        await store.close()
    await door.aclose()
    return cards / elapsed


def sqlite_location(tmp: Path) -> str:
    return str(tmp / "throughput.sqlite3")
