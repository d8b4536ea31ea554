"""Over real HTTP: a uvicorn process started by the test, reached on loopback, stopped with SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from backend_client.tls import verifying_tls
from reference_backend import seed
from tests.launch import Launched, launch

pytestmark = pytest.mark.http

ADMIN_TOKEN = "http-admin-token"
READY_DEADLINE_SECONDS = 20.0
STOP_DEADLINE_SECONDS = 10.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until_listening(process: Launched, port: int) -> None:
    """Poll the port with a bounded deadline; fail early if the process dies."""
    deadline = time.monotonic() + READY_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the server exited early with {process.poll()}: {printed(process)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)  # polling a real process's port; the simulated world never sleeps
    pytest.fail("the server did not listen before the deadline")


def start(port: int, *extra: str) -> Launched:
    """``maya-tools reference-backend`` in a process of its own, forked from the worker's fork server
    (``tests.launch``); everything it prints, stdout and stderr, goes to its log."""
    log = Path(tempfile.mkdtemp(prefix="maya-http-")) / "output.log"
    return launch(["reference-backend", "--port", str(port), *extra], dict(os.environ), log, stdout=True)


def printed(process: Launched) -> str:
    """What the process has printed so far (nothing, if it died before it opened its log)."""
    return process.log.read_text() if process.log.exists() else ""


def stop(process: Launched) -> str:
    """SIGTERM, then a clean exit (status 0) within the deadline; returns everything it printed."""
    process.send_signal(signal.SIGTERM)
    status = process.wait(timeout=STOP_DEADLINE_SECONDS)
    output = printed(process)
    if status is None:
        process.kill()
        process.wait(timeout=5)
        pytest.fail("the server did not stop on SIGTERM")
    assert status == 0, output
    return output


@pytest.fixture
def server() -> Iterator[str]:
    port = free_port()
    process = start(port, "--manual-clock", "--admin-token", ADMIN_TOKEN)
    try:
        wait_until_listening(process, port)
        yield f"http://127.0.0.1:{port}"
    finally:
        if process.poll() is None:
            output = stop(process)
            assert ADMIN_TOKEN not in output
            assert "Traceback" not in output


def test_a_scale_up_over_http_completes_when_the_admin_clock_advances(server: str) -> None:
    """R-PATCH-08/R-OP-03 end to end: 202, running, then succeeded after 120 simulated seconds."""
    admin = {"Authorization": f"Bearer {seed.DEMO_ADMIN_TOKEN}"}
    cluster = f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}"
    with httpx2.Client(verify=verifying_tls(), base_url=server, timeout=5) as client:
        accepted = client.patch(f"{cluster}/node-pools/workers", headers=admin, json={"count": 3})
        assert accepted.status_code == 202
        assert accepted.headers["x-request-id"]
        assert client.get(f"{cluster}/state", headers=admin).json()["operations"][0]["status"] == "running"
        ref = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        assert client.post("/_reference/clock/advance", headers=ref, json={"seconds": 120}).status_code == 200
        assert client.get(f"{cluster}/state", headers=admin).json()["operations"][0]["status"] == "succeeded"


def test_errors_over_http_are_problems(server: str) -> None:
    """R-AUTH-01 over the wire: 401 problem+json; an unknown route is a 404 problem."""
    with httpx2.Client(verify=verifying_tls(), base_url=server, timeout=5) as client:
        response = client.get("/v1/public/clusters")
        assert (response.status_code, response.headers["content-type"]) == (401, "application/problem+json")
        assert client.get("/nowhere").status_code == 404
        assert client.get("/openapi.json").status_code == 200


def test_the_state_file_survives_a_process_restart(tmp_path: Path) -> None:
    """Persistence across processes: the pool added before SIGTERM is there after a restart."""
    state = tmp_path / "door.sqlite"
    admin = {"Authorization": f"Bearer {seed.DEMO_ADMIN_TOKEN}"}
    pools = f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}/node-pools"
    for round_ in range(2):
        port = free_port()
        process = start(port, "--manual-clock", "--state", str(state))
        try:
            wait_until_listening(process, port)
            with httpx2.Client(verify=verifying_tls(), base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
                if round_ == 0:
                    body = {"name": "batch", "size": "dks.c5.large"}
                    assert client.post(pools, headers=admin, json=body).status_code == 202
                names = [p["name"] for p in client.get(pools, headers=admin).json()["items"]]
                assert names == ["workers", "batch"]
        finally:
            stop(process)
