"""The Claude Desktop bundle: ``python -m scripts.mcpb pack`` validates the committed manifest and packs it
with the pinned MCPB CLI; unpacked into a temporary folder by the same CLI, it starts exactly as its
``mcp_config`` says, with the values a person typed into its ``user_config`` (or none), and lists the
manifest's tools.

The host is played as MCPB describes it: ``${__dirname}`` is the unpacked folder, ``${user_config.KEY}``
the person's value or the option's default (with neither, the literal placeholder, as Claude Desktop
passes it: modelcontextprotocol/mcpb#250), the command is found on ``PATH``. What a real host adds,
uv and a Python, comes from this run: uv's configuration says offline, no index and the dependency
wheels (``tests/packaging/wheelhouse.py``), so the first start installs without the network.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from reference_backend.seed import DEMO_ADMIN_TOKEN
from scripts.mcpb import first_sentence
from tests.maya_tools.conftest import MODES
from tests.maya_tools.live import Proc, base_env, free_port
from tests.node import node_modules
from tests.packaging.build import REPO, Dist, offline_uv_env, once, record_size

pytestmark = pytest.mark.anyio

MANIFEST = json.loads((REPO / "manifest.json").read_text(encoding="utf-8"))
VARIABLE = re.compile(r"\$\{([^}]+)\}")


def mcpb() -> Path:
    return node_modules(REPO / "packaging") / ".bin" / "mcpb"


@pytest.fixture(scope="session")
def bundle(packaging_root: Path, dist: Dist) -> Path:
    with once(packaging_root, "bundle") as (folder, make):
        out = folder / f"maya-tools-{MANIFEST['version']}.mcpb"
        if make:
            pack = [sys.executable, "-m", "scripts.mcpb", "pack", "--wheel", str(dist.wheel), "--out", str(out)]
            done = subprocess.run(
                [*pack, "--mcpb", str(mcpb())],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    record_size(packaging_root, "bundle", out.stat().st_size)
    return out


@pytest.fixture(scope="session")
def unpacked(packaging_root: Path, bundle: Path) -> Path:
    with once(packaging_root, "unpacked") as (folder, make):
        if make:
            target = folder / "maya-tools"  # beside once()'s marker, not with it
            subprocess.run([str(mcpb()), "unpack", str(bundle), str(target)], check=True, capture_output=True, timeout=120)
    return folder / "maya-tools"


@dataclass(frozen=True)
class Host:
    """The unpacked bundle and the values given to its ``user_config``."""

    folder: Path
    values: dict[str, str]

    def substitute(self, text: str) -> str:
        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name == "__dirname":
                return str(self.folder)
            if name.startswith("user_config."):
                key = name.removeprefix("user_config.")
                return self.values.get(key, MANIFEST["user_config"][key].get("default", match.group(0)))
            raise AssertionError(f"the manifest uses ${{{name}}}, which this host does not substitute")

        return VARIABLE.sub(value, text)

    def server(self, env: dict[str, str], tmp: Path) -> StdioServerParameters:
        config = MANIFEST["server"]["mcp_config"]
        env = env | {key: self.substitute(value) for key, value in config.get("env", {}).items()}
        command = shutil.which(self.substitute(config["command"]), path=env["PATH"])
        assert command is not None, f"{config['command']} is not on the host's PATH"
        return StdioServerParameters(
            command=command, args=[self.substitute(a) for a in config["args"]], env=env, cwd=str(tmp)
        )


def test_the_bundle_holds_the_manifest_the_wheel_its_pyproject_and_the_entry_point(unpacked: Path, dist: Dist) -> None:
    files = sorted(p.relative_to(unpacked).as_posix() for p in unpacked.rglob("*") if p.is_file())
    assert files == sorted(["manifest.json", "pyproject.toml", "server/main.py", dist.wheel.name])
    assert json.loads((unpacked / "manifest.json").read_text()) == MANIFEST
    assert (unpacked / dist.wheel.name).read_bytes() == dist.wheel.read_bytes()
    assert MANIFEST["server"]["entry_point"] == "server/main.py"
    project = tomllib.loads((unpacked / "pyproject.toml").read_text())
    version = MANIFEST["version"]
    assert project["project"]["dependencies"] == [f"maya-tools=={version}"]
    assert project["tool"]["uv"]["sources"]["maya-tools"] == {"path": dist.wheel.name}


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real reference backend over HTTP: the Door the person names in the bundle's settings."""
    port = free_port()
    backend = Proc(["reference-backend", "--port", str(port)], port, base_env())
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        backend.stop()


@pytest.mark.parametrize("mode", MODES)
async def test_the_unpacked_bundle_starts_as_its_mcp_config_says_with_the_door_the_person_gave(
    unpacked: Path, wheels: Path, door: str, tmp_path: Path, packaging_root: Path, mode: str
) -> None:
    host = Host(unpacked, {"door_api_url": door, "door_token": DEMO_ADMIN_TOKEN})
    env = offline_uv_env(packaging_root, tmp_path, wheels)
    async with Client(host.server(env, tmp_path), mode=mode) as client:
        listed = (await client.list_tools()).tools
        assert [{"name": t.name, "description": first_sentence(t.description or "")} for t in listed] == MANIFEST["tools"]
        clusters = await client.call_tool("list_clusters", {})
        assert clusters.structured_content is not None and not clusters.is_error
        assert clusters.structured_content["backend"] == f"Door at {door}", clusters.structured_content


async def test_the_bundle_left_unconfigured_tries_the_embedded_reference_backend(
    unpacked: Path, wheels: Path, tmp_path: Path, packaging_root: Path
) -> None:
    """Both settings left empty: their defaults (""), which the server reads as unset."""
    env = offline_uv_env(packaging_root, tmp_path, wheels)
    async with Client(Host(unpacked, {}).server(env, tmp_path)) as client:
        clusters = await client.call_tool("list_clusters", {})
        assert clusters.structured_content is not None
        assert "embedded reference backend" in clusters.structured_content["backend"]

