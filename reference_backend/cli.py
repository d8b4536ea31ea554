"""``maya-tools reference-backend``: serve the reference backend with uvicorn (``snapshot save|restore``:
``snapshot_cli``).

Prints its URL and the demo tokens (never the admin token) and stops cleanly on Ctrl-C or SIGTERM,
which uvicorn turns into a graceful shutdown; the state file is closed on the way out.
"""

from __future__ import annotations

import argparse
import logging
import math
import signal
import sqlite3
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

import uvicorn

from reference_backend import seed as seeds
from reference_backend import snapshots
from reference_backend.app import create_app
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import Clock, ManualClock, ScaledClock

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8642
# A scale beyond this would overflow the simulated calendar within hours of real time.
MAX_TIME_SCALE = 1_000_000.0


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, got {port}")
    return port


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="maya-tools reference-backend", description="Run the Door DKS node-pool API reference backend."
    )
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=_port, default=DEFAULT_PORT)
    parser.add_argument("--state", type=Path, default=None, metavar="FILE", help="SQLite state file (default: memory)")
    parser.add_argument("--seed", choices=("demo", "empty"), default="demo")
    parser.add_argument(
        "--from-snapshot",
        type=Path,
        default=None,
        metavar="FILE",
        help="start from a snapshot (`snapshot save`) instead of the seed; with --state it replaces the file's world",
    )
    clocks = parser.add_mutually_exclusive_group()
    clocks.add_argument("--time-scale", type=float, default=1.0, metavar="X", help="simulated seconds per real second")
    clocks.add_argument("--manual-clock", action="store_true", help="time moves only through the admin plane")
    parser.add_argument("--admin-token", default=None, metavar="TOKEN", help="enable the /_reference admin plane")
    return parser


def main(argv: Sequence[str]) -> int:
    """Serve until interrupted; 0 on a clean shutdown, 2 on bad arguments. ``snapshot save|restore``
    talks to a running backend instead (``snapshot_cli``)."""
    if list(argv[:1]) == ["snapshot"]:
        from reference_backend.snapshot_cli import main as snapshot_main

        return snapshot_main(argv[1:])
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if not (math.isfinite(args.time_scale) and 0 < args.time_scale <= MAX_TIME_SCALE):
        print(
            f"maya-tools reference-backend: --time-scale must be a number in (0, {MAX_TIME_SCALE:g}]", file=sys.stderr
        )
        return 2
    clock: Clock = ManualClock() if args.manual_clock else ScaledClock(args.time_scale)
    snapshot = None
    if args.from_snapshot is not None:
        try:
            snapshot = snapshots.parse(args.from_snapshot.read_bytes())
        except (OSError, snapshots.SnapshotError) as error:
            print(f"maya-tools reference-backend: cannot start from {args.from_snapshot}: {error}", file=sys.stderr)
            return 2
    try:
        backend = ReferenceBackend(clock, seed=args.seed, state_path=args.state, snapshot=snapshot)
    except (OSError, sqlite3.Error, ValueError, KeyError, TypeError) as error:
        # A directory, an unwritable path, or a file that is not (or not our) SQLite state.
        print(f"maya-tools reference-backend: cannot use --state {args.state}: {error}", file=sys.stderr)
        return 2
    try:
        app = create_app(backend, admin_token=args.admin_token)
        url = f"http://{args.host}:{args.port}"
        print(f"Door reference backend on {url}/v1/public (OpenAPI: {url}/openapi.json)")
        if snapshot is not None:
            print(f"  world: the snapshot {args.from_snapshot} (its tokens), at {backend.now().isoformat()}")
        elif args.seed == "demo":
            for token, (user, organisation, role) in seeds.DEMO_TOKENS.items():
                print(f"  token {token}: {user}, {role} of {organisation}")
        if args.admin_token:
            print(f"  admin plane: {url}/_reference (bearer: the --admin-token you gave)")
        print(
            f"  clock: {'manual' if args.manual_clock else f'x{args.time_scale:g}'}; state: {args.state or 'memory'}",
            flush=True,
        )
        logging.basicConfig(level=logging.INFO)
        # No access log: admin-plane paths carry tokens (PUT /_reference/tokens/{token}).
        config = uvicorn.Config(app, host=args.host, port=args.port, log_level="info", access_log=False)
        _serve(uvicorn.Server(config))
    finally:
        backend.close()
    print("Door reference backend stopped.", flush=True)
    return 0


class _Stopped(Exception):
    """A stop signal arrived; the server has already shut down gracefully."""


def _stopped(signum: int, frame: FrameType | None) -> None:
    raise _Stopped


def _serve(server: uvicorn.Server) -> None:
    """Run until Ctrl-C or SIGTERM and return normally (exit status 0).

    uvicorn shuts down gracefully on those signals, then re-raises the signal against the handler
    that was installed before it; ours turns it into a normal return instead of a killed process.
    """
    if threading.current_thread() is not threading.main_thread():
        server.run()
        return
    previous = {sig: signal.signal(sig, _stopped) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run()
    except _Stopped:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
