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
    # four approvals (the last a plan of three steps), each executed once, and two refusals naming their rules
    assert out.count("demo user: APPROVE") == 4
    assert out.count(": executed") == 4
    assert "R-PATCH-04" in out and "R-DEL-01" in out
    assert "pool.update workers: succeeded" in out
    assert "pool.create batch: succeeded" in out
    assert "node.replace payments-prod-workers-abc12: succeeded" in out
    assert "payments-prod-workers-abc12" not in out.split("5. ")[-1].split("snapshot:")[-1]  # replaced and gone
    # the page's tier change (add the new pool, wait until it is up, delete the old) as one approved plan
    tier = out.split("6. ")[-1]
    assert "Plan of 3 steps, one approval" in tier
    for step in (
        "1. Add pool workers-c5-2xlarge: done",
        "2. Wait until pool workers-c5-2xlarge",
        "3. Remove pool workers: done",
    ):
        assert step in tier, tier
    assert "pool.delete workers: succeeded" in tier
    last = tier.split("snapshot:")[-1]
    assert "workers-c5-2xlarge" in last and " workers " not in last, "the old pool's workers are gone"
