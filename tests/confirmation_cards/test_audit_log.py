"""The audit log (``MAYA_AUDIT_LOG``) holds exactly the rows the card store kept, in order, as the
lines ``maya-tools cards audit --json`` prints; a log that cannot be written never stops a card."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from backend_client import DoorClient
from backend_client.models import PublicNodePoolPatchRequest
from confirmation_cards import ApprovalService, CardStatus, Planner
from confirmation_cards.audit_log import AuditLog, audit_line
from confirmation_cards.models import AuditEvent
from confirmation_cards.stores import AuditEntry, CardStore, open_store
from maya_tools.cli import main
from reference_backend.clock import ManualClock
from tests.confirmation_cards.conftest import SECRETS

pytestmark = pytest.mark.anyio

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FIELDS = [
    "v", "ts", "seq", "card_id", "event", "status", "by", "action", "cluster", "cluster_id", "target", "principal",
    "door_status", "operation_id", "request_id", "rule", "rules", "detail", "replica",
]  # fmt: skip


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "cards.sqlite3")
    return str(request.getfixturevalue("postgres_url"))


async def cards_audit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``maya-tools cards audit …`` as an operator runs it (its own event loop, here in a thread)."""
    code = await anyio.to_thread.run_sync(main, ["cards", "audit", *argv])
    out, err = capsys.readouterr()
    return code, out, err


async def a_flow(store: CardStore, planner: Planner, admin: DoorClient, member: DoorClient, clock: ManualClock) -> None:
    """Every path a row reaches the store by: created, approved and executed; declined; Door's refusal
    (a member may not change: 403); expired; a plan-style step (``advance``) and a take-over."""
    service = ApprovalService(store, clock=clock.now)

    async def relabel(value: str) -> str:
        patch = PublicNodePoolPatchRequest(labels={"t": value})
        return (await store.create(await planner.relabel_node_pool("payments-prod", "workers", patch))).id

    scale = await store.create(
        await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
    )
    declined, refused, expiring, carried = [await relabel(value) for value in "abcd"]
    assert (await service.approve(refused, approver="bob (MCP elicitation)", door=member)).status is CardStatus.FAILED
    await service.decline(declined, by="ada (approval page)", reason="not today")
    now = clock.now()
    entry = AuditEntry("approved", now, by="eve (approval page)")
    assert await store.claim(carried, executor="h:1:a", until=now, entry=entry, update={}, live_at=now)
    step = AuditEntry("step", now, by="h:1:a", detail="step 1 add workers-2: sending")
    assert await store.advance(carried, "h:1:a", update={}, entry=step)
    recovered = AuditEntry("recovered", now, by="h:2:b", detail="its executor h:1:a is gone")
    assert await store.take_over(carried, old="h:1:a", new="h:2:b", until=now, entry=recovered)
    await service.approve(scale.id, approver="ada (MCP elicitation)", door=admin)
    clock.advance(3600)
    assert [card.id for card in await service.expire_due()] == [expiring]
    # Moves that do not happen write no row, so they log none.
    assert (
        await store.transition(
            declined, expected=CardStatus.PENDING, to=CardStatus.DECLINED, entry=AuditEntry("declined", now)
        )
        is None
    )
    assert not await store.take_over(carried, old="h:1:a", new="h:3:c", until=now, entry=recovered)


