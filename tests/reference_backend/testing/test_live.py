"""`reference_backend.running(...)`: a live backend on loopback for code outside pytest."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

import reference_backend
from backend_client import DoorClient
from backend_client.models import PublicNodePoolPatchRequest
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_CLUSTER_ID
from reference_backend.testing import live
from reference_backend.testing.admin_client import AdminError

CLUSTER = f"/v1/public/clusters/{DEMO_CLUSTER_ID}"


def test_running_serves_the_demo_world_on_loopback_and_stops_on_the_way_out() -> None:
    with reference_backend.running(seed="demo") as door:
        assert door.url.startswith("http://127.0.0.1:")
        clusters = httpx2.get(door.api_url + "/clusters", headers=door.headers()).json()["items"]
        assert [c["name"] for c in clusters] == ["payments-prod", "payments-staging"]
        port = int(door.url.rsplit(":", 1)[1])
        assert door.admin_token not in repr(door)
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


@pytest.mark.anyio
async def test_the_typed_client_and_the_admin_plane_drive_it() -> None:
    """A scale-up through `DoorClient`, finished by moving the clock through the admin plane (R-OP-03)."""
    with reference_backend.running() as door:
        async with DoorClient(door.url, door.super_admin_token) as client:
            await client.update_node_pool(DEMO_CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=3))
            assert (await client.get_cluster_state(DEMO_CLUSTER_ID)).operations[0].status == "running"
            door.admin.advance(130)
            assert (await client.get_cluster_state(DEMO_CLUSTER_ID)).operations[0].status == "succeeded"
        assert [r["status"] for r in door.admin.requests()] == [202, 200, 200]
        with pytest.raises(AdminError, match="409 to PUT /_reference/clock"):
            door.admin.set_clock(door.admin.now().replace(year=2020))


def test_it_starts_from_a_snapshot_given_as_bytes_or_as_a_file(tmp_path: Path) -> None:
    backend = ReferenceBackend(ManualClock())
    backend.set_credit("payments", 42.0)
    saved = backend.save_snapshot()
    path = tmp_path / "world.json"
    path.write_bytes(saved)
    for snapshot in (saved, path, str(path)):
        with reference_backend.running(snapshot=snapshot) as door:
            assert door.admin.save_snapshot() == saved


def test_it_listens_on_loopback_only() -> None:
    with pytest.raises(ValueError, match=r"loopback only, not on '0\.0\.0\.0'"):
        live.LiveServer(host="0.0.0.0")


def test_importing_the_world_or_the_plugin_loads_no_server() -> None:
    """The plugin loads in every pytest run of a project that installed the package: it must cost nothing."""
    code = (
        "import sys, reference_backend.backend, reference_backend.testing.plugin;"
        "print(sorted(m for m in ('uvicorn', 'fastapi', 'reference_backend.testing.live') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_its_connections_send_without_nagle_delay() -> None:
    """An answer is written in parts (head, body); with Nagle on, the body waits for the client's delayed
    ACK, 40 ms a request. asyncio sets TCP_NODELAY only on connections from a socket made for IPPROTO_TCP."""
    server = live.LiveServer()
    try:
        server.serve(ReferenceBackend(ManualClock()))
        with httpx2.Client(base_url=server.url) as client:
            assert client.get("/openapi.json").status_code == 200
            (connection,) = server._server.server_state.connections
            accepted = connection.transport.get_extra_info("socket")
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    finally:
        server.stop()
