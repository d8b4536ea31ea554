"""``maya-tools reference-backend snapshot save|restore``: a running backend's world to a file and back.

Both go through the admin plane (``GET``/``PUT /_reference/snapshot``), so the backend must run with
``--admin-token``. ``save`` writes the file whole or not at all (a temporary file renamed); ``restore``
checks the file before it sends it. The admin token is sent only as a bearer header, never printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import httpx2

from reference_backend import snapshots

DEFAULT_URL = "http://127.0.0.1:8642"
TIMEOUT_SECONDS = 60.0


class _Failed(Exception):
    """A step failed; the message says why and what to do, and the command exits 1."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="maya-tools reference-backend snapshot",
        description="Save a running reference backend's world to a snapshot file, or restore one into it.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="save|restore")
    for name, what in (("save", "write the world to FILE"), ("restore", "replace the world with FILE's")):
        action = actions.add_parser(name, help=what, description=f"{what.capitalize()}.")
        action.add_argument("file", type=Path, metavar="FILE")
        action.add_argument("--url", default=DEFAULT_URL, help=f"the backend (default {DEFAULT_URL})")
        action.add_argument("--admin-token", required=True, metavar="TOKEN", help="the backend's --admin-token")
    return parser


def main(argv: Sequence[str]) -> int:
    """0 when done, 1 when the backend or the file refused, 2 on bad arguments."""
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        with httpx2.Client(base_url=args.url.rstrip("/"), timeout=TIMEOUT_SECONDS) as http:
            headers = {"Authorization": f"Bearer {args.admin_token}"}
            if args.action == "save":
                _save(http, headers, args.file)
            else:
                _restore(http, headers, args.file)
    except _Failed as failure:
        print(f"maya-tools reference-backend snapshot {args.action}: {failure}", file=sys.stderr)
        return 1
    return 0


def _save(http: httpx2.Client, headers: dict[str, str], path: Path) -> None:
    data = _answer(http, "GET", headers).content
    try:
        snapshots.parse(data)  # only ever write a file `restore` will take
    except snapshots.SnapshotError as error:
        raise _Failed(f"the backend at {http.base_url} answered something that is not a snapshot: {error}") from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except OSError as error:
        raise _Failed(f"cannot write {path}: {error}") from None
    print(f"saved the world of {http.base_url} to {path} ({len(data)} bytes)")


def _restore(http: httpx2.Client, headers: dict[str, str], path: Path) -> None:
    try:
        data = path.read_bytes()
        snapshots.parse(data)
    except OSError as error:
        raise _Failed(f"cannot read {path}: {error}") from None
    except snapshots.SnapshotError as error:
        raise _Failed(f"{path}: {error}") from None
    answer = _answer(http, "PUT", {**headers, "Content-Type": "application/json"}, data)
    print(f"restored {path} into {http.base_url}; its clock is at {answer.json()['now']}")


def _answer(http: httpx2.Client, method: str, headers: dict[str, str], body: bytes | None = None) -> httpx2.Response:
    try:
        response = http.request(method, "/_reference/snapshot", headers=headers, content=body)
    except httpx2.HTTPError as error:
        raise _Failed(
            f"cannot reach the reference backend at {http.base_url} ({error}). "
            "Start it with `maya-tools reference-backend --admin-token TOKEN`, or pass its --url."
        ) from None
    if response.status_code == 401:
        raise _Failed(f"the backend at {http.base_url} refused the admin token. Pass the --admin-token it was started with.")
    if response.status_code == 404:
        raise _Failed(
            f"{http.base_url} has no admin plane (404 for /_reference/snapshot). "
            "Start the reference backend with --admin-token TOKEN."
        )
    if response.is_error:
        detail = response.json().get("detail") if _is_problem(response) else response.text[:300]
        raise _Failed(f"the backend answered {response.status_code}: {detail}")
    return response


def _is_problem(response: httpx2.Response) -> bool:
    return response.headers.get("content-type", "").startswith("application/problem+json")
