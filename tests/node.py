"""The npm packages some tests run (a bundler, the MCP conformance suite, an OpenID provider, the MCPB CLI, …), each
folder of them installed from its own committed ``package-lock.json`` by ``npm ci``.

A folder is installed once and again only when its lockfile changes (a stamp in ``node_modules``
keeps the lockfile's sha256), under a file lock, so the xdist workers of one run, and runs side by
side, install it once. Never skipped: without Node.js and npm the tests that need them fail and say
how to install them (``scripts/test.sh`` does it on a fresh machine).
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

INSTALL = "install Debian's nodejs and npm packages (`apt-get install -y nodejs npm`; scripts/test.sh does it)"
STAMP = ".maya-tools-lock-sha256"
INSTALL_TIMEOUT = 600.0


def node() -> str:
    """The ``node`` binary, or a failure saying how to install it."""
    found = shutil.which("node")
    if found is None or shutil.which("npm") is None:
        raise RuntimeError(f"Node.js and npm are not on this machine: {INSTALL}")
    return found


def node_modules(folder: Path) -> Path:
    """``folder``'s ``node_modules``, installed by ``npm ci`` from its lockfile unless it is current."""
    node()
    lock = folder / "package-lock.json"
    if not lock.is_file():
        raise RuntimeError(f"{folder} has no package-lock.json: run `npm install` there and commit the lockfile")
    wanted = hashlib.sha256(lock.read_bytes()).hexdigest()
    modules = folder / "node_modules"
    stamp = modules / STAMP
    key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"maya-tools-npm-{key}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text().strip() == wanted:
            return modules
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"`npm ci` failed in {folder} ({done.returncode}):\n{done.stderr[-2000:]}")
        stamp.write_text(wanted + "\n")
    return modules
