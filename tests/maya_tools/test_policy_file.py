"""``MAYA_POLICY``: the policy file is validated, and a server that cannot honour it does not start.

Real ``maya-tools serve`` processes: a malformed file stops the server with one line on stderr
naming the rule and the field (exit 2); a rule needing another person refuses stdio and
``--auth door-token`` in one line saying why; a deny rule works on stdio, through the SDK's stdio
client, before any card is stored.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from confirmation_cards import SqliteCardStore
from confirmation_cards.policy import PolicyError, parse_policy
from maya_tools.policy import check_policy, read_policy, with_policy
from maya_tools.settings import ConfigError, Settings
from tests.maya_tools.conftest import MODES, Person
from tests.maya_tools.test_transports import server_env

FOUR_EYES = """
[[rule]]
name = "prod-four-eyes"
clusters = ["tag:prod"]
pools = ["*"]
actions = ["*"]
approvals = 1
approvers = { claim = "groups", any_of = ["platform"] }
self_approval = false
"""
DENY = """
[[rule]]
name = "no-prod-removals"
clusters = ["tag:prod"]
actions = ["remove", "relabel"]
deny = "Production changes go through a change ticket."

[[rule]]
name = "cap"
clusters = ["*"]
max_count = 50
sizes = ["dks.c5.large", "dks.c5.xlarge"]
"""
KEY = secrets.token_hex(32)


def serve(tmp_path: Path, policy: str, *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "policy.toml"
    path.write_text(policy)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAYA_", "DOOR_"))}
    env.update({"MAYA_POLICY": str(path), "MAYA_CARD_STORE": str(tmp_path / "cards.sqlite3")})
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


PROBE = (
    "import sys\n"
    "from maya_tools.cli import main\n"
    "status = main(['serve', *sys.argv[1:]])\n"
    "print(status, 'maya_tools.server' in sys.modules)\n"
)
"""``serve`` in a process that says, after it returns, its status and whether the server's modules were loaded."""


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.stdout == "2 False\n", done.stdout + done.stderr  # refused before the server's imports
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("maya-tools serve: MAYA_POLICY"), done.stderr
    return lines[0]


BROKEN = [
    ('[[rule]]\nname = "cap"\nclusters = ["*"]\nmax_count = "fifty"\n', "rule 'cap' (rule 1), field max_count"),
    (
        FOUR_EYES + '\n[[rule]]\nname = "x"\nclusters = ["*"]\nactions = ["delete"]\n',
        "rule 'x' (rule 2), field actions.0",
    ),
    ('[[rule]]\nclusters = ["*"]\nmax_count = 3\n', "rule 1, field name: Field required"),
    ('[[rule]]\nname = "typo"\nclusters = ["*"]\nmax_cout = 3\n', "rule 'typo' (rule 1), field max_cout: not a field"),
    (
        '[[rule]]\nname = "a"\nclusters = ["*"]\napprovers = { claim = "groups", any_of = ["p"] }\n',
        "rule 'a' (rule 1), field approvers: set approvals",
    ),
    (
        '[[rule]]\nname = "a"\nclusters = ["*"]\n[[rule]]\nname = "a"\nclusters = ["*"]\n',
        "field name: two rules are named 'a'",
    ),
    ('[[rule]]\nname = "d"\nclusters = ["tag:"]\n', "rule 'd' (rule 1), field clusters: 'tag:' needs a tag"),
    ('[[rule]\nname = "oops"\n', "is not valid TOML"),
]


@pytest.mark.parametrize(("text", "said"), BROKEN)
def test_a_malformed_policy_stops_the_server_naming_the_rule_and_the_field(
    tmp_path: Path, text: str, said: str
) -> None:
    line = one_line(serve(tmp_path, text))
    assert said in line, line


def test_a_missing_policy_file_stops_the_server_saying_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        read_policy(tmp_path / "nowhere.toml")


def test_a_four_eyes_policy_refuses_stdio_in_one_line(tmp_path: Path) -> None:
    line = one_line(serve(tmp_path, FOUR_EYES))
    assert (
        "policy rule 'prod-four-eyes' needs another person" in line and "--auth oauth" in line and "not stdio" in line
    )


def test_a_four_eyes_policy_refuses_door_token_mode_in_one_line(tmp_path: Path) -> None:
    done = serve(tmp_path, FOUR_EYES, "--transport", "streamable-http", "--auth", "door-token", "--port", "1")
    line = one_line(done)
    assert "needs another person" in line and "not --auth door-token" in line


def test_a_four_eyes_policy_is_accepted_under_oauth_and_a_deny_policy_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(FOUR_EYES)
    oauth = Settings(policy_file=str(path), auth="oauth")
    assert with_policy(oauth, "streamable-http").policy is not None
    deny = Settings(policy=read_policy_text(tmp_path, DENY))
    for transport in ("stdio", "streamable-http", "memory"):
        check_policy(deny, transport)
    with pytest.raises(ConfigError, match="needs approvers holding the claim 'groups'"):
        check_policy(
            Settings(
                policy=parse_policy(
                    {
                        "rule": [
                            {
                                "name": "r",
                                "clusters": ["*"],
                                "approvals": 1,
                                "approvers": {"claim": "groups", "any_of": ["p"]},
                            }
                        ]
                    }
                )
            ),
            "stdio",
        )


def read_policy_text(tmp_path: Path, text: str) -> object:
    path = tmp_path / "other.toml"
    path.write_text(text)
    return read_policy(path)


def test_a_rule_without_approvers_or_limits_is_fine_and_the_policy_error_is_a_value_error() -> None:
    assert parse_policy({"rule": [{"name": "r", "clusters": ["*"], "approvals": 1}]}).needs_identities is None
    with pytest.raises(PolicyError):
        parse_policy({"rules": []})


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_deny_rule_refuses_on_a_real_stdio_server_before_any_card(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(DENY)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "maya_tools.cli", "serve"],
        env=server_env(tmp_path, MAYA_POLICY=str(path)),
    )
    person = Person("accept")
    async with Client(params, mode=mode, elicitation_callback=person) as client:
        result = await client.call_tool(
            "relabel_node_pool", {"cluster": "payments-prod", "pool": "workers", "labels": {"team": "payments"}}
        )
        capped = await client.call_tool(
            "add_node_pool", {"cluster": "payments-prod", "name": "big", "size": "dks.c5.large", "count": 51}
        )

    said = " ".join(getattr(c, "text", "") for c in result.content)
    assert (
        result.is_error
        and "no-prod-removals" in said
        and "from chat: Production changes go through a change ticket. Nothing" in said
    )
    capped_said = " ".join(getattr(c, "text", "") for c in capped.content)
    assert capped.is_error and "'cap'" in capped_said and "max_count = 50" in capped_said, capped_said
    assert person.messages == []
    assert await SqliteCardStore(tmp_path / "cards.sqlite3").list() == []
