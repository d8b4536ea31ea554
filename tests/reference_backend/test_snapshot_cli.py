"""`maya-tools reference-backend --from-snapshot FILE` and `reference-backend snapshot save|restore`, with real
backend processes on loopback (forked from the worker's fork server, ``tests.launch``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest

from backend_client.models import PublicNodePoolCreateRequest
from backend_client.tls import verifying_tls
from reference_backend import cli, seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.reference_backend.test_http import free_port, start, stop, wait_until_listening

pytestmark = pytest.mark.http

ADMIN_TOKEN = "snapshot-admin-token"
ADMIN = {"Authorization": f"Bearer {seed.DEMO_ADMIN_TOKEN}"}
REF = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
POOLS = f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}/node-pools"


@contextmanager
def backend_from(snapshot: Path | None) -> Iterator[tuple[str, httpx2.Client]]:
    """A real backend process, from the snapshot file or the demo seed; its URL and a client of it."""
    port = free_port()
    extra = ["--from-snapshot", str(snapshot)] if snapshot is not None else []
    process = start(port, "--manual-clock", "--admin-token", ADMIN_TOKEN, *extra)
    try:
        wait_until_listening(process, port)
        url = f"http://127.0.0.1:{port}"
        with httpx2.Client(verify=verifying_tls(), base_url=url, timeout=10) as client:
            yield url, client
    finally:
        output = stop(process)
        assert ADMIN_TOKEN not in output and "Traceback" not in output
        if snapshot is not None:
            assert f"world: the snapshot {snapshot}" in output


def snapshot_command(action: str, url: str, file: Path, token: str = ADMIN_TOKEN) -> int:
    return cli.main(["snapshot", action, "--url", url, "--admin-token", token, str(file)])


def saved_world(tmp_path: Path) -> Path:
    """A snapshot of the demo world with a second pool, saved in-process."""
    backend = ReferenceBackend(ManualClock())
    cluster = backend.cluster(seed.DEMO_CLUSTER_ID)
    assert cluster is not None
    backend.install_pool(cluster, PublicNodePoolCreateRequest(name="batch", size="dks.c5.large"))
    path = tmp_path / "world.json"
    path.write_bytes(backend.save_snapshot())
    return path


def test_a_backend_started_from_a_snapshot_serves_that_world_and_saves_it_back_byte_for_byte(tmp_path: Path) -> None:
    world = saved_world(tmp_path)
    with backend_from(world) as (url, client):
        assert client.get("/_reference/snapshot", headers=REF).content == world.read_bytes()
        assert [p["name"] for p in client.get(POOLS, headers=ADMIN).json()["items"]] == ["workers", "batch"]
        again = tmp_path / "again" / "world.json"
        assert snapshot_command("save", url, again) == 0
        assert again.read_bytes() == world.read_bytes()


def test_save_then_restore_through_the_command_line_brings_the_world_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with backend_from(None) as (url, client):
        assert client.patch(f"{POOLS}/workers", headers=ADMIN, json={"count": 3}).status_code == 202
        saved = tmp_path / "before.json"
        assert snapshot_command("save", url, saved) == 0
        client.post("/_reference/clock/advance", headers=REF, json={"seconds": 600})
        assert client.delete(f"{POOLS}/workers", headers=ADMIN).status_code == 409  # R-DEL-01: the last pool
        assert client.patch(f"{POOLS}/workers", headers=ADMIN, json={"count": 1}).status_code == 202
        assert snapshot_command("restore", url, saved) == 0
        assert client.get("/_reference/snapshot", headers=REF).content == saved.read_bytes()
        state = client.get(f"/v1/public/clusters/{seed.DEMO_CLUSTER_ID}/state", headers=ADMIN).json()
        assert [(op["kind"], op["status"]) for op in state["operations"]] == [("pool.update", "running")]
    out = capsys.readouterr()
    assert "restored" in out.out and "2026-10-01T12:00:00Z" in out.out
    assert ADMIN_TOKEN not in out.out + out.err


def test_two_backends_from_one_snapshot_are_a_fork(tmp_path: Path) -> None:
    """Each process evolves on its own: a change in one is not in the other."""
    world = saved_world(tmp_path)
    with backend_from(world) as (_, left), backend_from(world) as (_, right):
        assert left.patch(f"{POOLS}/batch", headers=ADMIN, json={"labels": {"side": "left"}}).status_code == 202
        assert right.delete(f"{POOLS}/batch", headers=ADMIN).status_code == 202
        left_pools = {p["name"]: p for p in left.get(POOLS, headers=ADMIN).json()["items"]}
        right_pools = {p["name"]: p for p in right.get(POOLS, headers=ADMIN).json()["items"]}
        assert (left_pools["batch"]["labels"], left_pools["batch"]["lifecycle"]) == ({"side": "left"}, "active")
        assert (right_pools["batch"]["labels"], right_pools["batch"]["lifecycle"]) == ({}, "deleting")
        assert left.get("/_reference/snapshot", headers=REF).content != world.read_bytes()


def test_the_snapshot_commands_say_what_went_wrong_and_exit_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    assert snapshot_command("save", nowhere, tmp_path / "x.json") == 1
    assert "cannot reach the reference backend" in capsys.readouterr().err
    not_a_snapshot = tmp_path / "notes.json"
    not_a_snapshot.write_text(json.dumps({"hello": "world"}))
    with backend_from(None) as (url, client):
        before = client.get("/_reference/snapshot", headers=REF).content
        assert snapshot_command("save", url, tmp_path / "y.json", token="wrong") == 1
        assert "refused the admin token" in capsys.readouterr().err
        assert snapshot_command("restore", url, not_a_snapshot) == 1
        assert "not a reference backend snapshot" in capsys.readouterr().err
        assert snapshot_command("restore", url, tmp_path / "missing.json") == 1
        assert "cannot read" in capsys.readouterr().err
        assert client.get("/_reference/snapshot", headers=REF).content == before
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "y.json").exists()
    assert list(tmp_path.glob(".*.part")) == []


def test_a_backend_without_the_admin_plane_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    process = start(port, "--manual-clock")
    try:
        wait_until_listening(process, port)
        assert snapshot_command("save", f"http://127.0.0.1:{port}", tmp_path / "z.json") == 1
    finally:
        stop(process)
    assert "has no admin plane" in capsys.readouterr().err


def test_from_snapshot_refuses_a_file_that_is_not_a_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 2 before serving, naming the file and the problem."""
    bad = tmp_path / "state.sqlite3"
    bad.write_bytes(b"SQLite format 3\x00")
    assert cli.main(["--from-snapshot", str(bad), "--manual-clock"]) == 2
    assert cli.main(["--from-snapshot", str(tmp_path / "absent.json")]) == 2
    err = capsys.readouterr().err
    assert f"cannot start from {bad}: the snapshot is not JSON" in err
    assert "absent.json" in err and "Traceback" not in err
