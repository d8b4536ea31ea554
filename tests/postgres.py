"""A real PostgreSQL server for the tests, started from the machine's own binaries (Debian's
``postgresql`` package: ``initdb`` and ``pg_ctl``), on a free loopback port, for the test session.

Never skipped: without the binaries the fixture fails and says how to install them (``.ci/run``
installs them on a fresh machine). PostgreSQL refuses to run as root, so under root the server
runs as the ``postgres`` system user the package creates. Each test gets its own schema, so tests
share one server and still start from an empty store. Under xdist the workers of one run share one
server too (:func:`shared_postgres`): the first worker that needs it starts it, the run's controller
stops it; starting a server costs about a second of CPU.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg

from tests.maya_tools.live import free_port, wait_until
from tests.reachable import folder_for_another_user

INSTALL = "install Debian's postgresql package (`apt-get install -y postgresql`; .ci/run does it)"


def binaries() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``: on PATH, else the newest under /usr/lib/postgresql."""
    found = shutil.which("initdb")
    if found is not None and shutil.which("pg_ctl") is not None:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not versions:
        raise RuntimeError(f"PostgreSQL's initdb and pg_ctl are not on this machine: {INSTALL}")
    return Path(versions[-1]).parent


@dataclass
class PostgresServer:
    """One running server: ``url`` of its ``postgres`` database (trust auth, loopback only)."""

    port: int
    data: Path
    bindir: Path
    user: str | None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def schema_url(self, schema: str) -> str:
        """A URL whose connections see only ``schema`` (created here, empty)."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        return f"{self.url}?options={quote(f'-csearch_path={schema}')}"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            user=self.user,
            check=False,
            cwd=self.data.parent,
        )

    def start(self) -> None:
        done = self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.data / "log"))
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {done.stderr or done.stdout}")

    def stop(self) -> None:
        self._run("pg_ctl", "stop", "-m", "immediate", "-w", "-D", str(self.data))


def start_postgres() -> PostgresServer:
    bindir = binaries()
    user = "postgres" if os.geteuid() == 0 else None
    # The postgres user must reach its data folder: not under a private temporary folder or checkout.
    root = folder_for_another_user("maya-pg-") if user is not None else Path(tempfile.mkdtemp(prefix="maya-pg-"))
    data = root / "data"
    if user is not None:
        shutil.chown(root, user=user)
    port = free_port()
    server = PostgresServer(port, data, bindir, user)
    init = server._run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
    if init.returncode != 0:
        raise RuntimeError(f"initdb failed: {init.stderr or init.stdout}")
    with (data / "postgresql.conf").open("a") as conf:
        # A test server: loopback only, its socket in its own directory, no waiting for the disk.
        conf.write(
            f"listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{data}'\n"
            "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\nmax_connections = 300\n"
        )
    server.start()
    wait_until(lambda: _answers(server.url), "PostgreSQL to accept connections", timeout=60)
    return server


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2):
            return True
    except psycopg.OperationalError:
        return False


def running_postgres() -> Iterator[PostgresServer]:
    """Start a server for the session and remove it and its files afterwards."""
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.data.parent, ignore_errors=True)


def _shared_record(run: str) -> Path:
    return Path(tempfile.gettempdir()) / f"maya-pg-run-{run}.json"


def shared_postgres(run: str) -> PostgresServer:
    """The server of test run ``run``, shared by its xdist workers: the first caller starts it (under a
    file lock) and records it; the others find the record. :func:`stop_shared_postgres` ends it."""
    record = _shared_record(run)
    with open(record.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if record.exists():
            known = json.loads(record.read_text())
            return PostgresServer(known["port"], Path(known["data"]), Path(known["bindir"]), known["user"])
        server = start_postgres()
        record.write_text(
            json.dumps(
                {"port": server.port, "data": str(server.data), "bindir": str(server.bindir), "user": server.user}
            )
        )
        return server


def stop_shared_postgres(run: str) -> None:
    """Stop run ``run``'s shared server, if a worker started one; called by the run's controller as the
    run ends. The stop and the removal of its files go on in a process of their own (about 0.4 s) that
    the run does not wait for."""
    record = _shared_record(run)
    if record.exists():
        known = json.loads(record.read_text())
        record.unlink()
        pg_ctl = Path(known["bindir"]) / "pg_ctl"
        subprocess.Popen(
            [
                "sh",
                "-c",
                '"$1" stop -m immediate -w -D "$2" >/dev/null 2>&1; rm -rf "$3"',
                "stop",
                pg_ctl,
                known["data"],
                str(Path(known["data"]).parent),
            ],
            user=known["user"],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    record.with_suffix(".lock").unlink(missing_ok=True)


def fresh_schema() -> str:
    return f"t_{secrets.token_hex(6)}"
