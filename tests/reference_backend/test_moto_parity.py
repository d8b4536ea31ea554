"""docs/reference-backend.md's table of the rule kinds each emulator enforces is what the same requests got
from the reference backend and from moto's EKS node groups in server mode, run here (benchmarks/rule_kinds.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import reference_backend
from benchmarks.rule_kinds import HEADER, moto_eks, observe, table

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference-backend.md"


def documented_table() -> list[str]:
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index(HEADER[0])
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


@pytest.mark.loopback_only  # boto3 and both servers stay on this machine
def test_the_rule_kind_table_is_what_both_emulators_answered() -> None:
    """The same requests (R-OP-01, R-PATCH-04, R-DEL-01, R-CREDIT-01, R-NODE-03, R-NODE-04) against both,
    each on a fresh world; the reference backend enforces every kind, and the docs show both as observed."""
    with reference_backend.running() as door, moto_eks() as eks:
        observed = observe(door, eks)
    assert all(o.reference.enforced for o in observed), [o.row() for o in observed]
    assert documented_table() == table(observed), "update docs/reference-backend.md's table: `.venv/bin/python benchmarks/moto_compare.py` prints it"
