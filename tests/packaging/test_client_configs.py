"""Each client configuration of the README (and docs/), pasted as it is, starts the server: its command and
arguments run as the client would run them, with the built wheel given to ``uvx --from`` (the package is
not on the index yet), and the MCP client lists the tools and reads the clusters.

What a reader fills in is filled in: ``DOOR_API_URL`` with a real reference backend on loopback (no test
reaches Door), the token with the demo seed's, a VS Code ``${input:…}`` as VS Code would ask for it.
uv is configured offline on the dependency wheels (``tests/packaging/wheelhouse.py``).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.docs import DOCS, blocks
from tests.maya_tools.live import Proc, base_env, free_port
from tests.packaging.build import Dist, offline_uv_env

pytestmark = pytest.mark.anyio

CONFIGS = [(b.where, json.loads(b.text)) for path in DOCS for b in blocks(path) if b.lang == "json"]
FILLED_IN = re.compile(r"^(\$\{input:[\w-]+\}|<[^>]+>)$")


@pytest.fixture(scope="module")
def door() -> Iterator[str]:
    port = free_port()
    backend = Proc(["reference-backend", "--port", str(port)], port, base_env())
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        backend.stop()


def as_the_client_runs_it(
    server: dict[str, Any], dist: Dist, env: dict[str, str], door: str, tmp: Path
) -> StdioServerParameters:
    for key, value in server.get("env", {}).items():
        if key == "DOOR_API_URL":
            env[key] = door
        else:
            assert key == "DOOR_TOKEN" and FILLED_IN.match(value), f"{key}={value!r} is not a placeholder"
            env[key] = DEMO_ADMIN_TOKEN
    command = shutil.which(server["command"], path=env["PATH"])
    assert command is not None, f"{server['command']} is not on PATH"
    return StdioServerParameters(command=command, args=["--from", str(dist.wheel), *server["args"]], env=env, cwd=str(tmp))


@pytest.mark.parametrize(("where", "config"), CONFIGS, ids=[where for where, _ in CONFIGS])
async def test_a_client_configuration_from_the_docs_starts_the_server(
    where: str, config: dict[str, Any], dist: Dist, wheels: Path, door: str, tmp_path: Path, packaging_root: Path
) -> None:
    server = (config.get("servers") or config["mcpServers"])["maya-tools"]
    env = offline_uv_env(packaging_root, tmp_path, wheels)
    async with Client(as_the_client_runs_it(server, dist, env, door, tmp_path)) as client:
        assert len((await client.list_tools()).tools) >= 14, where
        clusters = await client.call_tool("list_clusters", {})
        assert clusters.structured_content is not None and not clusters.is_error, where
        assert clusters.structured_content["backend"] == f"Door at {door}", where
