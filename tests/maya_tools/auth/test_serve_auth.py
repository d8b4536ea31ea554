"""``serve --auth``: every combination it cannot serve is refused in one line naming what to set,
before the server's imports; ``door-token`` (token passthrough) only on loopback, with a warning."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from maya_tools.settings import ConfigError, Settings, choose_auth, is_loopback
from tests.maya_tools.live import Proc, base_env, free_port

KEY = secrets.token_hex(32)
OAUTH = {
    "MAYA_OAUTH_ISSUER": "https://login.door.test",
    "MAYA_PUBLIC_URL": "https://maya.door.test",
    "MAYA_OAUTH_CLIENT_ID": "maya-tools",
    "MAYA_OAUTH_CLIENT_SECRET": "client-secret-value",
    "MAYA_CREDENTIAL_KEY": KEY,
}
PROBE = (
    "import sys\n"
    "from maya_tools.cli import main\n"
    "status = main(['serve', '--transport', 'streamable-http', '--port', '1', *sys.argv[1:]])\n"
    "print(status, sorted(m for m in ('maya_tools.server', 'uvicorn') if m in sys.modules))\n"
)


def serve(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MAYA_", "DOOR_"))}
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def refusal(done: subprocess.CompletedProcess[str]) -> str:
    assert done.stdout.split("\n")[0] == "2 []", done.stdout + done.stderr  # refused before the server's imports
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("maya-tools serve: "), done.stderr
    assert "client-secret-value" not in done.stderr and KEY not in done.stderr
    return lines[0]


@pytest.mark.parametrize("missing", sorted(OAUTH))
def test_oauth_without_one_of_its_settings_is_refused_naming_it(missing: str) -> None:
    env = {k: v for k, v in OAUTH.items() if k != missing}
    said = refusal(serve(env, "--auth", "oauth"))
    assert f"--auth oauth needs {missing}:" in said


def test_oauth_with_nothing_set_names_every_setting_in_one_line() -> None:
    said = refusal(serve({}, "--auth", "oauth"))
    assert all(name in said for name in OAUTH)


def test_an_issuer_makes_oauth_the_default() -> None:
    said = refusal(serve({"MAYA_OAUTH_ISSUER": OAUTH["MAYA_OAUTH_ISSUER"]}))
    assert said.startswith("maya-tools serve: --auth oauth needs MAYA_PUBLIC_URL, ")


def test_door_token_mode_on_a_non_loopback_host_is_refused_naming_the_oauth_settings() -> None:
    said = refusal(serve({}, "--host", "0.0.0.0"))
    assert "--host 0.0.0.0 is not a loopback address" in said and "token passthrough" in said
    assert all(name in said for name in OAUTH)


def test_an_explicit_door_token_mode_is_refused_off_loopback_even_with_an_issuer() -> None:
    said = refusal(serve(OAUTH, "--auth", "door-token", "--host", "192.0.2.7"))
    assert "--host 192.0.2.7 is not a loopback address" in said


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"MAYA_PUBLIC_URL": "http://maya.door.test"}, "MAYA_PUBLIC_URL must be an https:// URL"),
        ({"MAYA_OAUTH_ISSUER": "login.door.test"}, "MAYA_OAUTH_ISSUER must be an https:// URL"),
        ({"MAYA_ALLOWED_ORIGINS": "https://claude.ai/"}, "MAYA_ALLOWED_ORIGINS entry 'https://claude.ai/' is not"),
    ],
)
def test_a_url_that_cannot_be_served_is_refused(env: dict[str, str], said: str) -> None:
    assert said in refusal(serve({**OAUTH, **env}))


def test_a_credential_key_that_is_not_64_hex_characters_is_refused_in_one_line() -> None:
    done = serve({**OAUTH, "MAYA_CREDENTIAL_KEY": "not-a-key"})
    assert done.stdout.split("\n")[0].startswith("2 "), done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "MAYA_CREDENTIAL_KEY entry 1 of 1 has 9 characters" in lines[0], done.stderr


def test_stdio_needs_no_auth_settings() -> None:
    settings = Settings.from_env({"MAYA_OAUTH_ISSUER": OAUTH["MAYA_OAUTH_ISSUER"]})
    assert choose_auth(settings, "stdio", "0.0.0.0").auth is None


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("maya.door.test", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_choose_auth_raises_config_error_for_a_public_bind_without_oauth() -> None:
    with pytest.raises(ConfigError, match="not a loopback address"):
        choose_auth(Settings(), "streamable-http", "0.0.0.0")


def test_door_token_mode_on_loopback_warns_naming_the_token_passthrough_rule(tmp_path: Path) -> None:
    port = free_port()
    env = {**base_env(), "MAYA_CARD_STORE": str(tmp_path / "cards.sqlite3")}
    env = {k: v for k, v in env.items() if not k.startswith("MAYA_OAUTH")}
    server = Proc(["serve", "--transport", "streamable-http", "--port", str(port)], port, env)
    try:
        logged = server.logged()
    finally:
        server.stop()
    # the log handler may wrap lines and put the source line at the right margin
    said = " ".join(word for word in logged.split() if not re.fullmatch(r"[\w.]+\.py:\d+", word))
    assert re.search(r"WARNING (maya_tools: )?--auth door-token: each request's bearer is the caller's own Door", said)
    assert "MCP servers MUST NOT accept any tokens that were not explicitly issued for the MCP server" in said
