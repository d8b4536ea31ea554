"""Clocks: a ManualClock moves only when told; a ScaledClock multiplies real time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reference_backend.clock import DEFAULT_START, AdjustableClock, Clock, ClockError, ManualClock, ScaledClock


def test_a_manual_clock_starts_at_the_default_and_never_moves_by_itself() -> None:
    clock = ManualClock()
    assert clock.now() == DEFAULT_START == datetime(2026, 10, 1, 12, tzinfo=UTC)
    assert clock.now() == clock.now()


def test_a_manual_clock_advances_and_sets_forward_only() -> None:
    clock = ManualClock(datetime(2026, 1, 1))
    assert clock.now().tzinfo is not None
    clock.advance(1.5)
    assert clock.now() == datetime(2026, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)
    clock.set(datetime(2026, 2, 1, tzinfo=UTC))
    with pytest.raises(ClockError):
        clock.set(datetime(2026, 1, 15, tzinfo=UTC))
    with pytest.raises(ClockError):
        clock.advance(-1)


def test_a_scaled_clock_multiplies_real_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulated seconds = real seconds × time_scale (real time is faked, nothing sleeps)."""
    real = [100.0]
    monkeypatch.setattr("reference_backend.clock.time.monotonic", lambda: real[0])
    clock = ScaledClock(time_scale=60)
    real[0] += 2
    assert clock.now() - DEFAULT_START == timedelta(minutes=2)
    clock.advance(30)
    assert clock.now() - DEFAULT_START == timedelta(minutes=2, seconds=30)
    clock.set(DEFAULT_START + timedelta(hours=1))
    real[0] += 1
    assert clock.now() == DEFAULT_START + timedelta(hours=1, minutes=1)
    with pytest.raises(ClockError):
        clock.set(DEFAULT_START)


def test_a_scaled_clock_refuses_a_non_positive_scale() -> None:
    with pytest.raises(ClockError):
        ScaledClock(time_scale=0)


def test_both_clocks_satisfy_the_protocols() -> None:
    for clock in (ManualClock(), ScaledClock()):
        assert isinstance(clock, Clock)
        assert isinstance(clock, AdjustableClock)
    assert (ManualClock().mode, ScaledClock(3).mode, ScaledClock(3).time_scale) == ("manual", "scaled", 3)
