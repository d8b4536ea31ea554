"""``Date`` and ``Retry-After`` in every RFC 9110 form, and as proxies and odd servers send them.

Whatever arrives, the parser answers an aware UTC datetime, a number of seconds or None, and never
raises: a naive datetime from ``email.utils`` (a date without a zone, two joined dates, the asctime
form) once made the node-freshness wait raise ``TypeError`` in the middle of a tier plan.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import anyio
import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend_client import _constants as C
from backend_client._http_dates import (
    DELTA_SECONDS_CEILING,
    http_date,
    parse_date_header,
    parse_retry_after,
    retry_after_value,
    seconds_between,
)
from backend_client._retry import fresh_poll_delay
from backend_client.errors import make_status_error
from tests.backend_client.fakes import CLUSTER_ID, FakeDoor, Sleeps, make_client, node_list, ok

WHEN = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
IMF = "Tue, 01 Dec 2026 10:00:00 GMT"


@pytest.fixture
def local_time_far_from_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process's local time 14 hours ahead of UTC: a zone-less date read as local time would show."""
    monkeypatch.setenv("TZ", "MAYA-14")  # POSIX: 14 hours east of UTC
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _aware_utc(moment: datetime | None) -> bool:
    return moment is None or (moment.tzinfo is not None and moment.utcoffset() == timedelta(0))


# --- the three forms of RFC 9110 §5.6.7 ----------------------------------------------------------


def test_imf_fixdate_is_read_as_an_aware_utc_datetime() -> None:
    assert http_date(IMF) == WHEN
    assert http_date("Sun, 06 Nov 1994 08:49:37 GMT") == datetime(1994, 11, 6, 8, 49, 37, tzinfo=UTC)
    assert http_date("  tue, 01 dec 2026 10:00:00 gmt ") == WHEN  # case and surrounding space: still it


def test_the_obsolete_rfc850_form_puts_a_two_digit_year_in_the_right_century() -> None:
    assert http_date("Sunday, 06-Nov-94 08:49:37 GMT") == datetime(1994, 11, 6, 8, 49, 37, tzinfo=UTC)
    assert http_date("Tuesday, 01-Dec-26 10:00:00 GMT") == WHEN
    assert http_date("Tuesday, 01-Dec-2026 10:00:00 GMT") == WHEN


@pytest.mark.usefixtures("local_time_far_from_utc")
def test_the_obsolete_asctime_form_has_no_zone_and_is_gmt() -> None:
    assert http_date("Tue Dec  1 10:00:00 2026") == WHEN
    assert http_date("Sun Nov  6 08:49:37 1994") == datetime(1994, 11, 6, 8, 49, 37, tzinfo=UTC)


@pytest.mark.parametrize(
    "value",
    [
        "Tue, 01 Dec 2026 10:00:00",  # no zone: HTTP dates are GMT by definition
        "Tue, 01 Dec 2026 10:00:00 -0000",  # email.utils' "no zone known" spelling
        "Tue, 01 Dec 2026 10:00:00 UTC",
        "Tue, 01 Dec 2026 10:00:00 UT",
        "Tue, 01 Dec 2026 10:00:00 Z",
        "Tue, 01 Dec 2026 10:00:00 +0000",
        "01 Dec 2026 10:00:00 GMT",  # the day name left out, as RFC 5322 allows
        "Tue, 01 Dec 2026 10:00 GMT",  # no seconds
        "Tue, 01 Dec 2026 11:00:00 +0100",
        "Tue, 01 Dec 2026 04:30:00 -05:30",
        "Tuesday, 01-Dec-26 10:00:00",
    ],
)
@pytest.mark.usefixtures("local_time_far_from_utc")
def test_a_date_without_a_zone_or_with_another_spelling_of_it_is_utc(value: str) -> None:
    assert http_date(value) == WHEN
    assert http_date(value).tzinfo is UTC  # type: ignore[union-attr]


