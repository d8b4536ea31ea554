"""The replica settings are read once, a server refuses to start with a setting it cannot use and says
which and what to do, and a PostgreSQL URL's password never reaches a log line or an error."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from maya_tools.channels.request_state import request_state_security
from maya_tools.settings import KEY_BYTES, ConfigError, Settings, check_replicas
from tests.maya_tools.live import free_port

STORE = "postgresql://maya:hunter2-secret@db.internal:5432/maya"


def test_the_replica_settings_are_read_and_the_store_url_is_not_in_the_repr() -> None:
    settings = Settings.from_env(
        {
            "MAYA_CARD_STORE": STORE,
            "MAYA_STORE_POOL_SIZE": "4",
            "MAYA_REQUEST_STATE_KEY": "k" * KEY_BYTES,
            "MAYA_REPLICA": "r2",
            "MAYA_PUBLIC_URL": "https://maya.internal/",
        }
    )
    assert (settings.store_pool_size, settings.replica, settings.public_url) == (4, "r2", "https://maya.internal")
    assert "hunter2" not in repr(settings) and "k" * KEY_BYTES not in repr(settings)


@pytest.mark.parametrize(
    ("name", "given"),
    [
        ("MAYA_STORE_POOL_SIZE", "ten"),
        ("MAYA_STORE_POOL_SIZE", "0"),
        ("MAYA_STORE_POOL_SIZE", "2.5"),
        ("MAYA_CARD_TTL_SECONDS", "-5"),
        ("MAYA_SWEEP_SECONDS", "nan"),
        ("MAYA_DOOR_TIMEOUT_SECONDS", "inf"),
    ],
)
def test_a_setting_that_is_not_a_usable_number_is_refused_naming_it(name: str, given: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{name} must be .*{given!r}; unset it for"):
        Settings.from_env({name: given})


def test_a_short_request_state_key_is_refused_saying_how_to_make_one() -> None:
    with pytest.raises(ConfigError, match=r"at least 32 bytes.*secrets\.token_hex\(32\)"):
        request_state_security(Settings(request_state_key="too-short"))


def test_replicas_on_postgresql_over_http_need_the_shared_key() -> None:
    with pytest.raises(ConfigError, match="MAYA_REQUEST_STATE_KEY is not set"):
        check_replicas(Settings(card_store=STORE), "streamable-http")
    check_replicas(Settings(card_store=STORE, request_state_key="k" * KEY_BYTES), "streamable-http")
    check_replicas(Settings(card_store=STORE), "stdio")  # one process: its own key does
    check_replicas(Settings(card_store="/tmp/cards.sqlite3"), "streamable-http")


def serve(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MAYA_", "DOOR_"))}
    return subprocess.run(
        [sys.executable, "-m", "maya_tools.cli", "serve", *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"MAYA_CARD_STORE": STORE}, "MAYA_REQUEST_STATE_KEY is not set"),
        ({"MAYA_STORE_POOL_SIZE": "many"}, "MAYA_STORE_POOL_SIZE must be a whole number"),
        ({"MAYA_REQUEST_STATE_KEY": "short"}, "MAYA_REQUEST_STATE_KEY is 5 bytes"),
    ],
)
def test_serve_refuses_to_start_with_an_unusable_setting_in_one_line(env: dict[str, str], said: str) -> None:
    done = serve(env, "--transport", "streamable-http", "--port", str(free_port()))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("maya-tools serve: ") and said in done.stderr
    assert "Traceback" not in done.stderr and "hunter2" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize(
    "env",
    [{"MAYA_CARD_STORE": STORE}, {"MAYA_STORE_POOL_SIZE": "many"}, {"MAYA_REQUEST_STATE_KEY": "short"}],
)
def test_serve_refuses_before_it_imports_the_server_or_mcp(env: dict[str, str]) -> None:
    """A refusal is immediate: it comes before the ~0.6 s of imports a server that starts needs."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MAYA_", "DOOR_"))}
    probe = (
        "import sys\n"
        "from maya_tools.cli import main\n"
        "status = main(['serve', '--transport', 'streamable-http', '--port', '1'])\n"
        "print(status, sorted(m for m in ('maya_tools.server', 'mcp', 'uvicorn') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env={**clean, **env}, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.split("\n")[0] == "2 []", done.stdout + done.stderr
    assert done.stderr.startswith("maya-tools serve: ")


def test_serve_on_a_database_that_does_not_answer_stops_naming_where_never_the_password() -> None:
    unreachable = f"postgresql://maya:hunter2-secret@127.0.0.1:{free_port()}/maya"
    done = serve(
        {"MAYA_CARD_STORE": unreachable, "MAYA_REQUEST_STATE_KEY": "k" * KEY_BYTES, "MAYA_STORE_CONNECT_SECONDS": "1"},
        "--transport",
        "streamable-http",
        "--port",
        str(free_port()),
    )
    assert done.returncode == 2 and done.stdout == ""
    said = done.stderr.strip().splitlines()[-1]  # after psycopg's own warnings of the refused connections
    assert said.startswith("maya-tools serve: The PostgreSQL card store at 127.0.0.1:")
    assert "did not accept a connection within 1 s" in done.stderr and "hunter2" not in done.stderr
    assert "Traceback" not in done.stderr
