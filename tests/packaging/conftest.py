"""The run's build of maya-tools (sdist and wheel), the wheels of its dependencies and a fresh virtualenv
with the wheel installed, each made once for all the workers (``tests/packaging/build.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.packaging.build import Dist, build, dependency_wheels, fresh_venv, run_root


@pytest.fixture(scope="session")
def packaging_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_root(tmp_path_factory)


@pytest.fixture(scope="session")
def dist(packaging_root: Path) -> Dist:
    return build(packaging_root)


@pytest.fixture(scope="session")
def wheels(packaging_root: Path) -> Path:
    return dependency_wheels(packaging_root)


@pytest.fixture(scope="session")
def venv(packaging_root: Path, dist: Dist, wheels: Path) -> Path:
    return fresh_venv(packaging_root, dist, wheels)
