"""What the packaging tests share, made once per test run and reused by every xdist worker: the sdist and
the wheel ``python -m build`` makes, the wheels of the dependencies (``wheelhouse``), a fresh virtualenv
with the wheel installed, and the sizes measured on the way (printed at the end of the run).

Nothing here downloads anything. ``python -m build --no-isolation`` builds with this virtualenv's
setuptools (a dev dependency) instead of fetching one into an isolated environment; the wheel is built
from the sdist, as ``python -m build`` does, in a copy of the checkout, so the checkout gets no
``build/`` or ``*.egg-info`` of the build's. Installs read only ``wheelhouse``'s folder (``--no-index``).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.packaging.wheelhouse import wheelhouse

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("backend_client", "reference_backend", "confirmation_cards", "prompts", "maya_tools")
"""The five packages the wheel holds (pyproject.toml's ``packages.find``)."""
SIZES = "packaging-sizes.json"
BUILD_TIMEOUT = 300.0
NOT_COPIED = shutil.ignore_patterns(".*", "node_modules", "__pycache__", "*.egg-info", "build", "dist", "*.sqlite3")


def run_root(factory: pytest.TempPathFactory) -> Path:
    """The run's own temporary folder, the same for the xdist controller and all its workers."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def once(root: Path, name: str) -> Iterator[tuple[Path, bool]]:
    """``root/name`` and whether it still has to be made; one process of the run makes it, the others wait."""
    folder = root / name
    with open(root / f"{name}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        done = folder / ".done"
        if done.is_file():
            yield folder, False
            return
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        yield folder, True
        done.touch()


def record_size(root: Path, name: str, value: int) -> None:
    """Keep a measured size for the run's summary (``tests/conftest.py`` prints them)."""
    with open(root / f"{SIZES}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        path = root / SIZES
        sizes = json.loads(path.read_text()) if path.is_file() else {}
        sizes[name] = value
        path.write_text(json.dumps(sizes, indent=1))


def clean_env(home: Path, *extra_path: Path) -> dict[str, str]:
    """An environment like a new user's: a private home, no virtualenv, no pip or uv settings, no Door or
    Maya settings, and on ``PATH`` only ``extra_path`` and the system's folders."""
    home.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join([*map(str, extra_path), "/usr/local/bin", "/usr/bin", "/bin"])
    kept = {k: v for k, v in os.environ.items() if k in {"LANG", "LC_ALL", "TZ", "TMPDIR", "SSL_CERT_FILE"}}
    return kept | {"HOME": str(home), "PATH": path, "XDG_STATE_HOME": str(home / "state"), "PIP_CONFIG_FILE": os.devnull}


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path

    def wheel_files(self) -> list[zipfile.ZipInfo]:
        with zipfile.ZipFile(self.wheel) as wheel:
            return wheel.infolist()


def build(root: Path) -> Dist:
    """The sdist and the wheel of the checkout, built by ``python -m build`` once per run."""
    with once(root, "dist") as (folder, make):
        if make:
            source = folder / "source"
            shutil.copytree(REPO, source, ignore=NOT_COPIED, symlinks=True)
            done = subprocess.run(
                [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(folder), str(source)],
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT,
                check=False,
            )
            assert done.returncode == 0, f"python -m build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            shutil.rmtree(source)
        (wheel,) = folder.glob("*.whl")
        (sdist,) = folder.glob("*.tar.gz")
    built = Dist(wheel, sdist)
    record_size(root, "wheel", wheel.stat().st_size)
    record_size(root, "wheel unpacked", sum(i.file_size for i in built.wheel_files()))
    record_size(root, "sdist", sdist.stat().st_size)
    return built


def dependency_wheels(root: Path) -> Path:
    """A folder of wheels of maya-tools' run-time dependencies, as they are installed here."""
    with once(root, "wheelhouse") as (folder, make):
        if make:
            wheelhouse("maya-tools", folder)
    return folder


def uv() -> Path:
    """The ``uv`` binary of the ``uv`` package (a dev dependency); ``uvx`` is beside it."""
    from uv import find_uv_bin

    return Path(find_uv_bin())


def fresh_venv(root: Path, dist: Dist, wheels: Path) -> Path:
    """A new virtualenv (``python -m venv``, no system site-packages) with the wheel installed from
    ``wheels`` alone. uv installs it: pip takes three times its CPU for the same install (13.5 s
    against 4.5 s measured here), and ``pip install`` of the same wheel differs in nothing tested here."""
    with once(root, "venv") as (folder, make):
        if make:
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
            install = [str(uv()), "pip", "install", "--quiet", "--python", str(folder / "bin" / "python"), "--offline"]
            done = subprocess.run(
                [*install, "--no-index", "--find-links", str(wheels), "--compile-bytecode", str(dist.wheel)],
                env=clean_env(root / "uv-home") | {"UV_CACHE_DIR": str(root / "uv-venv-cache"), "UV_NO_CONFIG": "1"},
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT,
                check=False,
            )
            assert done.returncode == 0, f"installing the wheel failed:\n{done.stderr[-3000:]}"
    return folder


def offline_uv_env(root: Path, tmp: Path, wheels: Path) -> dict[str, str]:
    """A new user's environment with uv on ``PATH``, configured as a host's uv would be but offline: no
    index, the dependency wheels, no Python download (this run's Python). The run's tests share one uv
    cache, as the starts of one host would."""
    config = tmp / "uv.toml"
    config.write_text(f'offline = true\nno-index = true\nfind-links = ["{wheels}"]\npython-downloads = "never"\n')
    return clean_env(tmp / "home", uv().parent) | {
        "UV_CONFIG_FILE": str(config),
        "UV_CACHE_DIR": str(root / "uv-cache"),
        "UV_PYTHON": sys.executable,
    }