def test_a_leap_second_is_read_as_the_second_before_it() -> None:
    assert http_date("Tue, 01 Dec 2026 10:00:60 GMT") == WHEN + timedelta(seconds=59)


# --- sent twice, as some proxies do ----------------------------------------------------------------


def test_two_date_lines_or_one_line_holding_two_equal_dates_are_that_date() -> None:
    assert http_date(f"{IMF}, {IMF}") == WHEN
    assert http_date(f"{IMF}, Tue, 01 Dec 2026 10:00:00") == WHEN  # the same instant, spelled twice
    two_lines = httpx2.Response(200, headers=[("Date", IMF), ("date", "Tue Dec  1 10:00:00 2026")])
    assert two_lines.headers.get("date") == f"{IMF}, Tue Dec  1 10:00:00 2026"  # how httpx2 joins them
    assert parse_date_header(two_lines.headers) == WHEN
    assert parse_date_header({"Date": IMF}) == WHEN


def test_two_dates_that_disagree_say_nothing_about_the_servers_clock() -> None:
    assert http_date(f"{IMF}, Tue, 01 Dec 2026 10:00:01 GMT") is None
    two_lines = httpx2.Response(200, headers=[("Date", IMF), ("Date", "Tue, 01 Dec 2026 10:00:01 GMT")])
    assert parse_date_header(two_lines.headers) is None


@pytest.mark.parametrize(
    "value",
    [
        "",
        " , ",
        "soon",
        "0",
        "1764583200",  # a Unix time is not an HTTP date
        "2026-12-01T10:00:00Z",  # nor is ISO 8601
        "Tue, 31 Feb 2026 10:00:00 GMT",
        "Tue, 01 Dec 0000 10:00:00 GMT",
        "Tue, 01 Dec 2026 24:00:00 GMT",
        "Tue, 01 Dec 2026 10:61:00 GMT",
        "Tue, 01 Dec 2026 10:00:00 GMT trailing",
        f"{IMF}, soon",
        "Tue, 01 Dec 2026 10:00:00 PST",
        "Tue, 01 Dec 2026 10:00:00 +2400",
        "Sat, 01 Jan 0001 00:00:00 +0100",  # before datetime's first instant in UTC
        "Fri, 31 Dec 9999 23:59:59 -0100",  # after its last
        "Tue, ٠١ Dec ٢٠٢٦ 10:00:00 GMT",  # digits of another script, which int() would read
        b"\xff\xfe\x00",
        None,
        42,
    ],
)
def test_anything_else_is_none(value: object) -> None:
    assert http_date(value) is None


def test_an_empty_list_of_field_lines_is_none() -> None:
    assert http_date([]) is None
    assert parse_date_header({}) is None


# --- Retry-After (§10.2.3) -------------------------------------------------------------------------


def test_retry_after_delta_seconds() -> None:
    assert parse_retry_after({"Retry-After": "120"}) == 120.0
    assert parse_retry_after({"retry-after": " 0 "}) == 0.0
    assert parse_retry_after({}) is None


@pytest.mark.parametrize("value", ["-5", "1.5", "1e3", "inf", "nan", "soon", "", "5 s", "٥", "0x10"])
def test_retry_after_that_is_negative_fractional_or_garbage_is_none(value: str) -> None:
    assert parse_retry_after({"Retry-After": value}) is None


def test_retry_after_too_big_to_represent_is_2_to_the_31_seconds() -> None:
    assert parse_retry_after({"Retry-After": "99999999999999999999"}) == DELTA_SECONDS_CEILING
    assert parse_retry_after({"Retry-After": "9" * 5000}) == DELTA_SECONDS_CEILING  # int() of it would raise


def test_retry_after_as_a_date_is_measured_from_the_answers_own_date_whatever_its_form() -> None:
    later = "Tue, 01 Dec 2026 10:00:07 GMT"
    assert parse_retry_after({"Retry-After": later, "Date": "Tue, 01 Dec 2026 10:00:00"}) == 7.0
    assert parse_retry_after({"Retry-After": "Tue Dec  1 10:00:07 2026", "Date": f"{IMF}, {IMF}"}) == 7.0
    assert parse_retry_after({"Retry-After": later}, now=datetime(2026, 12, 1, 10, 0, 5)) == 2.0  # naive now: UTC
    assert parse_retry_after({"Retry-After": IMF}, now=WHEN + timedelta(hours=1)) == 0.0  # already past