async def test_the_log_holds_every_row_the_store_kept_in_order_and_cards_audit_prints_the_same_lines(
    location: str,
    planner: Planner,
    admin: DoorClient,
    member: DoorClient,
    clock: ManualClock,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    log = AuditLog(str(tmp_path / "audit.jsonl"))
    store = await open_store(location, replica="replica-a", observer=log)
    try:
        await a_flow(store, planner, admin, member, clock)
        kept = await store.audit_since(EPOCH)
    finally:
        await store.close()
    log.close()
    written = (tmp_path / "audit.jsonl").read_text(encoding="ascii").splitlines()

    assert written == [audit_line(event, card) for event, card in kept]
    lines = [json.loads(line) for line in written]
    assert [line["seq"] for line in lines] == sorted(line["seq"] for line in lines)
    assert [(line["event"], line["status"]) for line in lines] == [
        *[("created", "pending")] * 5,
        ("approved", "executing"), ("failed", "failed"),
        ("declined", "declined"),
        ("approved", "executing"), ("step", "executing"), ("recovered", "executing"),
        ("approved", "executing"), ("executed", "executed"),
        ("expired", "expired"),
    ]  # fmt: skip
    assert all(list(line) == FIELDS and line["replica"] == "replica-a" for line in lines)
    executed, failed = lines[12], lines[6]
    assert executed["door_status"] == 202 and executed["operation_id"]
    assert (executed["cluster"], executed["target"], executed["action"]) == (
        "payments-prod",
        "workers",
        "scale_node_pool",
    )
    assert failed["door_status"] == 403 and failed["request_id"] and failed["by"] is None
    assert lines[11]["by"] == "ada (MCP elicitation)" and lines[7]["detail"] == "not today"

    code, out, err = await cards_audit(["--card-store", location, "--since", "2000-01-01", "--json"], capsys)
    assert (code, err) == (0, "")
    assert out.splitlines() == written
    everything = out + "\n".join(written)
    assert not any(secret in everything for secret in SECRETS)


async def test_cards_audit_reads_since_a_duration_or_a_date_and_names_the_forms_it_accepts(
    location: str, planner: Planner, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    store = await open_store(location)
    try:
        old = await store.create(
            await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
        )
        # A row from three days ago and one from now, whatever the test clock says.
        await store.transition(
            old.id,
            expected=CardStatus.PENDING,
            to=CardStatus.DECLINED,
            entry=AuditEntry("declined", datetime.now(UTC) - timedelta(days=3), by="ada"),
        )
        new = await store.create(
            await planner.relabel_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(labels={"t": "x"}))
        )
        await store.transition(
            new.id,
            expected=CardStatus.PENDING,
            to=CardStatus.DECLINED,
            entry=AuditEntry("declined", datetime.now(UTC), by="bob"),
        )
    finally:
        await store.close()

    def declined_by(out: str) -> list[str]:
        return [line["by"] for line in map(json.loads, out.splitlines()) if line["event"] == "declined"]

    for since, expected in (("24h", ["bob"]), ("90m", ["bob"]), ("7d", ["ada", "bob"]), ("2000-01-01", ["ada", "bob"])):
        code, out, _ = await cards_audit(["--card-store", location, "--since", since, "--json"], capsys)
        assert (code, declined_by(out)) == (0, expected), since
    soon = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%MZ")
    assert (await cards_audit(["--card-store", location, "--since", soon, "--json"], capsys))[:2] == (0, "")
    # A time without an offset is UTC, wherever the operator's machine is (here 9 hours ahead of it).
    with tokyo():
        naive = (datetime.now(UTC) + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")
        assert (await cards_audit(["--card-store", location, "--since", naive, "--json"], capsys))[:2] == (0, "")

    code, out, _ = await cards_audit(["--card-store", location, "--since", "7d"], capsys)
    *rows, total = out.splitlines()
    assert code == 0 and total == f"{len(rows)} event(s)."
    declined = [row.split() for row in rows if row.split()[4] == "declined"]  # seq, date, time, UTC, event
    assert [(row[5], row[6], row[7], row[8]) for row in declined] == [
        ("declined", "scale_node_pool", "payments-prod/workers", "ada"),
        ("declined", "relabel_node_pool", "payments-prod/workers", "bob"),
    ]

    for bad in ("yesterday", "24", "24hours", "-3d", "2026-13-01"):
        code, out, err = await cards_audit(["--card-store", location, f"--since={bad}"], capsys)
        assert (code, out) == (2, ""), bad
        assert err.startswith(f"maya-tools cards audit: --since: {bad!r} is not a duration, a date or a time; use 30m,")


@contextmanager
def tokyo() -> Iterator[None]:
    """The process's local time zone is Asia/Tokyo (UTC+9) meanwhile."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Tokyo"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


def audit_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "confirmation_cards.audit_log"]


async def test_a_full_disk_is_said_once_on_stderr_and_every_card_goes_on(
    planner: Planner, admin: DoorClient, member: DoorClient, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    log = AuditLog("/dev/full")  # every write is ENOSPC, as on a full disk
    store = await open_store(":memory:", observer=log)
    await a_flow(store, planner, admin, member, clock)
    log.flush()
    kept = await store.audit_since(EPOCH)
    log.close()

    assert sorted(card.status for card in await store.list()) == sorted(
        [CardStatus.EXECUTED, CardStatus.DECLINED, CardStatus.FAILED, CardStatus.EXPIRED, CardStatus.EXECUTING]
    )
    (said,) = audit_records(caplog)
    assert said.levelno == logging.ERROR
    assert said.getMessage() == (
        "The audit log '/dev/full' cannot be written (No space left on device); cards go on and the card store "
        "keeps the audit (maya-tools cards audit prints it). Check MAYA_AUDIT_LOG's path and its disk."
    )
    assert log.lost == len(kept) == 14


async def test_a_path_that_cannot_be_written_is_said_at_start_and_writing_resumes_once_it_can(
    store: CardStore, planner: Planner, admin: DoorClient, clock: ManualClock, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    caplog.set_level(logging.INFO)
    path = tmp_path / "not-yet" / "audit.jsonl"
    log = AuditLog(str(path))
    (said,) = audit_records(caplog)
    assert "cannot be written (No such file or directory)" in said.getMessage()
    observed = await open_store(":memory:", observer=log)
    first = await observed.create(
        await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
    )
    log.flush()
    path.parent.mkdir()
    await ApprovalService(observed, clock=clock.now).approve(first.id, approver="ada", door=admin)
    log.close()

    assert (await observed.get(first.id)).status is CardStatus.EXECUTED  # type: ignore[union-attr]
    _, back = audit_records(caplog)
    assert back.getMessage() == f"The audit log {str(path)!r} is written again; 1 line(s) were lost meanwhile."
    kept = [audit_line(event, card) for event, card in await observed.audit_since(EPOCH)]
    assert path.read_text(encoding="ascii").splitlines() == kept[1:]  # created was lost; approved and executed not


async def test_an_observer_that_fails_never_reaches_the_card(
    planner: Planner, admin: DoorClient, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("a bug in the observer")

    store = await open_store(":memory:", observer=broken)
    card = await store.create(
        await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
    )
    done = await ApprovalService(store, clock=clock.now).approve(card.id, approver="ada", door=admin)
    assert done.status is CardStatus.EXECUTED
    assert [event.event for event in await store.audit(card.id)] == ["created", "approved", "executed"]
    failures = [r for r in caplog.records if r.getMessage().startswith("the audit observer failed on row")]
    assert len(failures) == 3


async def test_a_writer_that_cannot_keep_up_drops_lines_instead_of_holding_a_card(
    planner: Planner, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A FIFO nobody reads holds the writer in ``open``; a queue of one line is then full at once."""
    caplog.set_level(logging.INFO)
    fifo = tmp_path / "audit.fifo"
    os.mkfifo(fifo)
    log = AuditLog(str(fifo), queue_lines=1)
    assert audit_records(caplog) == []  # a FIFO nobody reads yet is not an error at start
    card = await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
    event = AuditEvent(seq=1, card_id=card.id, at=card.created_at, event="created", status=CardStatus.PENDING)
    called = threading.Thread(target=lambda: [log(event, card) for _ in range(3)])
    called.start()
    called.join(10)
    reader = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a reader: the writer's open returns
    try:
        assert not called.is_alive(), "the observer waited for the writer"
        log.flush()
        lines = os.read(reader, 1 << 16).decode("ascii").splitlines()
    finally:
        log.close()
        os.close(reader)
    assert 1 <= log.lost <= 2 and len(lines) == 3 - log.lost
    assert lines == [audit_line(event, card)] * len(lines)
    said, back = audit_records(caplog)
    assert "cannot be written (more than 1 lines are waiting to be written)" in said.getMessage()
    assert back.getMessage().endswith(f"is written again; {log.lost} line(s) were lost meanwhile.")


async def test_postgres_a_row_whose_commit_fails_is_not_logged(
    postgres_url: str, planner: Planner, tmp_path: Path
) -> None:
    """A deferred constraint refuses the row at COMMIT: the store kept nothing, so the log has nothing."""
    import psycopg

    log = AuditLog(str(tmp_path / "audit.jsonl"))
    store = await open_store(postgres_url, observer=log)
    try:
        with psycopg.connect(postgres_url, autocommit=True) as db:
            db.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;"
                "CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT ON maya_audit DEFERRABLE INITIALLY DEFERRED "
                "FOR EACH ROW WHEN (NEW.detail = 'refused at commit') EXECUTE FUNCTION refuse()"
            )
        card = await store.create(
            await planner.scale_node_pool("payments-prod", "workers", PublicNodePoolPatchRequest(count=4))
        )
        refused = AuditEntry("declined", card.created_at, by="ada", detail="refused at commit")
        with pytest.raises(psycopg.errors.RaiseException):
            await store.transition(card.id, expected=CardStatus.PENDING, to=CardStatus.DECLINED, entry=refused)
        kept = AuditEntry("declined", card.created_at, by="ada", detail="kept")
        assert await store.transition(card.id, expected=CardStatus.PENDING, to=CardStatus.DECLINED, entry=kept)
        rows = await store.audit_since(EPOCH)
    finally:
        await store.close()
    log.close()
    assert [event.detail for event, _ in rows] == [rows[0][0].detail, "kept"]
    assert (tmp_path / "audit.jsonl").read_text(encoding="ascii").splitlines() == [audit_line(*row) for row in rows]
