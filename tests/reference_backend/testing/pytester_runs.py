"""Run an example suite as a user's project would: a fresh folder, its own pytest process, no conftest
of ours and no ``-p`` for our plugin, which must come from the installed package's entry point."""

from __future__ import annotations

import pytest

# The user's project runs whatever plugins its environment has; these two are left out only because
# loading them costs over a second per run (the project's own addopts leave them out too).
FASTER = ("-p", "no:schemathesis", "-p", "no:hypothesispytest")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*FASTER, "-rA", "-q", *args, timeout=120)
