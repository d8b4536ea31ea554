"""`maya-tools demo`, the README's first command, runs green end to end."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.docs import INSTALL, demo_command, environment, scratch


def test_the_demo_walks_the_page_examples_and_exits_zero(tmp_path: Path) -> None:
    """The README's demo command as written, after its install (tests/test_docs.py checks that part)."""
    command = demo_command().removeprefix(INSTALL)
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=scratch(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        env=environment(tmp_path),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "embedded reference backend" in out
    # three approvals, each executed once, and two refusals naming their rules
    assert out.count("demo user: APPROVE") == 3
    assert out.count(": executed") == 3
    assert "R-PATCH-04" in out and "R-DEL-01" in out
    assert "pool.update workers: succeeded" in out
    assert "pool.create batch: succeeded" in out
    assert "node.replace payments-prod-workers-abc12: succeeded" in out
    assert "payments-prod-workers-abc12" not in out.split("5. ")[-1].split("snapshot:")[-1]  # replaced and gone
