"""The `maya-tools reference-backend` command line, without a server (test_http.py runs a real one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from reference_backend import cli
from reference_backend.clock import ManualClock, ScaledClock


class FakeServer:
    """Stands in for uvicorn.Server: records the config instead of serving."""

    configs: ClassVar[list[Any]] = []

    def __init__(self, config: Any) -> None:
        FakeServer.configs.append(config)

    def run(self) -> None:
        return None


@pytest.fixture
def fake_server(monkeypatch: pytest.MonkeyPatch) -> type[FakeServer]:
    FakeServer.configs = []
    monkeypatch.setattr("reference_backend.cli.uvicorn.Server", FakeServer)
    return FakeServer


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    assert "--manual-clock" in capsys.readouterr().out


def test_bad_arguments_exit_two() -> None:
    assert cli.main(["--port", "not-a-port"]) == 2
    assert cli.main(["--manual-clock", "--time-scale", "5"]) == 2


def test_a_non_positive_time_scale_exits_two(fake_server: type[FakeServer]) -> None:
    assert cli.main(["--time-scale", "0"]) == 2
    assert fake_server.configs == []


def test_it_prints_the_url_and_the_demo_tokens_but_never_the_admin_token(
    fake_server: type[FakeServer], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--port", "9911", "--manual-clock", "--admin-token", "very-secret-admin"]) == 0
    out = capsys.readouterr().out
    assert "http://127.0.0.1:9911/v1/public" in out
    assert "demo-admin-token" in out and "demo-member-token" in out and "demo-outsider-token" in out
    assert "very-secret-admin" not in out
    config = fake_server.configs[0]
    assert (config.host, config.port, config.access_log) == ("127.0.0.1", 9911, False)
    backend = config.app.state.backend
    assert isinstance(backend.clock, ManualClock)
    assert "/_reference/clock" in config.app.openapi()["paths"]


def test_the_time_scale_and_the_empty_seed_are_honoured(
    fake_server: type[FakeServer], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--time-scale", "30", "--seed", "empty"]) == 0
    backend = fake_server.configs[0].app.state.backend
    assert isinstance(backend.clock, ScaledClock) and backend.clock.time_scale == 30
    assert backend.cluster("3f9c1a2e-7b4d-4c58-9e21-5d6f8a0b1c2d") is None
    assert "demo-admin-token" not in capsys.readouterr().out
    assert not any(path.startswith("/_reference") for path in fake_server.configs[0].app.openapi()["paths"])


def test_the_state_file_is_created_and_closed(fake_server: type[FakeServer], tmp_path: Path) -> None:
    state = tmp_path / "state" / "door.sqlite"
    assert cli.main(["--state", str(state), "--manual-clock"]) == 0
    assert state.exists()
    backend = fake_server.configs[0].app.state.backend
    with pytest.raises(Exception, match="closed"):
        backend._store._db.execute("SELECT 1")


@pytest.mark.parametrize("scale", ["nan", "inf", "-inf", "1e300"])
def test_a_non_finite_or_huge_time_scale_exits_two_without_a_traceback(
    fake_server: type[FakeServer], capsys: pytest.CaptureFixture[str], scale: str
) -> None:
    assert cli.main(["--time-scale", scale]) == 2
    assert fake_server.configs == []
    assert "--time-scale" in capsys.readouterr().err


@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_a_port_out_of_range_exits_two(fake_server: type[FakeServer], port: str) -> None:
    assert cli.main(["--port", port]) == 2
    assert fake_server.configs == []


def test_a_state_path_that_is_not_a_state_file_exits_two(
    fake_server: type[FakeServer], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    garbage = tmp_path / "notes.txt"
    garbage.write_text("not a database, just some notes\n" * 100)
    assert cli.main(["--state", str(garbage)]) == 2
    assert cli.main(["--state", str(tmp_path)]) == 2  # a directory
    assert fake_server.configs == []
    err = capsys.readouterr().err
    assert "cannot use --state" in err and "Traceback" not in err
    assert garbage.read_text().startswith("not a database")  # left alone


def test_a_scaled_clock_stops_at_the_latest_instant_instead_of_overflowing() -> None:
    from reference_backend.clock import LATEST

    clock = ScaledClock(1_000_000.0)
    clock.set(LATEST)
    assert clock.now() == LATEST
    with pytest.raises(ValueError):
        ScaledClock(float("nan"))
