"""``tests/reachable.py``: a folder another user can read, even when the temporary folder is private."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.reachable import folder_for_another_user, reachable_by_others


def test_a_folder_for_another_user_is_readable_by_nobody_when_the_temporary_folder_is_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private = tmp_path / "private"  # as a clone under `mktemp -d` or /root: 0700
    private.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "setpriv (Debian's util-linux) runs a command as another user"
    folder = folder_for_another_user("maya-reach-")
    try:
        (folder / "note").write_text("readable\n")
        read = subprocess.run(
            [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "cat", str(folder / "note")],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert (read.returncode, read.stdout) == (0, "readable\n"), read.stderr
        assert not reachable_by_others(private) and reachable_by_others(folder)
    finally:
        shutil.rmtree(folder)
