"""Folders that a process running as another user can reach, wherever the checkout was cloned.

Two kinds of test run something as another user: the test script as ``nobody``
(``tests/test_docs.py``), and, under root, PostgreSQL as ``postgres`` (``tests/postgres.py``). A
clone under ``mktemp -d`` (mode 0700) or ``/root`` is not theirs to read, nor perhaps is the
temporary folder, so what such a process needs is copied or made in a fresh folder here, whose
every parent lets others through.
"""

from __future__ import annotations

import stat
import tempfile
from pathlib import Path

CANDIDATES = ("/tmp", "/var/tmp", "/dev/shm")
"""Where to look, after the temporary folder, for a place other users can reach."""


def reachable_by_others(path: Path) -> bool:
    """Whether a user who is neither the owner nor in the group can pass through every folder from
    the root down to ``path`` (each has the others' execute bit)."""
    path = path.resolve()
    return all(folder.stat().st_mode & stat.S_IXOTH for folder in (path, *path.parents))


def folder_for_another_user(prefix: str) -> Path:
    """A new, empty folder (mode 0755) that any user can reach and read: in the temporary folder when
    other users can reach that, else in the first of ``CANDIDATES`` they can. The caller removes it."""
    for base in (tempfile.gettempdir(), *CANDIDATES):
        if Path(base).is_dir() and reachable_by_others(Path(base)):
            folder = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
            folder.chmod(0o755)
            return folder
    raise RuntimeError(
        f"no temporary folder other users can reach (tried {tempfile.gettempdir()}, {', '.join(CANDIDATES)}); "
        "set TMPDIR to a folder whose parents are all world-executable, such as /tmp"
    )
