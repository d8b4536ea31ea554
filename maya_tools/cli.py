"""The ``maya-tools`` command: one entry point, one subcommand per job."""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = """usage: maya-tools COMMAND [options]

commands:
  reference-backend   run the Door API reference backend (see --help)
"""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"}:
        print(USAGE, end="")
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "reference-backend":
        from reference_backend.cli import main as reference_backend_main

        return reference_backend_main(rest)
    print(f"maya-tools: unknown command {command!r}\n\n{USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
