"""Benchmark: the whole test suite's time, as CI runs it (`pytest -q -n auto`), several times.

Each run is in a new ``git worktree`` of HEAD, so the tests start, as in a clean checkout, with no
cache of their rewritten modules and no pytest cache; it uses this virtualenv, whose editable install
serves the packages to the processes the tests start (``maya-tools serve``). Printed for each run: the
wall time, and the machine's busy and idle CPU seconds over it (from /proc/stat, all cores), then the
fastest, the median and the slowest. The CPU figures tell a slower machine (more busy seconds for the
same work) from a run that waited (more idle seconds); so does the speed probe printed before each
run, the CPU seconds of one fixed piece of pure-Python work (0.35–0.37 s on this 2-core machine when
measured; more when the machine is slower). Figures only; nothing is asserted.
Run: .venv/bin/python benchmarks/suite_time.py [--runs N] [--workers auto|N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cpu_seconds() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    tick = 100.0  # USER_HZ
    return (user + nice + system + irq + softirq + steal) / tick, (idle + iowait) / tick


def speed_probe() -> float:
    """CPU seconds of a fixed piece of pure-Python work: arithmetic, JSON and hashing, as the tests do."""
    started = time.process_time()
    total = 0
    for i in range(3_000_000):
        total += i * i % 7
    doc = {f"k{i}": list(range(10)) for i in range(20_000)}
    for _ in range(5):
        json.loads(json.dumps(doc))
    for i in range(200_000):
        hashlib.sha256(b"%d" % i).digest()
    return time.process_time() - started


def one_run(workers: str) -> tuple[float, float, float, str]:
    with tempfile.TemporaryDirectory(prefix="maya-suite-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(tree), "HEAD"], check=True)
        try:
            busy0, idle0 = cpu_seconds()
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-n", workers, "-p", "no:cacheprovider"],
                cwd=tree,
                capture_output=True,
                text=True,
                check=False,
            )
            wall = time.monotonic() - started
            busy1, idle1 = cpu_seconds()
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else f"exit {done.returncode}"
    return wall, busy1 - busy0, idle1 - idle0, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", default="auto", help="pytest-xdist's -n (default: auto)")
    args = parser.parse_args()
    walls = []
    for i in range(args.runs):
        probe = speed_probe()
        wall, busy, idle, last = one_run(args.workers)
        walls.append(wall)
        print(
            f"run {i + 1}: speed probe {probe:.2f} s; {wall:5.1f} s wall, {busy:5.1f} s busy CPU, "
            f"{idle:5.1f} s idle CPU — {last}",
            flush=True,
        )
    print(
        f"-n {args.workers}, {args.runs} runs: fastest {min(walls):.1f} s, median {statistics.median(walls):.1f} s, "
        f"slowest {max(walls):.1f} s"
    )


if __name__ == "__main__":
    main()
