"""Settings come from the environment once; cards live on the wall clock unless a test drives time."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from backend_client import DoorClient
from backend_client.models import PublicNodePoolPatchRequest
from maya_tools.embedded import card_time
from maya_tools.settings import Settings
from reference_backend.clock import ManualClock, ScaledClock
from reference_backend.seed import DEMO_ADMIN_TOKEN


def test_settings_read_every_variable_once() -> None:
    env = {
        "DOOR_API_URL": "https://door.example",
        "DOOR_TOKEN": "secret-token",
        "MAYA_CARD_STORE": "/tmp/cards.sqlite3",
        "MAYA_READ_ONLY": "true",
        "MAYA_CARD_TTL_SECONDS": "120",
        "MAYA_REFERENCE_TIME_SCALE": "50",
        "MAYA_USER": "ada",
        "MAYA_PLAN_STEP_TIMEOUT_SECONDS": "90",
    }
    settings = Settings.from_env(env)
    assert settings.plan_step_timeout_seconds == 90.0
    assert Settings.from_env({}).plan_step_timeout_seconds == 1800.0
    assert settings.door_api_url == "https://door.example" and not settings.embedded
    assert settings.door_token == "secret-token"
    assert settings.card_store == "/tmp/cards.sqlite3"
    assert settings.read_only is True
    assert settings.card_ttl_seconds == 120.0
    assert settings.reference_time_scale == 50.0
    assert settings.approver == "ada"
    assert "secret-token" not in repr(settings)


def test_no_door_url_means_the_embedded_backend_and_overrides_win() -> None:
    settings = Settings.from_env({"HOME": "/home/ada", "XDG_STATE_HOME": "/state"}, read_only=True)
    assert settings.embedded and settings.read_only
    assert settings.card_store == "/state/maya-tools/cards.sqlite3"


def test_cards_expire_on_the_wall_clock_even_when_the_embedded_backend_runs_fast() -> None:
    """A person gets a card's whole lifetime to read it, whatever the simulated time scale."""
    fast = ScaledClock(time_scale=1_000_000)
    now = datetime.now(UTC)
    assert abs(card_time(fast)() - now) < timedelta(seconds=5)
    assert abs(fast.now() - now) > timedelta(days=1)  # the backend's own time is elsewhere


def test_a_manual_clock_drives_card_time_in_tests() -> None:
    clock = ManualClock()
    clock.advance(3600)
    assert card_time(clock)() == clock.now()


def test_the_card_store_defaults_under_home_without_xdg_state_home() -> None:
    assert Settings.from_env({"HOME": "/home/ada"}).card_store == "/home/ada/.local/state/maya-tools/cards.sqlite3"


@pytest.mark.anyio
async def test_starting_the_server_closes_cards_a_stopped_server_left_executing(tmp_path: Path) -> None:
    from confirmation_cards import CardStatus, SqliteCardStore
    from confirmation_cards.stores import AuditEntry
    from maya_tools.runtime import open_runtime
    from reference_backend.backend import ReferenceBackend

    clock = ManualClock()
    backend = ReferenceBackend(clock=clock, seed="demo")
    settings = Settings(card_store=str(tmp_path / "cards.sqlite3"))
    async with open_runtime(settings, "memory", backend=backend) as runtime:
        door = DoorClient(runtime.base_url, DEMO_ADMIN_TOKEN, http_client=runtime.http, sleep=runtime.sleep)
        card = await runtime.store.create(
            await runtime.planner(door).scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=3))
        )
        await runtime.store.transition(
            card.id,
            expected=CardStatus.PENDING,
            to=CardStatus.EXECUTING,
            entry=AuditEntry("approved", clock.now(), by="tester"),
            update={"approved_at": clock.now()},
        )
    clock.advance(600)  # the server was down a while
    async with open_runtime(settings, "memory", backend=backend) as runtime:
        with anyio.fail_after(10):
            await runtime.swept.wait()
    reopened = SqliteCardStore(tmp_path / "cards.sqlite3")
    stored = await reopened.get(card.id)
    assert stored is not None and stored.status is CardStatus.FAILED


POINTED_AT_DOOR = """
import sys

import anyio
from mcp import Client

from maya_tools.server import build_server
from maya_tools.settings import Settings


async def main() -> None:
    async with Client(build_server(Settings.from_env())) as client:
        assert "scale_node_pool" in {tool.name for tool in (await client.list_tools()).tools}


anyio.run(main)
print(sorted(m for m in sys.modules if m.partition(".")[0] in {"fastapi", "reference_backend"}))
"""


def test_a_server_pointed_at_door_loads_neither_fastapi_nor_the_reference_backend() -> None:
    """A fresh interpreter builds and starts the server with DOOR_API_URL set (nothing is sent to it)."""
    env = {**os.environ, "DOOR_API_URL": "http://127.0.0.1:9", "MAYA_CARD_STORE": ":memory:"}
    env.pop("DOOR_TOKEN", None)
    done = subprocess.run(
        [sys.executable, "-c", POINTED_AT_DOOR], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
