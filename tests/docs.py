"""The examples of the README and of docs/*.md, as written, and what a test needs to run them.

The convention (docs/development.md, "The docs are tested"): fenced `bash` blocks are run command by
command; fenced `python` blocks are run with top-level await; `tool_name {json}` code spans, and the
JSON arguments of the README's tools table, are called through the in-memory MCP `Client`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = [README, *sorted((REPO / "docs").glob("*.md"))]

NOT_RUN = "# not run:"
INSTALL = "python3 -m venv .venv && .venv/bin/pip install -q -e . && "
"""The first half of the README's demo command: it needs the package index; MAYA_DOCS_INSTALL=1 runs it."""

# `reference-backend snapshot save|restore` is a client of a running backend, not a server.
SERVER = re.compile(
    r"\bmaya[-_]tools(?:\.cli)? (?:serve .*--transport streamable-http|reference-backend(?! snapshot))\b"
    r"|\bnode tests/oidc/provider\.mjs\b"  # the test OpenID provider of deploy.md's walk-through
)
NPM_CI = re.compile(r"^\(cd (tests/[\w/]+) && npm ci\)$")
"""`npm ci` of one of the repository's package folders, as a newcomer runs it once."""
DEMO_TOKEN = "demo-admin-token"
DEFAULT_PORTS = {"serve": 8765, "reference-backend": 8642}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    info: str
    text: str

    @property
    def lang(self) -> str:
        return self.info.split()[0] if self.info else ""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    @property
    def not_run(self) -> str | None:
        """The reason given on a first line `# not run: <reason>`, if any."""
        first = self.text.splitlines()[0] if self.text else ""
        return first[len(NOT_RUN) :].strip() if first.startswith(NOT_RUN) else None


def blocks(path: Path) -> list[Block]:
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            info, start = lines[i][3:].strip(), i + 1
            end = next(j for j in range(start, len(lines)) if lines[j].startswith("```"))
            found.append(Block(path, start, info, "\n".join(lines[start:end])))
            i = end
        i += 1
    return found


def commands(block: Block) -> list[str]:
    """The block's commands: `\\`-continued lines joined, comment-only and blank lines left out."""
    out: list[str] = []
    pending = ""
    for raw in block.text.splitlines():
        line = pending + raw
        if line.endswith("\\"):
            pending = line[:-1].rstrip() + " "
            continue
        pending = ""
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(line.strip())
    return out


TEST_SCRIPT = REPO / "scripts" / "test.sh"
"""The README's test command: the set-up of a fresh machine, then the venv, lint, types and the suite."""


def ci_command() -> str:
    """The command `.ci/run` runs: its last line."""
    return (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]


def suite_command() -> str:
    """The command the test script ends with: the virtualenv, lint, types and the suite."""
    return TEST_SCRIPT.read_text(encoding="utf-8").strip().splitlines()[-1]


def demo_command() -> str:
    """The README's demo command, the first bash block."""
    first = next(b for b in blocks(README) if b.lang == "bash")
    (command,) = commands(first)
    return command


def is_server(command: str) -> bool:
    return bool(SERVER.search(command))


def without_comment_and_ampersand(command: str) -> str:
    return re.sub(r"\s+#.*$", "", command).rstrip().rstrip("&").rstrip()


def exec_form(command: str) -> str:
    """`A=1 tool args` as `A=1 exec tool args`: the server replaces the shell, so a SIGTERM reaches it."""
    assignments = re.match(r"^((?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*)(.*)$", command)
    assert assignments is not None
    return f"{assignments.group(1)}exec {assignments.group(2)}"


def port_of(command: str) -> int:
    words = shlex.split(without_comment_and_ampersand(command))
    if "--port" in words:
        return int(words[words.index("--port") + 1])
    return DEFAULT_PORTS["serve" if " serve " in f" {command} " else "reference-backend"]


def scratch(tmp: Path) -> Path:
    """A folder that looks like a checkout with its virtualenv: `.venv` is the running one and the
    repository's files are linked, so `.venv/bin/…`, `scripts/…` and `benchmarks/…` work as written."""
    work = tmp / "checkout"
    work.mkdir()
    (work / ".venv").symlink_to(Path(sys.prefix))
    for entry in REPO.iterdir():
        if entry.name not in {".venv", ".git"} and not (work / entry.name).exists():
            (work / entry.name).symlink_to(entry)
    return work


