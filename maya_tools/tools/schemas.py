"""The schemas ``tools/list`` publishes, said in fewer bytes with the same meaning.

Every client downloads ``tools/list`` and many put the input schemas before the model on every turn,
so what pydantic generates for Python readers is left out or said shorter, once, at registration:

- ``title``: pydantic repeats each property's name (``"count"`` → ``"Count"``) and each model's class name;
- ``anyOf: [X, {"type": "null"}]`` for a plain ``X`` is ``X`` with ``"type": [X's type, "null"]``
  (JSON Schema 2020-12; ``minimum``, ``maxLength``, ``format`` apply only to the non-null type anyway);
- ``additionalProperties: true`` (or ``{}``, any value) is what JSON Schema assumes when it is absent,
  and ``default: null`` on an optional property says what leaving it out says;
- a ``$defs`` entry's ``description`` is its Python class's docstring, written for this code's readers;
  a tool's description loses its docstring indentation and wrapping; output schemas are types only
  (``publish_compact``), and every argument keeps its description.

Types, bounds, patterns, enums, ``required`` and defaults are untouched: a call the SDK accepted
before is accepted now, and a result that matched its schema still matches.
"""

from __future__ import annotations

import inspect
from typing import Any

from mcp.server.mcpserver import MCPServer

_NULL = {"type": "null"}
_NOT_MERGED = frozenset({"$ref", "anyOf", "oneOf", "allOf", "enum", "const", "description", "default"})


def compact(schema: Any) -> Any:
    """``schema`` without generated titles, with nullable plain types as type lists (see the module)."""
    if isinstance(schema, list):
        return [compact(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if (key == "additionalProperties" and value in (True, {})) or (key == "default" and value is None):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: compact(sub) for name, sub in value.items()}  # a property may be named "title"
        elif key == "$defs" and isinstance(value, dict):
            out[key] = {name: _without_docstring(compact(sub)) for name, sub in value.items()}
        else:
            out[key] = compact(value)
    return _nullable(out)


def _without_docstring(schema: Any) -> Any:
    if isinstance(schema, dict):
        schema.pop("description", None)
    return schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``{"anyOf": [X, null], …}`` → ``{…X, "type": [X.type, "null"], …}`` when X is one plain type."""
    options = schema.get("anyOf")
    if not (isinstance(options, list) and len(options) == 2 and _NULL in options):
        return schema
    other = options[1] if options[0] == _NULL else options[0]
    if not isinstance(other, dict) or not isinstance(other.get("type"), str) or _NOT_MERGED & other.keys():
        return schema
    if other.keys() & (schema.keys() - {"anyOf"}):
        return schema  # a keyword on both sides: keep the anyOf rather than merge them
    merged = {key: value for key, value in schema.items() if key != "anyOf"}
    return {**other, "type": [other["type"], "null"], **merged}


def unwrapped(text: str) -> str:
    """A docstring as one line per paragraph: its indentation and line wrapping are the source's."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in paragraph.splitlines()) for paragraph in paragraphs)


def types_only(schema: Any) -> Any:
    """``schema`` without any ``description`` (a property may still be named ``description``)."""
    if isinstance(schema, list):
        return [types_only(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: {name: types_only(sub) for name, sub in value.items()} if key == "properties" else types_only(value)
        for key, value in schema.items()
        if not (key == "description" and isinstance(value, str))
    }


def publish_compact(mcp: MCPServer[Any]) -> None:
    """Compact the description, input and output schema of every tool registered on ``mcp`` so far.

    Output schemas keep their types and drop their prose: no client shows them to the model, which
    reads the result's text (``content``), and what a field means is said there, in the tool's
    description and in the result models' code.
    """
    for tool in mcp._tool_manager.list_tools():
        if tool.description:
            tool.description = unwrapped(tool.description)
        tool.parameters = compact(tool.parameters)
        metadata = tool.fn_metadata
        if metadata.output_schema is not None:
            metadata.output_schema = types_only(compact(metadata.output_schema))


__all__ = ["compact", "publish_compact"]
