"""The registry's ``server.json`` and the bundle's ``manifest.json`` say what the package is and does: its
version (pyproject.toml's, the one place it is set), the settings it reads, and its tools."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from contextlib import redirect_stdout
from typing import Any

import pytest
from jsonschema import Draft7Validator, FormatChecker

from maya_tools.cli import main
from maya_tools.settings import Settings
from tests.packaging.build import REPO

SERVER = json.loads((REPO / "server.json").read_text(encoding="utf-8"))
MANIFEST = json.loads((REPO / "manifest.json").read_text(encoding="utf-8"))
SCHEMA = json.loads((REPO / "packaging" / "server.schema.json").read_text(encoding="utf-8"))
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
SNAPSHOT = REPO / "tests" / "maya_tools" / "snapshots" / "tools.json"
MCP_NAME = re.compile(r"mcp-name: (\S+?)(?=\s|<|-->|$)", re.MULTILINE)
"""The registry's ownership line for a PyPI package: ``mcp-name: <name>`` followed by a boundary
(a newline, whitespace, an HTML tag or a comment's close), docs/modelcontextprotocol-io/package-types.mdx."""


class Reading(Mapping[str, str]):
    """An empty environment that remembers which variables were asked for."""

    def __init__(self) -> None:
        self.asked: set[str] = set()

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return default

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def read_by_the_server() -> set[str]:
    env = Reading()
    Settings.from_env(env)
    return env.asked


def test_server_json_is_valid_against_the_registry_schema_it_names() -> None:
    assert SERVER["$schema"] == SCHEMA["$id"] == "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
    errors = sorted(Draft7Validator(SCHEMA, format_checker=FormatChecker()).iter_errors(SERVER), key=str)
    assert not errors, "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors)


def test_the_schema_copy_is_the_one_its_provenance_names() -> None:
    import hashlib

    said = (REPO / "packaging" / "README.md").read_text(encoding="utf-8")
    digest = hashlib.sha256((REPO / "packaging" / "server.schema.json").read_bytes()).hexdigest()
    assert f"sha256 `{digest}`" in said and SCHEMA["$id"] in said


def test_every_version_is_the_package_version() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--version"]) == 0
    assert out.getvalue() == f"maya-tools {VERSION}\n"
    assert SERVER["version"] == MANIFEST["version"] == VERSION
    assert [p["version"] for p in SERVER["packages"]] == [VERSION]
    assert f"${{__dirname}}/maya_tools-{VERSION}-py3-none-any.whl" in MANIFEST["server"]["mcp_config"]["args"]
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    newest = re.search(r"^## \[([^\]]+)\]", changelog, re.MULTILINE)
    assert newest is not None and newest.group(1) == VERSION, "CHANGELOG.md's newest section is the package version"


def test_the_metadata_files_are_what_the_sync_script_writes() -> None:
    """manifest.json's tools are the server's, as a client without the Apps extension lists them."""
    done = subprocess.run(
        [sys.executable, "-m", "scripts.mcpb", "sync", "--check"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    snapshot = {t["name"] for t in json.loads(SNAPSHOT.read_text(encoding="utf-8"))}
    assert {t["name"] for t in MANIFEST["tools"]} == snapshot - {"decide_card"}
    assert all(t["description"] and len(t["description"]) <= 200 for t in MANIFEST["tools"])


def test_the_registry_entry_is_one_pypi_package_run_with_uvx_on_stdio_and_no_remote() -> None:
    """Each team hosts its own HTTP server (docs/deploy.md): a shared remote entry would send everyone's
    Door token to one place."""
    assert "remotes" not in SERVER
    (package,) = SERVER["packages"]
    assert package["registryType"] == "pypi" and package["identifier"] == "maya-tools"
    assert package["runtimeHint"] == "uvx" and package["transport"] == {"type": "stdio"}
    assert [a.get("value") for a in package["packageArguments"]] == ["serve"]
    assert len(SERVER["description"]) <= 100 and len(MANIFEST["description"]) <= 100


def test_the_settings_named_are_the_ones_the_server_reads_and_the_token_is_secret() -> None:
    read = read_by_the_server()
    (package,) = SERVER["packages"]
    named = {v["name"]: v for v in package["environmentVariables"]}
    assert set(named) == {"DOOR_API_URL", "DOOR_TOKEN", "MAYA_CARD_STORE"} and set(named) <= read
    assert [k for k, v in named.items() if v.get("isSecret")] == ["DOOR_TOKEN"]
    env = MANIFEST["server"]["mcp_config"]["env"]
    assert set(env) <= read
    config = MANIFEST["user_config"]
    assert env == {"DOOR_API_URL": "${user_config.door_api_url}", "DOOR_TOKEN": "${user_config.door_token}"}
    assert config["door_token"]["sensitive"] is True and not config["door_api_url"].get("sensitive")
    # Claude Desktop passes an optional value nobody gave as the literal `${user_config.…}` unless it has a
    # default (modelcontextprotocol/mcpb#250): both default to "", which the server reads as unset.
    assert all(option.get("default") == "" and option["required"] is False for option in config.values())
    assert Settings.from_env({"DOOR_API_URL": "", "DOOR_TOKEN": ""}).door_api_url is None


def test_the_readme_proves_the_pypi_package_is_this_server() -> None:
    names = MCP_NAME.findall((REPO / "README.md").read_text(encoding="utf-8"))
    assert names == [SERVER["name"]]


@pytest.mark.parametrize("line", ["mcp-name: cloud.door/maya-tools.", "mcp-name:cloud.door/maya-tools"])
def test_an_mcp_name_line_glued_to_other_characters_does_not_count(line: str) -> None:
    assert MCP_NAME.findall(line) != ["cloud.door/maya-tools"]


def test_the_docs_name_the_wheel_and_the_bundle_of_this_version() -> None:
    from tests.docs import DOCS

    named = {
        match.group(1) or match.group(2)
        for path in DOCS
        for match in re.finditer(r"maya_tools-(\d[^-/\s`]*)-py3-none-any\.whl|maya-tools-(\d[^/\s`]*?)\.mcpb", path.read_text())
    }
    assert named == {VERSION}