def test_of_several_retry_after_values_the_longest_wait_is_kept() -> None:
    assert retry_after_value(["5", "30"], now=WHEN) == 30.0
    assert retry_after_value("5, Tue, 01 Dec 2026 10:01:00 GMT", now=WHEN) == 60.0
    assert retry_after_value(["5", "soon"], now=WHEN) is None


def test_a_status_error_reads_retry_after_from_duplicated_and_zone_less_headers() -> None:
    response = httpx2.Response(
        503,
        headers=[
            ("Retry-After", "Tue, 01 Dec 2026 10:00:07 GMT"),
            ("Date", "Tue, 01 Dec 2026 10:00:00"),
            ("Date", "Tue, 01 Dec 2026 10:00:00"),
        ],
    )
    response.request = httpx2.Request("GET", "https://door.example/v1/public/clusters")
    assert make_status_error(response).retry_after == 7.0


# --- the freshness wait, where the naive datetime raised -------------------------------------------


def test_the_freshness_delay_takes_a_zone_less_timestamp_as_utc_on_either_side() -> None:
    naive = WHEN.replace(tzinfo=None)
    assert fresh_poll_delay(naive + timedelta(seconds=2), WHEN) == 2 + C.FRESH_POLL_MIN
    assert fresh_poll_delay(WHEN + timedelta(seconds=2), naive) == 2 + C.FRESH_POLL_MIN
    assert fresh_poll_delay(WHEN.astimezone(timezone(timedelta(hours=5))) + timedelta(seconds=2), naive) == (
        2 + C.FRESH_POLL_MIN
    )
    assert seconds_between(naive, WHEN) == 0.0
    assert seconds_between(datetime.min.replace(tzinfo=timezone(timedelta(hours=3))), datetime.min) == -3 * 3600


# --- properties ----------------------------------------------------------------------------------

MOMENTS = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 30)).map(
    lambda moment: moment.replace(microsecond=0)
)
ZONES = st.sampled_from(["", " GMT", " gmt", " UTC", " UT", " Z", " +0000", " -0000"])
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
LONG_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _in_form(moment: datetime, form: str, zone: str) -> str:
    day, month = DAYS[moment.weekday()], MONTHS[moment.month - 1]
    clock = moment.strftime("%H:%M:%S")
    if form == "imf":
        return f"{day}, {moment.day:02d} {month} {moment.year:04d} {clock}{zone}"
    if form == "rfc850":
        return f"{LONG_DAYS[moment.weekday()]}, {moment.day:02d}-{month}-{moment.year:04d} {clock}{zone}"
    return f"{day} {month} {moment.day:2d} {clock} {moment.year:04d}{zone}"


DATES = st.builds(_in_form, MOMENTS, st.sampled_from(["imf", "rfc850", "asctime"]), ZONES)
NEAR_DATES = st.one_of(
    DATES,
    st.builds(lambda d, cut: d[:cut], DATES, st.integers(0, 40)),  # cut short
    st.builds(lambda d, i, c: d[:i] + c + d[i:], DATES, st.integers(0, 40), st.text(max_size=3)),  # grown
    st.builds(lambda a, b: f"{a}, {b}", DATES, DATES),  # joined, as by a proxy
    st.builds(str, st.integers(-(10**30), 10**30)),
    st.builds(str, st.floats(allow_nan=True, allow_infinity=True)),
)
FIELD_VALUE = st.one_of(NEAR_DATES, st.text(), st.binary())
FIELD_VALUES = st.one_of(FIELD_VALUE, st.lists(FIELD_VALUE, max_size=4))
HEADER_LINES = st.lists(
    st.tuples(
        st.sampled_from(["Date", "date", "DATE", "Retry-After", "retry-after", "X-Other"]),
        st.one_of(NEAR_DATES.map(lambda text: text.encode("utf-8")), st.binary(max_size=64)),
    ),
    max_size=5,
)


