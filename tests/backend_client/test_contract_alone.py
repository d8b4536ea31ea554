"""The contract (``backend_client.models``, ``backend_client.rules``) imports without the HTTP client."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import {modules}
loaded = sorted(m for m in sys.modules if m == "httpx2" or m.startswith(("httpx2.", "backend_client.client", "backend_client.errors")))
print(",".join(loaded))
"""


def loaded_by(*modules: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(modules=", ".join(modules))], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_contract_imports_without_the_client_or_httpx2() -> None:
    assert loaded_by("backend_client.models", "backend_client.rules") == ""


def test_the_reference_backend_loads_the_contract_alone() -> None:
    assert loaded_by("reference_backend.app", "reference_backend.cli") == ""
