"""The built wheel runs on its own: uv installs it with its declared dependencies into a new virtualenv
in a temporary folder (from the dependency wheels alone, ``tests/packaging/wheelhouse.py``), and its
``maya-tools`` runs the demo, the reference backend, and a server the MCP Inspector's CLI lists with
``--strict`` (the Inspector as ``tests/conformance/test_inspector.py`` runs it). Each command starts in
a temporary folder with a new user's environment, so nothing of the checkout is on its path."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import anyio
import httpx2
import pytest

from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.conformance.suite import tool
from tests.conformance.test_inspector import ISSUE, NULLABLE_TYPE, SNAPSHOT, SUMMARY
from tests.maya_tools.live import free_port, wait_until
from tests.packaging.build import PACKAGES, REPO, clean_env

VERSION = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
RUN_TIMEOUT = 120.0


def run(venv: Path, tmp: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / argv[0]), *argv[1:]],
        cwd=tmp,
        env=clean_env(tmp / "home"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


def test_the_packages_import_from_the_new_virtualenv_and_not_the_checkout(venv: Path, tmp_path: Path) -> None:
    code = f"import sys, {', '.join(PACKAGES)}; print(sys.path); " + "; ".join(
        f"print({module}.__file__)" for module in PACKAGES
    )
    done = run(venv, tmp_path, "python", "-c", code)
    assert done.returncode == 0, done.stderr
    path, *files = done.stdout.splitlines()
    site = venv.resolve() / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    assert [Path(f).resolve().parent.parent for f in files] == [site] * len(PACKAGES)
    assert str(REPO) not in path
    assert run(venv, tmp_path, "maya-tools", "--version").stdout == f"maya-tools {VERSION}\n"


def test_the_demo_runs_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    done = run(venv, tmp_path, "maya-tools", "demo")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count(": executed") == 4  # as tests/maya_tools/test_demo.py: four approvals (the last a tier plan), once each


def test_the_reference_backend_runs_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "backend.log"
    with log.open("wb") as stderr:
        backend = subprocess.Popen(
            [str(venv / "bin" / "maya-tools"), "reference-backend", "--port", str(port)],
            cwd=tmp_path,
            env=clean_env(tmp_path / "home"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:

        def answers() -> bool:
            assert backend.poll() is None, log.read_text()
            try:
                return httpx2.get(f"http://127.0.0.1:{port}/v1/public/clusters", timeout=1.0).status_code > 0
            except httpx2.TransportError:
                return False

        wait_until(answers, f"the wheel's reference backend on {port}")
        listed = httpx2.get(
            f"http://127.0.0.1:{port}/v1/public/clusters", headers={"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
        )
        assert listed.status_code == 200, listed.text
        assert "payments-prod" in listed.text
    finally:
        backend.send_signal(signal.SIGTERM)
        status = backend.wait(timeout=15)
    assert status in {0, -signal.SIGTERM} and "Traceback" not in log.read_text(), log.read_text()


@pytest.mark.anyio
async def test_serve_from_the_wheel_passes_the_inspector_strict_tools_list(venv: Path, tmp_path: Path) -> None:
    """The Inspector starts the server itself, with its own small environment: no PYTHONPATH, the
    virtualenv's console script, a card store in the test's folder."""
    home = tmp_path / "home"
    home.mkdir()
    argv = [
        *tool("mcp-inspector"),
        "--cli",
        "-e",
        f"MAYA_CARD_STORE={tmp_path / 'cards.sqlite3'}",
        "--strict",
        "--method",
        "tools/list",
        str(venv / "bin" / "maya-tools"),
        "serve",
    ]
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "NO_COLOR": "1", "MCP_INSPECTOR_SECRET_STORE": "memory"}
    with anyio.fail_after(RUN_TIMEOUT):
        done = await anyio.run_process(argv, check=False, env=env, cwd=tmp_path)
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, f"exit {done.returncode}\n{out[-2000:]}\n{err[-3000:]}"
    summary = SUMMARY.search(err)
    assert summary is not None and summary.group(1) == "0", err[-3000:]
    assert len(ISSUE.findall(err)) == int(summary.group(2)) == len(NULLABLE_TYPE.findall(err)), err[-3000:]
    listed = json.loads(out)
    snapshot = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert sorted(t["name"] for t in listed["tools"]) == sorted(t["name"] for t in snapshot if t["name"] != "decide_card")
