"""What a bare ``maya-tools serve`` on stdio imports before its first tool call (issue 31).

A server an IDE starts for each window answers ``initialize`` and ``tools/list`` first; the chat, the
model client (anthropic), the PostgreSQL driver, JOSE (pyjwt and its cryptography) and the jinja2
templates of cards and pages wait for the call that needs them. Each process here is a real one, run
over stdio by the SDK's client on both protocol generations, and writes the top-level modules it
has loaded when it exits (or is told to stop). What a start adds to an empty ``MCPServer`` with one
tool, run the same way in the same environment, must be exactly ``snapshots/start_imports.json``:
measured against that anchor, the list holds only what this project adds, and a new version of the
SDK or of the standard library does not change it. Regenerate the file with ``MAYA_UPDATE_SNAPSHOTS=1``
(then read the diff: a name that appears is a new import at every start).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.maya_tools.conftest import MODES

pytestmark = pytest.mark.anyio

SNAPSHOT = Path(__file__).parent / "snapshots" / "start_imports.json"

NEVER_AT_START = frozenset({"anthropic", "psycopg", "psycopg_pool", "jwt", "jinja2", "maya_tools.chat"})
"""What issue 31 names as loaded on first use only (``maya_tools.chat`` is checked as a module)."""

DUMP = """
import atexit, os, signal, sys
def dump(*_):
    with open(sys.argv[1], "w") as out:
        json.dump(sorted(sys.modules), out)
import json
atexit.register(dump)
signal.signal(signal.SIGTERM, lambda *_: (dump(), os._exit(0)))  # the SDK's client stops a slow one
"""

SERVE = DUMP + """
from maya_tools.cli import main
raise SystemExit(main(["serve"]))
"""

ANCHOR = DUMP + """
import anyio
from mcp.server.mcpserver import MCPServer
anchor = MCPServer("anchor")
@anchor.tool()
def ping() -> str:
    return "pong"
anyio.run(anchor.run_stdio_async)
"""


async def loaded(code: str, env: dict[str, str], out: Path, mode: str) -> set[str]:
    """The modules a process running ``code`` over stdio had loaded after initialize and tools/list."""
    params = StdioServerParameters(command=sys.executable, args=["-c", code, str(out)], env=env)
    async with Client(params, mode=mode) as client:
        assert (await client.list_tools()).tools
    return set(json.loads(await anyio.Path(out).read_text()))


def top_level(modules: set[str]) -> set[str]:
    return {m.partition(".")[0] for m in modules} - set(sys.stdlib_module_names)


def start_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOOR_", "MAYA_", "ANTHROPIC_"))}
    env.update({"MAYA_CARD_STORE": str(tmp_path / "cards.sqlite3"), **extra})
    return env


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", ["door", "embedded"])
async def test_a_bare_serve_imports_only_what_initialize_and_tools_list_need(
    tmp_path: Path, mode: str, backend: str
) -> None:
    """``door``: pointed at Door (nothing is sent to it before a tool call); ``embedded``: no
    ``DOOR_API_URL``, so the embedded reference backend (FastAPI) starts with the server."""
    extra = {"DOOR_API_URL": "http://127.0.0.1:9", "DOOR_TOKEN": "t"} if backend == "door" else {}
    ours = await loaded(SERVE, start_env(tmp_path, **extra), tmp_path / "ours.json", mode)
    anchor = await loaded(ANCHOR, start_env(tmp_path), tmp_path / "anchor.json", mode)
    assert not NEVER_AT_START & (ours | top_level(ours)), "loaded at start: " + ", ".join(
        sorted(NEVER_AT_START & (ours | top_level(ours)))
    )
    added = sorted(top_level(ours) - top_level(anchor))
    pinned = json.loads(SNAPSHOT.read_text()) if SNAPSHOT.exists() else {}
    if os.environ.get("MAYA_UPDATE_SNAPSHOTS") == "1":
        pinned[backend] = added
        SNAPSHOT.write_text(json.dumps(pinned, indent=2, sort_keys=True) + "\n")
    assert added == pinned.get(backend), (
        f"a bare serve ({backend}) now adds {added} to the SDK's own start; snapshots/start_imports.json "
        f"pins {pinned.get(backend)}. Load what a tool call needs in that call, or update the snapshot."
    )
