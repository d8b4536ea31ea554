"""Every command and tool example in README.md and docs/*.md runs as written (see docs/development.md,
"The docs are tested", for the convention and its exceptions)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import ElicitRequestParams, ElicitResult, TextContent

from maya_tools.chat.model import for_the_model
from maya_tools.server import build_server
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.docs import (
    DOCS,
    INSTALL,
    README,
    REPO,
    TEST_SCRIPT,
    Block,
    Session,
    blocks,
    ci_command,
    commands,
    demo_command,
    environment,
    is_server,
    scratch,
    suite_command,
    tool_examples,
)
from tests.reachable import folder_for_another_user

README_MAX_LINES = 200

NOT_RUN = {
    ("README.md", "needs the Claude Code CLI"),
    ("client.md", "rewrites the committed cassettes, which tests/backend_client/test_cassettes.py replays"),
    ("development.md", "rewrites committed snapshots"),
    ("deploy.md", "needs your PostgreSQL, your Door and a key; tests/maya_tools/test_replicas_live.py starts the same"),
    (
        "deploy.md",
        "needs your identity provider, your Door and your keys; tests/maya_tools/auth/test_serve_oauth.py starts the same "
        "with the test provider",
    ),
    ("deploy.md", "needs a Keycloak server"),
    (
        "deploy.md",
        "needs your card store (tests/confirmation_cards/test_cards_cli.py runs these on SQLite and PostgreSQL)",
    ),
    (
        "audit.md",
        "needs your card store (tests/confirmation_cards/test_audit_log.py runs these on SQLite and PostgreSQL)",
    ),
}
"""Every `# not run: <reason>` block; a new one fails the test until it is listed here."""

SIGNATURES_ONLY = {"contracts.md"}
"""Files whose python blocks list interfaces (signatures), not code to run."""


def runnable(block: Block) -> bool:
    if block.info == "text output":
        return True
    if block.lang == "python":
        return block.path.name not in SIGNATURES_ONLY
    if block.lang != "bash" or block.not_run is not None:
        return False
    # installs: the test command is the suite itself (`.ci/run` runs it); the demo command, tests/maya_tools/test_demo.py
    return not any("pip install" in line for line in commands(block)) and commands(block) != [ci_command()]


def segments(path: Path) -> list[list[Block]]:
    """A block runs on its own, unless an earlier block of the file only started servers: from there
    on, the rest of the file runs in one session, with those servers up."""
    found: list[list[Block]] = []
    keeps_servers = False
    for block in filter(runnable, blocks(path)):
        if block.info == "text output" or keeps_servers:
            found[-1].append(block)
        else:
            found.append([block])
        lines = commands(block) if block.lang == "bash" else []
        keeps_servers = keeps_servers or (bool(lines) and all(map(is_server, lines)))
    return found


SEGMENTS = [segment for path in DOCS for segment in segments(path)]


@contextmanager
def fixed_ports(segment: list[Block]) -> Iterator[None]:
    """The docs name fixed ports; one lock per machine keeps two test runs from colliding on them."""
    if not any(is_server(c) for b in segment if b.lang == "bash" for c in commands(b)):
        yield
        return
    with open(Path(tempfile.gettempdir()) / "maya-tools-docs-ports.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.mark.parametrize("segment", SEGMENTS, ids=[s[0].where for s in SEGMENTS])
def test_the_examples_run_as_written(segment: list[Block], tmp_path: Path) -> None:
    session = Session(cwd=scratch(tmp_path), env=environment(tmp_path))
    with fixed_ports(segment):
        try:
            for block in segment:
                if block.info == "text output":
                    assert session.last_output.strip() == block.text.strip(), f"{block.where} is not what it shows"
                    continue
                servers = len(session.servers)
                session.run(block)
                if block.lang == "bash" and not all(map(is_server, commands(block))):
                    for server in session.servers[servers:]:  # started for this block's own commands
                        assert server.stop() == 0, f"{server.command!r} did not stop cleanly: {server.log.read_text()}"
                    del session.servers[servers:]
        finally:
            session.close()


def test_the_blocks_not_run_are_the_listed_ones() -> None:
    found = {(b.path.name, b.not_run) for path in DOCS for b in blocks(path) if b.not_run is not None}
    assert found == NOT_RUN


def test_the_readme_is_short() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


def test_ci_runs_exactly_the_readme_test_command_in_its_own_virtualenv() -> None:
    readme = [commands(b) for b in blocks(README) if b.lang == "bash"]
    assert ci_command() == "scripts/test.sh"
    assert [ci_command()] in readme
    assert suite_command().startswith("python3 -m venv .venv && . .venv/bin/activate && pip install")
    assert suite_command().endswith("&& pytest -q -n auto"), "pytest runs last, so its exit code is the script's"
    every = [commands(b) for path in DOCS for b in blocks(path) if b.lang == "bash"]
    tests = [
        c
        for c in every
        if any("pytest" in line or ci_command() in line for line in c) and not any("MAYA_UPDATE" in x for x in c)
    ]
    assert tests and all(c == [ci_command()] for c in tests), "every test command of the docs is the CI one"


def test_the_only_commands_that_install_are_the_test_and_demo_commands() -> None:
    installing = {c for path in DOCS for b in blocks(path) for c in commands(b) if "pip install" in c}
    assert installing == {demo_command()}
    assert "pip install -q -e '.[dev]'" in suite_command()


@dataclass(frozen=True)
class Sandbox:
    """``bin``: a ``PATH`` folder with only what the test script runs before its check; ``script``: a
    copy of the test script in a checkout-shaped folder (``<folder>/checkout/scripts/test.sh``);
    ``writable``: a folder any user may write in."""

    bin: Path
    script: Path
    writable: Path


@contextmanager
def without_the_system_packages() -> Iterator[Sandbox]:
    """A ``PATH`` folder with only what the test script runs before its check (no chromium, openssl,
    node, npm, apt-get or python3) and a copy of the script, both readable by another user: neither
    pytest's own folder nor the checkout may be (a clone under ``mktemp -d`` or ``/root`` is 0700).
    The script reads nothing else before it stops (``cd`` to its checkout, then ``command -v``)."""
    folder = folder_for_another_user("maya-path-")
    try:
        bin_dir = folder / "bin"
        bin_dir.mkdir()
        for tool in ("bash", "dirname", "ls"):
            found = shutil.which(tool)
            assert found is not None, tool
            (bin_dir / tool).symlink_to(found)
        script = folder / "checkout" / "scripts" / TEST_SCRIPT.name
        script.parent.mkdir(parents=True)
        shutil.copyfile(TEST_SCRIPT, script)
        for path in (bin_dir, script.parent.parent, script.parent):
            path.chmod(0o755)
        script.chmod(0o644)
        writable = folder / "writable"
        writable.mkdir()
        writable.chmod(0o777)
        yield Sandbox(bin_dir, script, writable)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def cannot_install(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr  # one line, and nothing ran after it
    (line,) = done.stderr.splitlines()
    packages = line.split("; ")[0].removeprefix("scripts/test.sh: the tests need ").split()
    assert {"chromium", "openssl", "nodejs", "npm"} <= set(packages), line
    assert f"sudo apt-get install -y {' '.join(packages)}" in line


def test_the_test_command_without_apt_get_names_the_packages_to_install() -> None:
    with without_the_system_packages() as sandbox:
        done = subprocess.run(
            [str(sandbox.bin / "bash"), str(sandbox.script)],
            env={"PATH": str(sandbox.bin), "CI": "true"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
    cannot_install(done)


def test_the_test_command_not_as_root_names_the_packages_and_does_not_run_apt_get() -> None:
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "setpriv (Debian's util-linux) runs the script as another user"
    with without_the_system_packages() as sandbox:
        ran = sandbox.writable / "apt-get-ran"  # where nobody can write it, were apt-get run
        (sandbox.bin / "apt-get").write_text(f"#!{sandbox.bin / 'bash'}\necho ran > {ran}\n")
        (sandbox.bin / "apt-get").chmod(0o755)
        done = subprocess.run(
            [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", str(sandbox.bin / "bash"), str(sandbox.script)],
            env={"PATH": str(sandbox.bin), "CI": "true"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert not ran.exists()
    cannot_install(done)


def test_the_demo_command_installs_and_then_runs_the_demo() -> None:
    assert demo_command() == INSTALL + ".venv/bin/maya-tools demo"


@pytest.mark.skipif(
    os.environ.get("MAYA_DOCS_INSTALL") != "1", reason="installs from the package index: set MAYA_DOCS_INSTALL=1"
)
def test_the_whole_demo_command_on_a_fresh_copy(tmp_path: Path) -> None:
    copy = tmp_path / "maya-tools"
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info"))
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{demo_command()}"],
        cwd=copy,
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count(": executed") == 3


def test_client_configurations_run_maya_tools_serve_with_uvx() -> None:
    """tests/packaging/test_client_configs.py starts each of them from the built wheel."""
    configs = [json.loads(b.text) for path in DOCS for b in blocks(path) if b.lang == "json"]
    assert len(configs) >= 2
    for config in configs:
        server = (config.get("servers") or config["mcpServers"])["maya-tools"]
        assert server["command"] == "uvx" and server["args"] == ["maya-tools", "serve"]
        assert set(server.get("env", {})) <= {"DOOR_API_URL", "DOOR_TOKEN"}


# --- tool examples ----------------------------------------------------------------------------------


async def approve(context: Any, params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"approve": True})


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


HAS_TOOL_EXAMPLES = [path for path in DOCS if "`{" in path.read_text(encoding="utf-8")]


@pytest.mark.anyio
@pytest.mark.parametrize("path", HAS_TOOL_EXAMPLES, ids=[p.name for p in HAS_TOOL_EXAMPLES])
async def test_tool_examples_answer_without_error(path: Path) -> None:
    """In document order on one server (embedded reference backend, demo seed), a person approving
    every card, and an hour of simulated time after each example so its operation has ended."""
    clock = ManualClock()
    server = build_server(Settings(), backend=ReferenceBackend(clock=clock, seed="demo"))
    async with Client(server, elicitation_callback=approve) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools if for_the_model(tool)}
        examples = tool_examples(path, tools)
        last_card: str | None = None
        for line, tool, arguments in examples:
            if arguments.get("card_id") == "card_…":
                assert last_card is not None, f"{path.name}:{line}: no card was made before this example"
                arguments = {**arguments, "card_id": last_card}
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, f"{path.name}:{line}: {tool} {arguments} failed: {_text(result)}"
            data = result.structured_content or {}
            if isinstance(data.get("card"), dict) and "status" in data:  # a change tool's result
                last_card = data["card"]["id"]
                assert data["status"] == "executed", f"{path.name}:{line}: {tool} ended {data['status']}"
            clock.advance(3600)
    if path == README:
        assert {tool for _, tool, _ in examples} == tools, "the README's table shows every tool"
