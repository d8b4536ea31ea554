"""The Claude Desktop bundle (MCPB) and the registry metadata, kept in step with the package.

    .venv/bin/python -m scripts.mcpb sync [--check]
        Write the package's version (pyproject.toml, the one place it is set) into manifest.json and
        server.json, and the server's tools, as a client without the MCP Apps extension lists them,
        into manifest.json's ``tools``. ``--check`` changes nothing and exits 1 if a file is behind.

    .venv/bin/python -m scripts.mcpb pack [--wheel WHEEL] [--out FILE] [--mcpb CLI]
        Make ``dist/maya-tools-<version>.mcpb``: the committed manifest.json, the wheel (built with
        ``python -m build`` unless given), a pyproject.toml that depends on that wheel (MCPB's ``uv``
        server type installs what it declares) and the entry point ``server/main.py``; checked with
        ``mcpb validate`` and packed with ``mcpb pack``, the CLI pinned in packaging/package-lock.json.

The bundle's ``mcp_config`` runs ``uv tool run --from <the wheel in the bundle> maya-tools serve``: the
same as ``uvx`` from the wheel, so uv installs the wheel's dependencies for the user's own platform and
Python on the first start, and nothing of the checkout is needed.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MANIFEST = REPO / "manifest.json"
SERVER_JSON = REPO / "server.json"
PACKAGING = REPO / "packaging"
WHEEL_NAME = re.compile(r"maya_tools-[^/\\]+-py3-none-any\.whl")
ENTRY_POINT = PACKAGING / "bundle" / "server" / "main.py"

BUNDLE_PYPROJECT = """\
# Written by scripts/mcpb.py: what MCPB's uv server type installs. The maya-tools wheel is in this bundle.
[project]
name = "maya-tools-bundle"
version = "{version}"
description = "The maya-tools MCP server, as a Claude Desktop bundle"
requires-python = "{requires_python}"
dependencies = ["maya-tools=={version}"]

[tool.uv]
package = false

[tool.uv.sources]
maya-tools = {{ path = "{wheel}" }}
"""


def project() -> dict[str, Any]:
    """pyproject.toml's ``[project]`` table."""
    table: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return table


def first_sentence(text: str) -> str:
    """A tool description's first sentence: what a bundle listing shows beside the tool's name."""
    line = " ".join(text.split())
    end = line.find(". ")
    return line if end < 0 else line[: end + 1]


async def listed_tools() -> list[dict[str, str]]:
    """The tools a client lists that declares no MCP Apps extension (so not the card view's ``decide_card``)."""
    from mcp import Client

    from maya_tools.server import build_server
    from maya_tools.settings import Settings

    logging.disable(logging.INFO)  # the embedded backend's start line: this lists, it serves no one
    server = build_server(Settings(card_store=":memory:"))
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
    return [{"name": t.name, "description": first_sentence(t.description or "")} for t in tools]


def synced(
    manifest: dict[str, Any], server: dict[str, Any], tools: list[dict[str, str]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``manifest`` and ``server`` with the package's version and the server's tools."""
    version = project()["version"]
    packages = [{**p, "version": version} if "version" in p else p for p in server.get("packages", [])]
    config = manifest["server"]["mcp_config"]
    args = [WHEEL_NAME.sub(f"maya_tools-{version}-py3-none-any.whl", arg) for arg in config["args"]]
    runs = {**manifest["server"], "mcp_config": {**config, "args": args}}
    return (
        {**manifest, "version": version, "server": runs, "tools": tools},
        {**server, "version": version, "packages": packages},
    )


def dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def sync(check: bool) -> int:
    import anyio

    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    server = json.loads(SERVER_JSON.read_text(encoding="utf-8"))
    new_manifest, new_server = synced(manifest, server, anyio.run(listed_tools))
    written = {MANIFEST: dump(new_manifest), SERVER_JSON: dump(new_server)}
    behind = [path for path, text in written.items() if path.read_text(encoding="utf-8") != text]
    if check:
        for path in behind:
            sys.stderr.write(f"{path.name} is behind the package (version or tools): run python -m scripts.mcpb sync\n")
        return 1 if behind else 0
    for path in behind:
        path.write_text(written[path], encoding="utf-8")
        sys.stdout.write(f"updated {path.name}\n")
    return 0


def build_wheel(out: Path) -> Path:
    """The wheel ``python -m build`` makes of the checkout (through its sdist), in ``out``."""
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)], check=True)
    version = project()["version"]
    return out / f"maya_tools-{version}-py3-none-any.whl"


def mcpb_cli() -> Path:
    """``mcpb`` from packaging/'s lockfile (``npm ci`` there when it is not installed yet)."""
    cli = PACKAGING / "node_modules" / ".bin" / "mcpb"
    if not cli.is_file():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=PACKAGING, check=True)
    return cli


def stage(wheel: Path, folder: Path) -> Path:
    """The bundle's files in ``folder``: manifest, wheel, the pyproject.toml that installs it, the entry point."""
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    version = project()["version"]
    if manifest["version"] != version or f"-{version}-" not in wheel.name:
        raise SystemExit(f"manifest.json ({manifest['version']}) or {wheel.name} is not version {version}")
    folder.mkdir(parents=True)
    shutil.copy(MANIFEST, folder / "manifest.json")
    shutil.copy(wheel, folder / wheel.name)
    (folder / "server").mkdir()
    shutil.copy(ENTRY_POINT, folder / "server" / "main.py")
    text = BUNDLE_PYPROJECT.format(version=version, requires_python=project()["requires-python"], wheel=wheel.name)
    (folder / "pyproject.toml").write_text(text, encoding="utf-8")
    return folder


def pack(wheel: Path | None, out: Path | None, cli: Path | None) -> int:
    version = project()["version"]
    out = out or REPO / "dist" / f"maya-tools-{version}.mcpb"
    out.parent.mkdir(parents=True, exist_ok=True)
    mcpb = cli or mcpb_cli()
    with tempfile.TemporaryDirectory(prefix="maya-mcpb-") as tmp:
        wheel = wheel or build_wheel(Path(tmp) / "dist")
        staged = stage(wheel, Path(tmp) / "bundle")
        subprocess.run([str(mcpb), "validate", str(staged / "manifest.json")], check=True)
        subprocess.run([str(mcpb), "pack", str(staged), str(out)], check=True)
    sys.stdout.write(f"{out} ({out.stat().st_size:,} bytes)\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.mcpb", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    sync_parser = commands.add_parser("sync", help="write the package's version and tools into the metadata")
    sync_parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file is behind")
    pack_parser = commands.add_parser("pack", help="make the .mcpb bundle")
    pack_parser.add_argument("--wheel", type=Path, help="the wheel to bundle (default: build one)")
    pack_parser.add_argument("--out", type=Path, help="the bundle file (default: dist/maya-tools-<version>.mcpb)")
    pack_parser.add_argument("--mcpb", type=Path, help="the mcpb CLI (default: packaging/'s, installed by npm ci)")
    args = parser.parse_args(argv)
    if args.command == "sync":
        return sync(args.check)
    return pack(args.wheel, args.out, args.mcpb)


if __name__ == "__main__":
    raise SystemExit(main())
