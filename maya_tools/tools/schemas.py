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
  (``publish_compact``), and every argument keeps its description;
- an output schema's ``$defs`` entry used once is written in place of its ``$ref``, and its objects
  drop ``additionalProperties: false`` (the MCP Apps card's ``_meta.ui`` and app-only ``decide_card``
  had to fit the 20 KB ``tools/list`` budget; every field keeps its type).

Types, bounds, patterns, enums, ``required`` and defaults are untouched: a call the SDK accepted
before is accepted now, and a result that matched its schema still matches.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool

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


def open_objects(schema: Any) -> Any:
    """An output schema without ``additionalProperties: false``: every field keeps its type, and a
    client reading a result needs no promise that the server will never add a field."""
    if isinstance(schema, list):
        return [open_objects(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: {name: open_objects(sub) for name, sub in value.items()} if key == "properties" else open_objects(value)
        for key, value in schema.items()
        if not (key == "additionalProperties" and value is False)
    }


def inline_single_defs(schema: Any) -> Any:
    """``schema`` with each ``$defs`` entry that is referenced once written in place of its ``$ref``
    (the same type, without the name and the pointer); entries referenced more than once stay."""
    if not isinstance(schema, dict) or not isinstance(schema.get("$defs"), dict):
        return schema
    defs: dict[str, Any] = schema["$defs"]
    counts: dict[str, int] = {}

    def count(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                count(item)
        elif isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                counts[ref[8:]] = counts.get(ref[8:], 0) + 1
            for key, value in node.items():
                if key != "$defs":
                    count(value)

    count(schema)
    for name in defs:  # a def used only from another def counts too
        count(defs[name])
    single = {name for name, used in counts.items() if used == 1 and name in defs}

    def place(node: Any) -> Any:
        if isinstance(node, list):
            return [place(item) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in single and len(node) == 1:
            return place(defs[ref[8:]])
        return {key: place(value) for key, value in node.items() if key != "$defs"}

    out = place(schema)
    kept = {name: place(sub) for name, sub in defs.items() if name not in single}
    return {"$defs": kept, **out} if kept else out


def publish_compact(mcp: MCPServer[Any], *, published: Collection[str] = ()) -> None:
    """Compact the description, input and output schema of every tool registered on ``mcp`` so far,
    except those named in ``published``, which are in this form already (``compact_tool``).

    Output schemas keep their types and drop their prose: no client shows them to the model, which
    reads the result's text (``content``), and what a field means is said there, in the tool's
    description and in the result models' code.
    """
    for tool in mcp._tool_manager.list_tools():
        if tool.name not in published:
            compact_tool(tool)


def compact_tool(tool: Tool) -> None:
    """``tool``'s description, input and output schema, replaced by their published form."""
    if tool.description:
        tool.description = unwrapped(tool.description)
    tool.parameters = compact(tool.parameters)
    metadata = tool.fn_metadata
    if metadata.output_schema is not None:
        metadata.output_schema = inline_single_defs(open_objects(types_only(compact(metadata.output_schema))))


__all__ = ["compact", "compact_tool", "inline_single_defs", "publish_compact"]
