"""Measures shared by ``benchmarks/run.py`` and the tests that pin issue 10's budgets, so both count alike."""

from __future__ import annotations

import json
from collections.abc import Sequence

from mcp_types import Tool


def tools_list_texts(tools: Sequence[Tool]) -> tuple[str, str]:
    """``tools/list`` as sent (compact JSON of every tool), and the part a model reads (name,
    description, input schema), also compact JSON."""
    wire = json.dumps(
        [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools], separators=(",", ":")
    )
    facing = json.dumps(
        [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools],
        separators=(",", ":"),
    )
    return wire, facing
