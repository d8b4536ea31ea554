"""``Date`` and ``Retry-After`` as Door, and whatever stands between it and us, send them.

RFC 9110 §5.6.7 defines one HTTP-date in three forms, and a recipient must accept all three::

    Sun, 06 Nov 1994 08:49:37 GMT    IMF-fixdate, the one senders generate
    Sunday, 06-Nov-94 08:49:37 GMT   obsolete RFC 850 form (a two-digit year)
    Sun Nov  6 08:49:37 1994         obsolete asctime form (no zone written: it is GMT)

``Retry-After`` (§10.2.3) is an HTTP-date or delta-seconds (``120``). What arrives is looser, and
every function here reads it without raising and returns a timezone-aware UTC datetime, a number
of seconds, or None:

- A missing zone is GMT: HTTP dates are UTC by definition (§5.6.7). ``email.utils`` returns a naive
  datetime for one (and for ``-0000``, the asctime form and two joined dates), which then raises
  ``TypeError`` beside any aware one. ``UTC``, ``UT``, ``Z`` and numeric offsets are read too.
- A field sent twice, as some proxies do (two ``Date`` lines, which an HTTP client joins into
  ``<date>, <date>``, or one line holding both): ``Date`` is a singleton, so values that agree are
  that value and values that disagree say nothing (None: which clock stamped the answer is
  unknown). Of several ``Retry-After`` values the longest wait is kept; the caller caps it.
- delta-seconds is ASCII digits only (``1*DIGIT``): a negative, fractional or other value is None,
  and one too big to represent is 2^31 seconds, as §1.2.1 says a recipient must take it.
- Anything else (a value that is not entirely a comma-separated list of these forms, an impossible
  day, a year past 9999, bytes that are not text) is None.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Final

import httpx2

__all__ = [
    "field_values",
    "http_date",
    "parse_date_header",
    "parse_retry_after",
    "retry_after_value",
    "seconds_between",
]

DELTA_SECONDS_CEILING: Final = 2**31
"""RFC 9110 §1.2.1: a delta-seconds value beyond what a recipient can represent counts as 2^31."""

_MONTHS: Final = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_SHORT_DAYS: Final = "mon|tue|wed|thu|fri|sat|sun"
_LONG_DAYS: Final = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_MONTH: Final = "(?P<month>" + "|".join(_MONTHS) + ")"
_TIME: Final = r"(?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?"
_ZONE: Final = r"(?:\s+(?P<zone>gmt|utc|ut|z|[+-]\d{2}:?\d{2}))?"
_END: Final = r"(?=\s*(?:,|$))"
_FLAGS: Final = re.IGNORECASE | re.ASCII  # ASCII: "\d" must not match other scripts' digits, which int() reads

_FORMS: Final = (
    # IMF-fixdate (the day name optional, as RFC 5322 allows): Sun, 06 Nov 1994 08:49:37 GMT
    re.compile(
        rf"(?:(?:{_SHORT_DAYS}|{_LONG_DAYS})\s*,\s*)?(?P<day>\d{{1,2}})\s+{_MONTH}\s+(?P<year>\d{{4}})\s+{_TIME}{_ZONE}{_END}",
        _FLAGS,
    ),
    # RFC 850: Sunday, 06-Nov-94 08:49:37 GMT (a four-digit year is read too)
    re.compile(
        rf"(?:{_LONG_DAYS}|{_SHORT_DAYS})\s*,\s*(?P<day>\d{{1,2}})-{_MONTH}-(?P<year>\d{{4}}|\d{{2}})\s+{_TIME}{_ZONE}{_END}",
        _FLAGS,
    ),
    # asctime: Sun Nov  6 08:49:37 1994
    re.compile(
        rf"(?:{_SHORT_DAYS}|{_LONG_DAYS})\s+{_MONTH}\s+(?P<day>\d{{1,2}})\s+{_TIME}\s+(?P<year>\d{{4}}){_ZONE}{_END}",
        _FLAGS,
    ),
)
_DELTA: Final = re.compile(rf"(?P<digits>\d+){_END}", _FLAGS)
_SEPARATORS: Final = frozenset(" \t\r\n\f\v,")

Member = datetime | int | None
"""One member of a field value: a date, delta-seconds, or None for one that is neither."""


def seconds_between(later: datetime, earlier: datetime) -> float:
    """``later - earlier`` in seconds, a naive side taken as UTC (what a zone-less HTTP date means).

    Aware datetimes are subtracted as they are: converting one near ``datetime.min`` or ``max`` to
    UTC could overflow, their difference cannot.
    """
    return (_zoned(later) - _zoned(earlier)).total_seconds()


def _zoned(moment: datetime) -> datetime:
    return moment if moment.utcoffset() is not None else moment.replace(tzinfo=UTC)


def _full_year(digits: str) -> int:
    """A year; two digits as RFC 9110 §5.6.7 says: more than 50 years ahead means the century before."""
    year = int(digits)
    if len(digits) > 2:
        return year
    this_year = datetime.now(UTC).year
    year += this_year - this_year % 100
    return year - 100 if year > this_year + 50 else year


def _zone(text: str | None) -> timezone:
    if text is None or text.lower() in ("gmt", "utc", "ut", "z"):
        return UTC
    digits = text[1:].replace(":", "")
    offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    return timezone(-offset if text[0] == "-" else offset)


def _date_at(match: re.Match[str]) -> datetime | None:
    try:
        second = int(match["second"] or 0)
        moment = datetime(
            _full_year(match["year"]),
            _MONTHS.index(match["month"].lower()) + 1,
            int(match["day"]),
            int(match["hour"]),
            int(match["minute"]),
            min(second, 59),  # 60 is a leap second (§5.6.7 allows it); datetime has none
            tzinfo=_zone(match["zone"]),
        )
        return moment.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def _skip(value: str, position: int) -> int:
    """The position after the commas and whitespace that separate two members, from ``position``."""
    while position < len(value) and value[position] in _SEPARATORS:
        position += 1
    return position


def _members(value: object) -> list[Member] | None:
    """The members of one field value, or None unless all of it is a comma-separated list of them."""
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("latin-1")
    if not isinstance(value, str):
        return None
    members: list[Member] = []
    position = _skip(value, 0)
    while position < len(value):
        found = next((m for m in (form.match(value, position) for form in _FORMS) if m is not None), None)
        if found is not None:
            members.append(_date_at(found))
        else:
            found = _DELTA.match(value, position)
            if found is None:
                return None
            digits = found["digits"]
            # int() of a few thousand digits raises; no value that long is below the ceiling anyway.
            members.append(DELTA_SECONDS_CEILING if len(digits) > 10 else min(int(digits), DELTA_SECONDS_CEILING))
        position = _skip(value, found.end())
    return members


def _values(values: object) -> list[object]:
    if isinstance(values, str | bytes | bytearray) or not isinstance(values, Iterable):
        return [values]
    return list(values)


def http_date(values: object) -> datetime | None:
    """The one date that a field's value, or list of field lines, says; else None (see the module)."""
    dates: set[datetime] = set()
    for value in _values(values):
        members = _members(value)
        if not members:
            return None
        for member in members:
            if not isinstance(member, datetime):
                return None
            dates.add(member)
    return dates.pop() if len(dates) == 1 else None


