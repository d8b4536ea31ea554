"""Start `maya-tools` server processes for tests without paying the imports each time.

A `maya-tools serve` or `reference-backend` process spends about 0.75 s of CPU importing mcp,
FastAPI and pydantic models before it listens; the suite starts some fifty of them. Here each test
worker keeps one fork server (``multiprocessing``'s ``forkserver``) that has imported the CLI once;
a start forks it and runs the same ``maya_tools.cli.main`` the console script runs, in a new
process with its own pid, environment, arguments, port and log. Signals, ``SIGKILL`` and exit codes
are a real process's. What a forked start cannot show, the console script's own start (its imports,
refusals printed before ``main`` runs, stdio), is shown by the tests that exec it for real
(``tests/test_docs.py``, ``test_transports``' stdio tests, ``test_replica_settings``,
``test_settings_runtime``).

This module imports nothing heavy itself: the fork server unpickles ``_run`` by importing it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path

PRELOAD = [
    "tests.launch",
    "maya_tools.cli",
    "maya_tools.server",
    "reference_backend.app",
    "reference_backend.cli",
    "tests.forkserver_warm",
]
"""What the fork server imports once, so a forked start finds it loaded."""

_context: ForkServerContext | None = None


def _forkserver() -> ForkServerContext:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        assert isinstance(context, ForkServerContext)
        context.set_forkserver_preload(PRELOAD)
        _context = context
    return _context


def _run(argv: list[str], env: dict[str, str], cwd: str, log: str, stdout: bool = False) -> None:
    """In the forked process: become ``maya-tools <argv>`` with ``env``, stderr to ``log``, and stdout
    too with ``stdout`` (else discarded)."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for sig in (signal.SIGINT, signal.SIGTERM):  # as a freshly exec'd process has them
        signal.signal(sig, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDWR)
    err = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(null, 0)
    os.dup2(err if stdout else null, 1)
    os.dup2(err, 2)
    os.close(null)
    os.close(err)
    sys.argv = ["maya-tools", *argv]
    from maya_tools.cli import main

    raise SystemExit(main(argv))


class Launched:
    """A started ``maya-tools`` process: a small part of ``subprocess.Popen``'s interface."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path, *, stdout: bool = False) -> None:
        self.log = log
        self._process: BaseProcess = _forkserver().Process(
            target=_run, args=(argv, env, os.getcwd(), str(log), stdout), name=f"maya-tools {argv[0]}", daemon=False
        )
        self._process.start()
        assert self._process.pid is not None
        self.pid: int = self._process.pid

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int | None:
        self._process.join(timeout)
        return self._process.exitcode

    def send_signal(self, sig: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def launch(argv: list[str], env: dict[str, str], log: Path, *, stdout: bool = False) -> Launched:
    """Start ``maya-tools <argv>`` as its own process, forked from this worker's preloaded fork server;
    its stderr, and with ``stdout`` its standard output too, go to ``log``."""
    return Launched(argv, env, log, stdout=stdout)
