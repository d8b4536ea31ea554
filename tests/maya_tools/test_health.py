"""``/healthz`` says ready only while the card store answers and the first sweep ran; ``/livez`` only that the process serves."""

from __future__ import annotations

import anyio
import httpx2
import pytest

from maya_tools.http import health_app
from maya_tools.runtime import Runtime, open_runtime
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend

pytestmark = pytest.mark.anyio


async def probe(current: Runtime | None, path: str = "/healthz") -> httpx2.Response:
    app = health_app(lambda: current)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://maya.test") as http:
        return await http.get(path)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_ready_while_the_store_answers_and_not_once_it_stops(
    kind: str, request: pytest.FixtureRequest, tmp_path: object, backend: ReferenceBackend
) -> None:
    store = str(request.getfixturevalue("postgres_url")) if kind == "postgresql" else ":memory:"
    starting = await probe(None)
    assert starting.status_code == 503 and "starting" in starting.json()["detail"]

    async with open_runtime(Settings(card_store=store), "memory", backend=backend) as runtime:
        with anyio.fail_after(10):
            await runtime.swept.wait()
        ready = await probe(runtime)
        assert (ready.status_code, ready.json()) == (200, {"status": "ok", "store": kind})
        assert ready.headers["cache-control"] == "no-store"

        await runtime.store.close()  # the database goes away under a running server
        down = await probe(runtime)
        assert down.status_code == 503
        assert down.json()["detail"].startswith("the card store did not answer a read")
        assert (await probe(runtime, "/livez")).status_code == 200