def retry_after_value(values: object, *, now: datetime) -> float | None:
    """Seconds a ``Retry-After`` value (or list of field lines) asks to wait, a date measured from
    ``now``; the longest when several are sent; None when any of them is not a valid one."""
    waits: list[float] = []
    for value in _values(values):
        members = _members(value)
        if not members:
            return None
        for member in members:
            if member is None:
                return None
            if isinstance(member, datetime):
                waits.append(max(0.0, seconds_between(member, now)))
            else:
                waits.append(float(member))
    return max(waits) if waits else None


def field_values(headers: Mapping[str, str] | httpx2.Headers, name: str) -> list[str]:
    """Every field line named ``name`` (case-insensitive), in the order received."""
    if isinstance(headers, httpx2.Headers):
        return headers.get_list(name)
    wanted = name.lower()
    return [value for key, value in headers.items() if isinstance(key, str) and key.lower() == wanted]


def parse_date_header(headers: Mapping[str, str] | httpx2.Headers) -> datetime | None:
    """The server's clock from its ``Date`` field(s), aware and in UTC, or None."""
    values = field_values(headers, "date")
    return http_date(values) if values else None


def parse_retry_after(headers: Mapping[str, str] | httpx2.Headers, *, now: datetime | None = None) -> float | None:
    """``Retry-After`` in seconds, or None: delta-seconds, or an HTTP date measured from ``now``, else
    from the answer's own ``Date`` (the same clock that wrote it), else from ours."""
    values = field_values(headers, "retry-after")
    if not values:
        return None
    reference = now if now is not None else parse_date_header(headers) or datetime.now(UTC)
    return retry_after_value(values, now=reference)
