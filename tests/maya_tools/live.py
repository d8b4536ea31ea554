"""Real processes for the fault and hijack tests: a `maya-tools reference-backend` and a `maya-tools serve`
over streamable HTTP pointed at it, each on a free loopback port, killed or restarted as a test needs."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from backend_client.tls import verifying_tls
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_CLUSTER_ID
from tests.launch import Launched, launch

REF_ADMIN = "live-admin-token"
PATCH_ROUTE = "PATCH /v1/public/clusters/{cluster_id}/node-pools/{pool}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll another process's state until ``condition`` holds (a process, not a clock, is waited for)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Proc:
    """``maya-tools <args>`` in its own process (forked from the worker's preloaded fork server,
    ``tests.launch``), its stderr in a log file: never a pipe nobody reads, which a server would
    block on once its log outgrew the pipe's 64 KB."""

    def __init__(self, args: list[str], port: int, env: dict[str, str], *, wait: bool = True) -> None:
        self.args, self.port, self.env = args, port, env
        self.process: Launched | None = None
        self.log = Path(tempfile.mkdtemp(prefix="maya-proc-")) / "stderr.log"
        self.start(wait=wait)

    def start(self, *, wait: bool = True) -> None:
        self.process = launch(self.args, self.env, self.log)
        if wait:
            self.wait_listening()

    def logged(self) -> str:
        """Everything the process (and its earlier starts) wrote to stderr so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_listening(self) -> None:
        process = self.process
        assert process is not None

        def up() -> bool:
            if process.poll() is not None:
                raise AssertionError(self.logged() or "exited")
            return _listening(self.port)

        wait_until(up, f"{self.args[0]} to listen on {self.port}")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """SIGKILL: what a test asserts is settled before its teardown, and a graceful uvicorn shutdown
        of each process would add half a second to every test."""
        if self.process is not None and self.process.poll() is None:
            self.kill()
        shutil.rmtree(self.log.parent, ignore_errors=True)


NO_LINK_WAIT = {"MAYA_LINK_WAIT_SECONDS": "0"}
"""A test that leaves an opened link undecided hears ``pending`` at once; the wait has its own tests."""


def base_env() -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if k not in {"DOOR_API_URL", "DOOR_TOKEN", "MAYA_CARD_STORE"}}
    return {**kept, **NO_LINK_WAIT}


class Live:
    """One reference backend (SQLite state, manual clock, admin plane) and one server in front of it."""

    def __init__(self, tmp: Path, **server_env: str) -> None:
        self.tmp = tmp
        self.door_port = free_port()
        self.door_url = f"http://127.0.0.1:{self.door_port}"
        self.door = Proc(
            [
                "reference-backend",
                "--port",
                str(self.door_port),
                "--state",
                str(tmp / "door.sqlite3"),
                "--admin-token",
                REF_ADMIN,
                "--manual-clock",
            ],
            self.door_port,
            base_env(),
            wait=False,  # the server needs Door only for requests: both start at once
        )
        self.card_store = tmp / "cards.sqlite3"
        self.server_env = {
            **base_env(),
            "DOOR_API_URL": self.door_url,
            "DOOR_TOKEN": DEMO_ADMIN_TOKEN,  # the server's own token: only to read Door back when settling
            "MAYA_CARD_STORE": str(self.card_store),
            "MAYA_DOOR_TIMEOUT_SECONDS": "1",
            "MAYA_SETTLE_SECONDS": "3",
            "MAYA_SWEEP_SECONDS": "1",
            **server_env,
        }
        self.servers: list[Proc] = []
        self.serve()
        self.door.wait_listening()

    def serve(self) -> str:
        port = free_port()
        self.servers.append(
            Proc(["serve", "--transport", "streamable-http", "--port", str(port)], port, self.server_env)
        )
        return self.url

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.servers[-1].port}/mcp"

    def close(self) -> None:
        for server in self.servers:
            server.stop()
        self.door.stop()

    # --- Door, as the test sees it -----------------------------------------------------------

    def admin(self, method: str, path: str, **kwargs: Any) -> httpx2.Response:
        with httpx2.Client(verify=verifying_tls(), base_url=self.door_url, timeout=10) as http:
            return http.request(method, path, headers={"Authorization": f"Bearer {REF_ADMIN}"}, **kwargs)

    def fault(self, **spec: Any) -> None:
        response = self.admin("POST", "/_reference/faults", json=spec)
        assert response.status_code == 201, response.text

    def faults_left(self) -> int:
        return len(self.admin("GET", "/_reference/faults").json())

    def changes(self, kind: str = "pool.update") -> int:
        """How many times Door applied a change of this kind (one operation per accepted mutation)."""
        with httpx2.Client(verify=verifying_tls(), base_url=self.door_url, timeout=10) as http:
            state = http.get(
                f"/v1/public/clusters/{DEMO_CLUSTER_ID}/state", headers={"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
            )
        assert state.status_code == 200, state.text
        return sum(op["kind"] == kind for op in state.json()["operations"])


@contextmanager
def running(tmp: Path, **server_env: str) -> Iterator[Live]:
    """A real reference backend and a real server in front of it (``server_env`` over the defaults), then stopped."""
    world = Live(tmp, **server_env)
    try:
        yield world
    finally:
        world.close()


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    """A real reference backend and a real server in front of it, stopped after the test."""
    with running(tmp_path) as world:
        yield world


@pytest.fixture(scope="session")
def shared_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """One backend and server per test process, for the tests that stop no process (see ``shared_live``)."""
    with running(tmp_path_factory.mktemp("shared-live")) as world:
        yield world


@pytest.fixture
def shared_live(shared_world: Live) -> Live:
    """Like ``live``, for a test that kills and restarts nothing: the process pair is shared (starting one
    costs a second or two), and Door is reset to the demo world with no faults before each test."""
    response = shared_world.admin("POST", "/_reference/reset", json={"seed": "demo"})
    assert response.status_code == 200, response.text
    return shared_world
