"""``uvx --from <the wheel> maya-tools demo``: what a user runs before the package is published (after it:
``uvx maya-tools``). uv is the ``uv`` package from the index (a dev dependency); it makes its own
environment in its cache, with its dependencies from the dependency wheels alone (``--offline
--no-index --find-links``), for the Python of this run (no download of one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.packaging.build import Dist, clean_env, uv


def uvx(tmp: Path, dist: Dist, wheels: Path, *command: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(tmp / "home", uv().parent) | {
        "UV_CACHE_DIR": str(tmp / "uv-cache"),
        "UV_TOOL_DIR": str(tmp / "uv-tools"),
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_CONFIG": "1",
    }
    offline = ["--offline", "--no-index", "--find-links", str(wheels), "--python", sys.executable]
    return subprocess.run(
        [str(uv().with_name("uvx")), *offline, "--from", str(dist.wheel), *command],
        cwd=tmp,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_uvx_from_the_wheel_runs_the_demo_from_uvs_own_environment(dist: Dist, wheels: Path, tmp_path: Path) -> None:
    done = uvx(tmp_path, dist, wheels, "maya-tools", "demo")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count(": executed") == 4  # as tests/maya_tools/test_demo.py
    where = uvx(tmp_path, dist, wheels, "python", "-c", "import maya_tools; print(maya_tools.__file__)")
    assert where.returncode == 0, where.stderr[-3000:]
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / "uv-cache"), where.stdout
