"""Wheels of maya-tools' dependencies, made from this virtualenv's own installed files, so that a fresh
virtualenv (pip) or uv can install the built wheel with ``--no-index`` and download nothing.

pip keeps each installed distribution's ``*.dist-info`` (``METADATA``, ``WHEEL`` with its tags,
``RECORD`` listing every file it wrote); a wheel is those files zipped with a fresh ``RECORD``. So each
dependency goes into the new virtualenv exactly as it was installed here, while pip or uv still
resolves maya-tools' declared requirements against them: a dependency the wheel forgot to declare is
missing there, and what needs it fails.

Files a wheel installs outside ``site-packages`` (console scripts, which installers write again from
``entry_points.txt``) and bytecode are left out, and so are the files the installer itself added
(``INSTALLER``, ``REQUESTED``, ``direct_url.json``).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

INSTALLER_FILES = frozenset({"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"})


def requirements_of(project: str) -> list[metadata.Distribution]:
    """The installed distributions ``project`` needs at run time, transitively (its extras' only as asked)."""
    found: dict[str, metadata.Distribution] = {}
    pending: list[tuple[str, frozenset[str]]] = [(project, frozenset())]
    while pending:
        name, extras = pending.pop()
        dist = metadata.distribution(name)
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is not None and not any(
                requirement.marker.evaluate({**default_environment(), "extra": extra}) for extra in extras or {""}
            ):
                continue
            key = canonicalize_name(requirement.name)
            if key not in found:
                found[key] = metadata.distribution(requirement.name)
                pending.append((requirement.name, frozenset(requirement.extras)))
            elif requirement.extras:
                pending.append((requirement.name, frozenset(requirement.extras)))
    return sorted(found.values(), key=lambda d: canonicalize_name(d.metadata["Name"]))


def _tags(wheel_file: str) -> str:
    """The compressed tag set of a ``WHEEL`` file (``cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64``)."""
    tags = [line.split(":", 1)[1].strip() for line in wheel_file.splitlines() if line.startswith("Tag:")]
    parts = [t.split("-") for t in tags]
    return "-".join(".".join(sorted({p[i] for p in parts}, key=[q[i] for q in parts].index)) for i in range(3))


def _files(dist: metadata.Distribution) -> Iterator[tuple[str, Path]]:
    """``(path in the wheel, file on disk)`` for every file of ``dist`` that lives in site-packages."""
    for entry in dist.files or []:
        name = entry.as_posix()
        if name.startswith("..") or "__pycache__" in entry.parts or name.endswith(".pyc"):
            continue
        if entry.parent.name.endswith(".dist-info") and entry.name in INSTALLER_FILES:
            continue
        path = Path(str(entry.locate()))
        if path.is_file():
            yield name, path


def _record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def repack(dist: metadata.Distribution, folder: Path) -> Path:
    """``dist`` as it is installed here, as a wheel in ``folder`` (stored, not compressed: it is read once)."""
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"]).lower()
    version = dist.version
    info = f"{name}-{version}.dist-info"
    wheel_text = dist.read_text("WHEEL")
    if wheel_text is None:
        raise RuntimeError(f"{dist.metadata['Name']} has no WHEEL file: it was not installed from a wheel")
    target = folder / f"{name}-{version}-{_tags(wheel_text)}.whl"
    dist_info = next(e.parent.as_posix() for e in dist.files or [] if e.parent.name.endswith(".dist-info"))
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as wheel:
        for arcname, path in _files(dist):
            if arcname.startswith(dist_info + "/"):
                arcname = info + arcname[len(dist_info) :]
            data = path.read_bytes()
            wheel.writestr(arcname, data)
            writer.writerow(_record_line(arcname, data))
        writer.writerow([f"{info}/RECORD", "", ""])
        wheel.writestr(f"{info}/RECORD", record.getvalue())
    return target


def wheelhouse(project: str, folder: Path) -> list[Path]:
    """Wheels of every installed run-time dependency of ``project``, written to ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    return [repack(dist, folder) for dist in requirements_of(project)]
