"""The npm tools of ``tests/conformance/package.json`` (the MCP conformance suite and the Inspector,
exact versions, with the Node.js they run on) and a real ``maya-tools serve`` to point them at.

Both tools need a newer Node.js than Debian's (the suite's bundle imports ``fs.globSync``, Node 22;
the Inspector says ``node >=22.19.0``), so the folder pins the npm ``node`` package, a Node.js 22
binary, and the tools run on it whatever ``node`` the machine has.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.live import Proc, base_env, free_port
from tests.node import node_modules

FOLDER = Path(__file__).resolve().parent
TOKEN = DEMO_ADMIN_TOKEN
"""The demo seed's Door token: what the HTTP server wants as ``Authorization: Bearer``."""


def tool(name: str) -> list[str]:
    """The argv prefix that runs the npm binary ``name`` of the folder on its pinned Node.js."""
    modules = node_modules(FOLDER)
    return [str(modules / "node" / "bin" / "node"), str(modules / ".bin" / name)]


def server_env(tmp: Path) -> dict[str, str]:
    """The embedded reference backend (demo seed), its cards in ``tmp``."""
    return base_env() | {"MAYA_CARD_STORE": str(tmp / "cards.sqlite3"), "MAYA_REFERENCE_TIME_SCALE": "100"}


@contextmanager
def http_server(tmp: Path) -> Iterator[int]:
    """A real ``maya-tools serve --transport streamable-http`` on a free loopback port; yields the port."""
    port = free_port()
    server = Proc(["serve", "--transport", "streamable-http", "--port", str(port)], port, server_env(tmp))
    try:
        yield port
    finally:
        server.stop()
