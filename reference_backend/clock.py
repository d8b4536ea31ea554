"""Simulated clocks: the backend's world moves only as fast as its clock says.

``ManualClock`` moves only when told, so a test controls every transition without sleeping.
``ScaledClock`` follows real time multiplied by a scale (10 → ten simulated seconds per real second).
Both can be advanced or set forward, which the admin plane and a reloaded state file rely on, and
restarted at any instant, which only restoring a snapshot does (the world's time comes back with it).
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol, runtime_checkable

DEFAULT_START = datetime(2026, 10, 1, 12, 0, 0, tzinfo=UTC)
# Far enough for any test, early enough that every simulated duration added to it is still a datetime.
LATEST = datetime(9000, 1, 1, tzinfo=UTC)

ClockMode = Literal["manual", "scaled"]


class ClockError(ValueError):
    """A clock was asked to go backwards or by a negative amount."""


@runtime_checkable
class Clock(Protocol):
    """What the backend needs from a clock: the current simulated time (UTC, aware)."""

    def now(self) -> datetime: ...


@runtime_checkable
class AdjustableClock(Clock, Protocol):
    """A clock the admin plane can move forward (never backwards)."""

    mode: ClockMode
    time_scale: float

    def advance(self, seconds: float) -> datetime: ...

    def set(self, when: datetime) -> datetime: ...

    def restart(self, when: datetime) -> datetime: ...


def _aware(when: datetime) -> datetime:
    if when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    return when.astimezone(UTC)


def _forward(start: datetime, seconds: float) -> datetime:
    """``start`` plus ``seconds`` (≥ 0); raises ``ClockError`` for a negative amount or beyond ``LATEST``."""
    if seconds < 0:
        raise ClockError(f"cannot advance by a negative amount ({seconds})")
    if seconds > (LATEST - start).total_seconds():
        raise ClockError(f"cannot advance beyond {LATEST.isoformat()}")
    return start + timedelta(seconds=seconds)


def _not_beyond_latest(when: datetime) -> datetime:
    if when > LATEST:
        raise ClockError(f"cannot set the clock beyond {LATEST.isoformat()}")
    return when


class ManualClock:
    """A clock that only moves when ``advance`` or ``set`` is called."""

    mode: ClockMode = "manual"
    time_scale: float = 0.0

    def __init__(self, start: datetime | None = None) -> None:
        self._now = _aware(start) if start is not None else DEFAULT_START

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        """Move forward by ``seconds`` (≥ 0); raises ``ClockError`` for a negative amount or beyond ``LATEST``."""
        self._now = _forward(self._now, seconds)
        return self._now

    def set(self, when: datetime) -> datetime:
        """Jump to ``when``; raises ``ClockError`` if that is in the past or beyond ``LATEST``."""
        when = _not_beyond_latest(_aware(when))
        if when < self._now:
            raise ClockError(f"the clock never goes backwards ({when.isoformat()} < {self._now.isoformat()})")
        self._now = when
        return self._now

    def restart(self, when: datetime) -> datetime:
        """Start again at ``when``, earlier or later: only a snapshot's restore does this, since it
        brings back the world's own time with the world."""
        self._now = _not_beyond_latest(_aware(when))
        return self._now


class ScaledClock:
    """Real time × ``time_scale``: simulated seconds = real seconds × scale."""

    mode: ClockMode = "scaled"

    def __init__(self, time_scale: float = 1.0, start: datetime | None = None) -> None:
        if not (math.isfinite(time_scale) and time_scale > 0):
            raise ClockError(f"time_scale must be a positive finite number, got {time_scale}")
        self.time_scale = time_scale
        self._base = _aware(start) if start is not None else DEFAULT_START
        self._real_base = time.monotonic()

    def now(self) -> datetime:
        """The simulated time; it stops at ``LATEST`` rather than overflow the calendar."""
        elapsed = (time.monotonic() - self._real_base) * self.time_scale
        return self._base + timedelta(seconds=min(elapsed, (LATEST - self._base).total_seconds()))

    def advance(self, seconds: float) -> datetime:
        self._base = _forward(self._base, seconds)
        return self.now()

    def set(self, when: datetime) -> datetime:
        when = _not_beyond_latest(_aware(when))
        current = self.now()
        if when < current:
            raise ClockError(f"the clock never goes backwards ({when.isoformat()} < {current.isoformat()})")
        self._base, self._real_base = when, time.monotonic()
        return when

    def restart(self, when: datetime) -> datetime:
        """Run on from ``when``, earlier or later (a snapshot's restore, as ``ManualClock.restart``)."""
        self._base, self._real_base = _not_beyond_latest(_aware(when)), time.monotonic()
        return self._base
