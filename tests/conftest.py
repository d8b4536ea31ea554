"""Fixtures shared by every test package: the reference backend on a manual clock, reached over ASGI."""

from __future__ import annotations

import atexit
import gc
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest

from tests.rewrite_cache import prewarm, unmark_blocked_plugins

if TYPE_CHECKING:  # imported by the fixtures: the xdist controller, which runs no test, starts its workers sooner
    import httpx2
    from fastapi import FastAPI

    from reference_backend.backend import ReferenceBackend
    from reference_backend.clock import ManualClock
    from tests.postgres import PostgresServer

# pytester runs small example suites the way a user's project would (tests/reference_backend/testing/).
pytest_plugins = ["pytester"]

ADMIN_TOKEN = "test-admin-token"
BASE_URL = "http://door.test"

# At exit the interpreter collects and tears down every object the session made: about a second in a
# worker that ran a few hundred tests, which the xdist controller waits for. pytest's own last
# collection (which reports unraisable exceptions) has run by then, so the objects are frozen instead.
atexit.register(gc.freeze)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> ManualClock:
    from reference_backend.clock import ManualClock

    return ManualClock()


@pytest.fixture
def backend(clock: ManualClock) -> ReferenceBackend:
    """The demo world (payments-prod with pool `workers`), in memory, on a clock only tests move."""
    from reference_backend.backend import ReferenceBackend

    return ReferenceBackend(clock=clock, seed="demo")


@pytest.fixture(scope="session")
def door_app() -> FastAPI:
    """One reference backend app (admin plane on) for the whole session.

    Its routes read ``app.state.backend``, so each test points it at its own world (``app``) rather
    than building an app whose routes FastAPI would prepare again on its first request (~10 ms).
    """
    from reference_backend.app import create_app

    return create_app(admin_token=ADMIN_TOKEN)


@pytest.fixture
def app(door_app: FastAPI, backend: ReferenceBackend) -> FastAPI:
    """The session's app, serving this test's ``backend`` (its faults and request log included)."""
    door_app.state.backend = backend
    return door_app


@pytest.fixture
async def door(app: FastAPI) -> AsyncIterator[httpx2.AsyncClient]:
    """A raw HTTP client of the reference backend app (no token set: pass `headers=auth(...)`)."""
    import httpx2

    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE_URL) as client:
        yield client


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


RUN = "MAYA_TEST_RUN"
"""Set by an xdist controller for its workers: the id under which they share one PostgreSQL server."""


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """With ``-n`` and no ``--dist``: ``worksteal``, so that a worker that runs out takes half of another's
    queue and the run does not end on one worker's tail (xdist would choose ``load``). Runs before
    xdist's own hook; ``-p no:xdist`` leaves these options undefined, and this does nothing."""
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", None) == "no":
        config.option.dist = "worksteal"


def pytest_configure(config: pytest.Config) -> None:
    unmark_blocked_plugins(config)  # schemathesis and hypothesis are libraries here, not plugins to rewrite
    if getattr(config.option, "numprocesses", None) and not os.environ.get("PYTEST_XDIST_WORKER"):  # the controller
        os.environ[RUN] = uuid.uuid4().hex  # inherited by the workers it is about to start
        prewarm(config)  # the workers it is about to start read the rewritten test modules, not rewrite them


def pytest_unconfigure(config: pytest.Config) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER") and RUN in os.environ:
        from tests.postgres import stop_shared_postgres

        stop_shared_postgres(os.environ.pop(RUN))


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A real PostgreSQL server, never skipped: one for the whole run, shared by the xdist workers
    (started by the first that needs it, stopped by the controller), or this process's own."""
    from tests.postgres import running_postgres, shared_postgres

    if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(RUN):
        yield shared_postgres(os.environ[RUN])
    else:
        yield from running_postgres()


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> str:
    """A ``postgresql://`` URL of an empty schema of its own on the session's server."""
    from tests.postgres import fresh_schema

    return postgres.schema_url(fresh_schema())


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than xdist's own count of the cores (``PYTEST_XDIST_AUTO_NUM_WORKERS``,
    when set, is taken as it is). A fifth of the suite's time is spent waiting on real processes (Door's
    latency and retries, a settle window, a killed server's lease), which a third worker fills on a
    2-core machine: measured back to back there, 48.9 s with three workers against 64.2 s with two, for
    the same CPU (85–86 s of it)."""
    from xdist.plugin import pytest_xdist_auto_num_workers as cores

    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return cores(config)
    return cores(config) + 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """The sizes the packaging tests measured this run (``tests/packaging/build.py``), in one line."""
    factory = getattr(config, "_tmp_path_factory", None)
    if os.environ.get("PYTEST_XDIST_WORKER") or factory is None:
        return
    from tests.packaging.build import SIZES

    path = factory.getbasetemp() / SIZES
    if path.is_file():
        import json

        sizes = json.loads(path.read_text())
        terminalreporter.write_line("maya-tools packaging: " + ", ".join(f"{k} {v:,} bytes" for k, v in sizes.items()))
