"""The loopback guard: a test held to loopback that tries to reach another host fails, and nothing is sent.

Each example suite runs in its own pytest process with a witness: an audit hook (``sys.addaudithook``)
that sees every socket connect, send and name lookup when CPython is about to make it, records
those of a host that is not loopback and blocks them. So even a broken guard would send no packet,
and the witness's record shows whether the guard refused first: it must stay empty for the guarded
tests. The hosts are TEST-NET-1 (192.0.2.1, never routed) and names that are never looked up.
"""

from __future__ import annotations

import json

import pytest

from reference_backend.testing.guard import is_loopback, loopback_only
from tests.reference_backend.testing.pytester_runs import run

WITNESS = '''
import ipaddress, json, socket, sys
from pathlib import Path

SEEN = []


def _loopback(host):
    if isinstance(host, bytes):
        host = host.decode()
    if host in (None, "", "localhost"):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


def _witness(event, args):
    if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
        sock, address = args[0], args[-1]
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            SEEN.append(f"{event} {address[0]}")
            raise ConnectionRefusedError(f"witness blocked {event} to {address[0]}")
    elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex"):
        if not _loopback(args[0]):
            SEEN.append(f"{event} {args[0]}")
            raise socket.gaierror(f"witness blocked {event} of {args[0]}")


sys.addaudithook(_witness)


def pytest_sessionfinish(session):
    Path("witness.json").write_text(json.dumps(SEEN))
'''

GUARDED = '''
import socket

import anyio
import httpx2
import pytest

pytestmark = pytest.mark.loopback_only


def test_an_httpx2_request_to_a_remote_address():
    httpx2.get("http://192.0.2.1/v1/public/clusters")


def test_an_async_request_to_a_remote_name_is_refused_before_its_lookup():
    async def call():
        async with httpx2.AsyncClient() as client:
            await client.get("https://dks-api.apps.door.cloud/v1/public/clusters")

    anyio.run(call)


def test_a_raw_connection_whose_error_the_code_swallows():
    try:
        socket.create_connection(("192.0.2.1", 443), timeout=1)
    except OSError:
        pass


def test_a_name_lookup():
    socket.getaddrinfo("door-api.example", 443)


def test_a_datagram():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.sendto(b"hello", ("192.0.2.1", 53))


@pytest.fixture
def remote_client():
    socket.create_connection(("192.0.2.1", 5432), timeout=1)


def test_a_fixture_that_connects_in_its_set_up(remote_client):
    pass


def test_loopback_is_allowed(door):
    assert httpx2.get(f"{door.url}/v1/public/clusters", headers=door.headers()).status_code == 200
    assert socket.getaddrinfo("localhost", 80) and socket.getaddrinfo("::1", 80)
    with socket.create_connection(("127.0.0.1", int(door.url.rsplit(":", 1)[1]))):
        pass
'''

UNGUARDED = '''
import socket


def test_without_the_marker_the_attempt_reaches_the_socket_layer():
    with socket.socket() as sock:
        try:
            sock.connect(("192.0.2.1", 443))
        except OSError as error:
            assert "witness blocked" in str(error)
'''


def witnessed(pytester: pytest.Pytester) -> list[str]:
    seen: list[str] = json.loads((pytester.path / "witness.json").read_text())
    return seen


def test_a_guarded_test_that_reaches_out_fails_and_nothing_leaves(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(WITNESS)
    pytester.makepyfile(test_guarded=GUARDED)
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=5, errors=1)
    result.stdout.fnmatch_lines_random(
        [
            "E  *reach 192.0.2.1:80 through httpx2 (GET http://192.0.2.1/v1/public/clusters), which is not a loopback host*",
            "E  *reach dks-api.apps.door.cloud:443 through httpx2 (GET https://dks-api.apps.door.cloud/v1/public/clusters)*",
            "*reach 192.0.2.1:443 through socket.getaddrinfo*(in the test's body)",
            "E  *reach door-api.example:443 through socket.getaddrinfo*",
            "E  *reach 192.0.2.1:53 through socket.sendto*",
            "E  *reach 192.0.2.1:5432 through socket.getaddrinfo*",
            "FAILED test_guarded.py::test_a_raw_connection_whose_error_the_code_swallows*",
            "ERROR test_guarded.py::test_a_fixture_that_connects_in_its_set_up*",
            "PASSED test_guarded.py::test_loopback_is_allowed",
        ]
    )
    assert "point its client at the reference backend (the door fixture's door.url)" in result.stdout.str()
    assert witnessed(pytester) == []  # the guard refused each before CPython's socket layer saw it


def test_the_witness_sees_what_an_unguarded_test_attempts(pytester: pytest.Pytester) -> None:
    """The control: without the guard the same connection reaches the socket layer (the witness blocks it)."""
    pytester.makeconftest(WITNESS)
    pytester.makepyfile(test_unguarded=UNGUARDED)
    run(pytester).assert_outcomes(passed=1)
    assert witnessed(pytester) == ["socket.connect 192.0.2.1"]


def test_the_option_and_the_ini_setting_hold_every_test(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(WITNESS)
    pytester.makepyfile(test_unguarded=UNGUARDED)
    run(pytester, "--loopback-only").assert_outcomes(failed=1)
    pytester.makeini("[pytest]\nloopback_only = true\n")
    held = run(pytester)
    held.assert_outcomes(failed=1)
    held.stdout.fnmatch_lines(["E  *reach 192.0.2.1:443 through socket.connect, which is not a loopback host*"])
    assert witnessed(pytester) == []


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        (b"localhost", True),
        ("LOCALHOST.", True),
        ("192.0.2.1", False),
        ("0.0.0.0", False),
        ("10.0.0.1", False),
        ("localhost.example", False),
        ("evil.localhost", False),
        ("dks-api.apps.door.cloud", False),
        (None, False),
    ],
)
def test_only_loopback_counts_as_loopback(host: object, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_the_guard_is_gone_once_its_block_ends() -> None:
    import socket

    original = socket.socket.connect
    with loopback_only() as outer, loopback_only() as inner:
        assert socket.socket.connect is not original
    assert socket.socket.connect is original
    assert list(outer) == list(inner) == []
