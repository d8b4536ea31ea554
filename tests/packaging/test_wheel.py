"""``python -m build`` makes an sdist and, from it, a wheel of the product alone: every module, template and
static file of the five packages, and nothing else (no eval case files, no tests, no notes)."""

from __future__ import annotations

import tarfile
import tomllib

from tests.packaging.build import PACKAGES, REPO, Dist

VERSION = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
CEILING = 570_000
"""Bytes the wheel may weigh: 586,856 before the eval's case files left it (issue 29), 451,451 after
(1,325,938 unpacked, of 2,538,285): about 200 modules and the card view's JavaScript (61 KB compressed).
Issues 26-28 (policy, review page, webhook, audit log, whole warnings, the connect view) brought it to
about 530,000. The case files back in (about 140 KB compressed) would go over it; the code may still grow."""


def product_files() -> set[str]:
    """The files of the five packages in the checkout (bytecode aside): what the wheel must hold."""
    return {
        path.relative_to(REPO).as_posix()
        for package in PACKAGES
        for path in (REPO / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def test_the_wheel_holds_every_file_of_the_packages_and_nothing_else(dist: Dist) -> None:
    info = f"maya_tools-{VERSION}.dist-info"
    names = {i.filename for i in dist.wheel_files()}
    assert dist.wheel.name == f"maya_tools-{VERSION}-py3-none-any.whl"
    assert {n for n in names if not n.startswith(info + "/")} == product_files()
    assert {f"{info}/{n}" for n in ("METADATA", "WHEEL", "RECORD", "entry_points.txt")} <= names


def test_the_wheel_has_the_card_view_templates_and_type_markers_and_no_development_data(dist: Dist) -> None:
    names = {i.filename for i in dist.wheel_files()}
    assert {f"maya_tools/static/card-view.{ext}" for ext in ("html", "js", "licenses.txt")} <= names
    assert {f"{package}/py.typed" for package in PACKAGES} <= names
    templates = {n for n in names if n.endswith(".j2")}
    assert {n.split("/")[0] for n in templates} == {"confirmation_cards", "maya_tools", "prompts"}
    assert not [n for n in names if "eval_" in n or n.endswith((".md", ".json")) or n.startswith(("tests/", "evals/"))]


def test_the_wheel_weighs_less_than_its_ceiling(dist: Dist) -> None:
    size = dist.wheel.stat().st_size
    unpacked = sum(i.file_size for i in dist.wheel_files())
    assert size < CEILING, f"the wheel weighs {size:,} bytes ({unpacked:,} unpacked), over {CEILING:,}"


def test_the_sdist_builds_the_wheel_and_leaves_out_the_development_folders(dist: Dist) -> None:
    with tarfile.open(dist.sdist) as sdist:
        names = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "README.md", "CHANGELOG.md", "PKG-INFO"} <= names
    assert {n.split("/")[0] for n in names} >= set(PACKAGES)
    assert not [n for n in names if n.startswith(("tests/", "evals/", "web/", "benchmarks/"))]
