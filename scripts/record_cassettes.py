"""Record the contract cassettes under ``tests/cassettes/`` from the reference backend over real HTTP.

    .venv/bin/python scripts/record_cassettes.py            # every flow
    .venv/bin/python scripts/record_cassettes.py scale_pool # only the named ones

For each flow it starts ``python -m maya_tools.cli reference-backend --manual-clock --seed demo`` on a
free loopback port (a fresh server, so ids and worker names do not depend on which flows were
recorded before), applies the flow's admin-plane setup, then runs
the flow through ``DoorClient`` inside ``vcr.use_cassette(record_mode="all")``. Waiting in a flow
advances the backend's manual clock through the admin plane, so recording takes seconds. Admin calls
and the ``Authorization`` header are never written; the host is recorded as ``http://door.test``.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import vcr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backend_client import DoorClient  # noqa: E402
from scripts.cassette_flows import FLOWS, FORBIDDEN_IN_CASSETTES, Flow, vcr_options  # noqa: E402

CASSETTES = ROOT / "tests" / "cassettes"
log = logging.getLogger("record_cassettes")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _start_backend(port: int, admin_token: str) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "maya_tools.cli",
        "reference-backend",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--manual-clock",
        "--admin-token",
        admin_token,
        "--seed",
        "demo",
    ]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait_until_up(base_url: str, admin_token: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if server.poll() is not None:
            stderr = server.stderr.read().decode() if server.stderr else ""
            raise SystemExit(f"the reference backend exited with {server.returncode}:\n{stderr}")
        try:
            httpx2.get(
                f"{base_url}/_reference/clock", headers={"Authorization": f"Bearer {admin_token}"}
            ).raise_for_status()
            return
        except httpx2.HTTPError:
            time.sleep(0.1)
    raise SystemExit("the reference backend did not start within 20 s")


async def _record(flow: Flow, base_url: str, admin_token: str) -> None:
    admin_headers = {"Authorization": f"Bearer {admin_token}"}
    async with httpx2.AsyncClient(base_url=base_url, headers=admin_headers) as admin:
        for call in flow.setup:
            (await admin.request(call.method, call.path, json=call.json)).raise_for_status()

        async def advance_clock(seconds: float) -> None:
            (await admin.post("/_reference/clock/advance", json={"seconds": seconds})).raise_for_status()

        def client_for(token: str) -> DoorClient:
            return DoorClient(base_url, token, sleep=advance_clock)

        path = CASSETTES / flow.cassette
        path.unlink(missing_ok=True)
        with vcr.use_cassette(str(path), record_mode="all", **vcr_options()):
            result = await flow.run(client_for)
    log.info("recorded %s (%d keys)", path.relative_to(ROOT), len(result))


async def _main(names: list[str]) -> None:
    flows = [f for f in FLOWS if not names or f.name in names]
    unknown = set(names) - {f.name for f in FLOWS}
    if unknown:
        raise SystemExit(f"unknown flows: {', '.join(sorted(unknown))}")
    CASSETTES.mkdir(parents=True, exist_ok=True)
    admin_token = secrets.token_urlsafe(16)
    for flow in flows:
        # A fresh server per flow: the backend's id counter survives /_reference/reset.
        port = _free_port()
        base_url = f"http://127.0.0.1:{port}"
        server = _start_backend(port, admin_token)
        try:
            _wait_until_up(base_url, admin_token, server)
            await _record(flow, base_url, admin_token)
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
    for path in CASSETTES.glob("*.yaml"):
        text = path.read_text()
        leaked = [secret for secret in (*FORBIDDEN_IN_CASSETTES, admin_token) if secret in text]
        if leaked:
            path.unlink()
            raise SystemExit(f"{path} held {len(leaked)} secret(s) and was deleted; fix the filters")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("flows", nargs="*", help="flow names (default: all)")
    args = parser.parse_args()
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "WARNING"), format="%(message)s")
    log.setLevel(logging.INFO)
    anyio.run(_main, args.flows)


if __name__ == "__main__":
    main()