def environment(tmp: Path) -> dict[str, str]:
    """No Door URL, no Anthropic key, a private home; the virtualenv's commands first on PATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DOOR_", "MAYA_", "ANTHROPIC_")) and k not in {"VIRTUAL_ENV", "PYTHONPATH"}
    }
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        DOOR_TOKEN=DEMO_TOKEN,  # a reader who exported their token: the demo seed's super_admin
    )
    return env


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@dataclass
class Server:
    command: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> int:
        """SIGTERM, as a service manager would; 0 when the server shut down cleanly (uvicorn ends a
        graceful shutdown by re-raising the signal, so that counts as clean too)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            status = self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=5)
            raise AssertionError(f"{self.command!r} did not stop on SIGTERM") from None
        if status == -signal.SIGTERM and "Traceback" not in self.log.read_text():
            return 0
        return status


@dataclass
class Session:
    """Runs one file's blocks in order; servers live until :meth:`close`."""

    cwd: Path
    env: dict[str, str]
    servers: list[Server] = field(default_factory=list)
    last_output: str = ""

    def run(self, block: Block, *, timeout: float = 60) -> None:
        if block.lang == "bash":
            self.bash(block, timeout=timeout)
        elif block.lang == "python":
            self.python(block, timeout=timeout)

    def bash(self, block: Block, *, timeout: float) -> None:
        """Runs the commands in one shell, except that a server is started in the background and
        waited for; `export`s before a server still hold after it."""
        outputs: list[str] = []
        exports: list[str] = []
        chunk: list[str] = []
        for command in [*commands(block), None]:
            if command is not None and (folder := NPM_CI.match(command)):
                # The same `npm ci` from the committed lockfile, through the helper the suite uses: a plain
                # `npm ci` would delete node_modules under the tests that run the provider at the same time.
                from tests.node import node_modules

                node_modules(REPO / folder.group(1))
                continue
            if command is not None and not is_server(command):
                chunk.append(command)
                continue
            if chunk:
                outputs.append(self.shell(block, [*exports, *chunk], timeout=timeout))
                exports += [c for c in chunk if c.startswith("export ")]
                chunk = []
            if command is not None:
                self.start(command)
        self.last_output = "".join(outputs)

    def shell(self, block: Block, lines: list[str], *, timeout: float) -> str:
        script = "\n".join(lines)
        done = subprocess.run(
            ["bash", "-c", f"set -euo pipefail\n{script}"],
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, (
            f"{block.where}: `{script}` exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
        return done.stdout

    def start(self, command: str) -> None:
        port = port_of(command)
        assert not listening(port), f"port {port} of `{command}` is taken by something else"
        log = self.cwd / f"server-{len(self.servers)}.log"
        with log.open("wb") as stderr:
            process = subprocess.Popen(
                ["bash", "-c", exec_form(without_comment_and_ampersand(command))],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )
        server = Server(command, port, process, log)
        self.servers.append(server)

        def up() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"`{command}` exited {process.returncode}: {log.read_text()[-2000:]}")
            return listening(port)

        from tests.maya_tools.live import wait_until

        wait_until(up, f"`{command}` to listen on {port}")

    def python(self, block: Block, *, timeout: float) -> None:
        env = dict(self.env)
        backend = next((s for s in self.servers if "reference-backend" in s.command), None)
        if backend is not None:  # "against Door": the file's reference backend stands in for it
            env.update(DOOR_API_URL=f"http://127.0.0.1:{backend.port}", DOOR_TOKEN="demo-admin-token")
        done = subprocess.run(
            [sys.executable, "-c", RUN_PYTHON, block.text, block.where],
            cwd=self.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, f"{block.where}: the python block failed:\n{done.stderr[-3000:]}"
        self.last_output = done.stdout

    def close(self) -> None:
        problems = []
        for server in self.servers:
            status = server.stop()
            if status != 0:
                problems.append(f"`{server.command}` stopped with {status}: {server.log.read_text()[-1000:]}")
        self.servers.clear()
        assert not problems, problems


RUN_PYTHON = """
import ast, asyncio, sys
code = compile(sys.argv[1], sys.argv[2], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
result = eval(code, {"__name__": "__main__"})
if asyncio.iscoroutine(result):
    asyncio.run(result)
"""


# --- tool examples ---------------------------------------------------------------------------------

SPAN = re.compile(r"`([a-z_]+) (\{[^`]*\})`")
TABLE_ROW = re.compile(r"^\| `([a-z_]+)`")
JSON_SPAN = re.compile(r"`(\{[^`]*\})`")


def tool_examples(path: Path, tools: set[str]) -> list[tuple[int, str, dict[str, Any]]]:
    """`(line, tool, arguments)` in document order: `tool {json}` spans anywhere, and the JSON
    spans of a table row whose first cell names a tool."""
    found: list[tuple[int, str, dict[str, Any]]] = []
    in_code = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        row = TABLE_ROW.match(line)
        if row and row.group(1) in tools:
            found += [(number, row.group(1), json.loads(span)) for span in JSON_SPAN.findall(line)]
            continue
        found += [(number, name, json.loads(args)) for name, args in SPAN.findall(line) if name in tools]
    return found