@settings(max_examples=400, deadline=None)
@given(MOMENTS, st.sampled_from(["imf", "rfc850", "asctime"]), ZONES, st.integers(1, 3))
def test_every_form_of_a_date_reads_back_as_the_moment_it_spells(
    moment: datetime, form: str, zone: str, copies: int
) -> None:
    text = _in_form(moment, form, zone)
    assert http_date(", ".join([text] * copies)) == moment.replace(tzinfo=UTC)


@settings(max_examples=100, deadline=None)
@given(st.datetimes(min_value=datetime(datetime.now(UTC).year - 49, 1, 1), max_value=datetime(2199, 12, 31)))
def test_a_two_digit_year_is_at_most_50_years_ahead(moment: datetime) -> None:
    moment = moment.replace(microsecond=0)
    text = f"{LONG_DAYS[moment.weekday()]}, {moment.day:02d}-{MONTHS[moment.month - 1]}-{moment.year % 100:02d} {moment:%H:%M:%S} GMT"
    parsed = http_date(text)
    assert parsed is not None and parsed.year % 100 == moment.year % 100
    assert datetime.now(UTC).year - 50 <= parsed.year <= datetime.now(UTC).year + 50


@settings(max_examples=600, deadline=None)
@given(FIELD_VALUES, st.datetimes(timezones=st.one_of(st.none(), st.timezones())))
def test_no_field_value_makes_the_parser_raise_or_answer_a_naive_datetime(values: object, now: datetime) -> None:
    parsed = http_date(values)
    assert parsed is None or parsed.tzinfo is UTC
    wait = retry_after_value(values, now=now)
    assert wait is None or (math.isfinite(wait) and wait >= 0)


@settings(max_examples=400, deadline=None)
@given(HEADER_LINES, st.datetimes(timezones=st.one_of(st.none(), st.just(UTC))))
def test_no_header_lines_of_a_real_response_make_reading_it_raise(
    lines: list[tuple[str, bytes]], next_refresh_at: datetime
) -> None:
    response = httpx2.Response(503, headers=lines)
    response.request = httpx2.Request("GET", "https://door.example/v1/public/clusters")
    server_now = parse_date_header(response.headers)
    assert _aware_utc(server_now)
    assert C.FRESH_POLL_MIN <= fresh_poll_delay(next_refresh_at, server_now) <= C.FRESH_POLL_MAX
    wait = make_status_error(response).retry_after
    assert wait is None or (math.isfinite(wait) and wait >= 0)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(HEADER_LINES, st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)), st.booleans())
def test_the_clients_freshness_wait_finishes_whatever_date_lines_door_sends(
    lines: list[tuple[str, bytes]], next_refresh_at: datetime, zoned: bool
) -> None:
    """Through ``DoorClient.list_nodes(fresh=True)``: a cold answer with these header lines (and a
    ``next_refresh_at`` with or without a zone), then a fresh one; the wait ends with the fresh one."""
    refresh = next_refresh_at.replace(tzinfo=UTC) if zoned else next_refresh_at
    cold = ok(node_list(cold=True, next_refresh_at=refresh))
    cold = httpx2.Response(200, content=cold.content, headers=[*cold.headers.raw, *lines])
    door = FakeDoor({f"GET /clusters/{CLUSTER_ID}/nodes": [cold, ok(node_list())]})
    sleeps = Sleeps()

    async def read() -> bool:
        async with make_client(door, sleeps) as client:
            return (await client.list_nodes(CLUSTER_ID, fresh=True)).fresh

    assert anyio.run(read)
    assert len(sleeps.delays) == 1 and C.FRESH_POLL_MIN <= sleeps.delays[0] <= C.FRESH_POLL_MAX
