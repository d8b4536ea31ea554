"""The pytest plugin: Door's reference backend as fixtures, and a guard that keeps a test on loopback.

Installing maya-tools is enough: pytest loads this module by its ``pytest11`` entry point.

Fixtures:
- ``door``: a live backend on a loopback port (one server per test session, a fresh world per test):
  ``door.url``, ``door.super_admin_token``, ``door.member_token``, ``door.headers()`` and
  ``door.admin``, the admin plane (``advance``, ``add_fault``, ``requests``, ``save_snapshot``, …).
- ``door_app``: the same world in-process, a FastAPI app for ``httpx2.ASGITransport``;
  ``door_app.state.backend`` is the world and ``door_app.state.backend.clock`` its manual clock.

Which world: ``@pytest.mark.door(seed="empty")`` or ``@pytest.mark.door(snapshot="worlds/busy.json")``
(relative to the test's file), else ``--door-seed`` / ``--door-snapshot`` (relative to where pytest
runs), else the demo seed.

The guard (``reference_backend.testing.guard``): ``@pytest.mark.loopback_only`` on a test, or
``--loopback-only`` (or the ini option ``loopback_only = true``) for every test, fails a test whose
code tries to reach a host that is not loopback, from its fixtures' set-up to their teardown,
before anything is sent; the test fails even when its code swallowed the error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from reference_backend.testing.guard import loopback_only

if TYPE_CHECKING:
    from fastapi import FastAPI

    from reference_backend.seed import SeedName
    from reference_backend.testing.live import LiveDoor, LiveServer, Snapshot

SEEDS = ("demo", "empty")
MARKER = "door"
GUARD_MARKER = "loopback_only"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("door", "Door reference backend (maya-tools)")
    group.addoption("--door-seed", choices=SEEDS, default=None, help="the world of the door fixtures (default demo)")
    group.addoption("--door-snapshot", default=None, metavar="FILE", help="start the door fixtures from this snapshot")
    group.addoption(
        "--loopback-only",
        action="store_true",
        default=False,
        help="fail any test that tries to reach a host that is not loopback (as if marked loopback_only)",
    )
    parser.addini("loopback_only", "hold every test to loopback (as --loopback-only)", type="bool", default=False)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(seed='demo'|'empty', snapshot=PATH): the world the door and door_app fixtures start from",
    )
    config.addinivalue_line(
        "markers", f"{GUARD_MARKER}: fail the test if its code tries to reach a host that is not loopback"
    )


def _world_of(request: pytest.FixtureRequest) -> tuple[SeedName, Snapshot | None]:
    """The seed and the snapshot the test asks for: its marker, else the command line, else the demo seed."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is not None:
        unknown = set(marker.kwargs) - {"seed", "snapshot"} or (marker.args and {"positional arguments"})
        if unknown:
            pytest.fail(f"@pytest.mark.door takes seed= and snapshot= only, not {sorted(unknown)}", pytrace=False)
        seed = marker.kwargs.get("seed", "demo")
        snapshot = marker.kwargs.get("snapshot")
        base = Path(str(request.node.path)).parent
    else:
        seed = request.config.getoption("door_seed") or "demo"
        snapshot = request.config.getoption("door_snapshot")
        base = Path(str(request.config.invocation_params.dir))
    if seed not in SEEDS:
        pytest.fail(f"@pytest.mark.door(seed={seed!r}): the seeds are {', '.join(SEEDS)}", pytrace=False)
    if isinstance(snapshot, str | Path):
        snapshot = base / snapshot
    return cast("SeedName", seed), snapshot


def _start(request: pytest.FixtureRequest, make: Any) -> Any:
    from reference_backend.snapshots import SnapshotError

    seed, snapshot = _world_of(request)
    try:
        return make(seed, snapshot)
    except (OSError, SnapshotError) as error:
        problem = str(error)
    shown = "the given bytes" if isinstance(snapshot, bytes) else str(snapshot)
    pytest.fail(f"the door fixtures cannot start from snapshot {shown}: {problem}", pytrace=False)


@pytest.fixture(scope="session")
def door_server() -> Iterator[LiveServer]:
    """The session's live reference backend (uvicorn on a loopback port, in a thread); ``door`` gives each test its own world."""
    from reference_backend.testing.live import LiveServer

    server = LiveServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def door(door_server: LiveServer, request: pytest.FixtureRequest) -> Iterator[LiveDoor]:
    """A live reference backend with a fresh world: its URL, the super_admin and member tokens, its admin plane."""
    handle: LiveDoor = _start(request, door_server.door)
    try:
        yield handle
    finally:
        handle.close()


@pytest.fixture
def door_app(request: pytest.FixtureRequest) -> FastAPI:
    """The reference backend in-process (admin plane on, token ``door-admin``), for ``httpx2.ASGITransport``."""
    from reference_backend.app import create_app
    from reference_backend.testing.live import world

    backend = _start(request, world)
    return create_app(backend, admin_token="door-admin")


def _guarded(item: pytest.Item) -> bool:
    config = item.config
    return bool(
        item.get_closest_marker(GUARD_MARKER) is not None
        or config.getoption("loopback_only")
        or config.getini("loopback_only")
    )


def _held(item: pytest.Item, phase: str) -> Iterator[None]:
    """Run one phase of a guarded test inside the guard; a refusal its code swallowed still fails it."""
    if not _guarded(item):
        yield
        return
    with loopback_only() as refusals:
        yield
    if refusals:
        pytest.fail(f"{refusals.report()} (in the test's {phase})", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _held(item, "set-up")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _held(item, "body")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield from _held(item, "teardown")
