"""The bundle's entry point: ``maya-tools serve`` on stdio, from the maya-tools wheel the bundle carries.

A host that runs MCPB's ``uv`` server type itself (``uv run server/main.py`` in the bundle's folder)
gets the same server as ``mcp_config``'s ``uv tool run``: pyproject.toml beside it depends on the wheel.
"""

import sys

from maya_tools.cli import main

raise SystemExit(main(["serve", *sys.argv[1:]]))
