"""``maya-tools cards`` shows an operator the store (SQLite or PostgreSQL) and changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from backend_client import DoorClient
from backend_client.models import PublicNodePoolPatchRequest
from confirmation_cards import ApprovalService, Planner
from confirmation_cards.stores import open_store
from maya_tools.cli import main
from reference_backend.clock import ManualClock
from tests.confirmation_cards.conftest import SECRETS

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "cards.sqlite3")
    return str(request.getfixturevalue("postgres_url"))


async def run(argv: list[str]) -> int:
    """The command as an operator runs it: its own event loop, here in a worker thread."""
    return await anyio.to_thread.run_sync(main, argv)


async def test_list_show_and_audit_read_the_store_and_change_nothing(
    location: str, planner: Planner, admin: DoorClient, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    store = await open_store(location)
    done = await store.create(
        await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
    )
    clock.advance(1)
    waiting = await store.create(
        await planner.relabel_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(labels={"t": "x\x1b[31m"}))
    )
    await ApprovalService(store, clock=clock.now).approve(done.id, approver="ada (MCP elicitation)", door=admin)
    before = [(c.id, c.status) for c in await store.list()]
    await store.close()

    assert await run(["cards", "--card-store", location, "list"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].startswith(waiting.id) and "pending" in listing[0]  # newest first
    assert listing[1].startswith(done.id) and "executed" in listing[1]
    assert listing[-1] == "2 of 2 card(s)."

    assert await run(["cards", "--card-store", location, "list", "--status", "executed", "--json"]) == 0
    assert [c["id"] for c in json.loads(capsys.readouterr().out)] == [done.id]

    assert await run(["cards", "--card-store", location, "show", waiting.id]) == 0
    shown = capsys.readouterr().out
    assert "status: pending" in shown and "\x1b" not in shown

    assert await run(["cards", "--card-store", location, "audit", done.id]) == 0
    *trail, total = capsys.readouterr().out.splitlines()
    assert [line.split()[4] for line in trail] == ["created", "approved", "executed"]  # seq, date, time, UTC, event
    assert total == "3 event(s)."
    assert "ada (MCP elicitation)" in trail[1] and "door=202" in trail[2]

    assert await run(["cards", "--card-store", location, "audit", "card_nothere"]) == 1
    assert "no card 'card_nothere'" in capsys.readouterr().err
    for text in (shown, "\n".join(listing), "\n".join(trail)):
        assert not any(secret in text for secret in SECRETS)

    reopened = await open_store(location)
    assert [(c.id, c.status) for c in await reopened.list()] == before
    await reopened.close()


def test_a_missing_sqlite_file_is_refused_not_created(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nothing.sqlite3"
    assert main(["cards", "--card-store", str(missing), "list"]) == 2
    assert "there is no card store" in capsys.readouterr().err and not missing.exists()
