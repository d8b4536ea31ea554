"""The compact schemas of tools/list say what pydantic's said, in fewer bytes (issue 10)."""

from __future__ import annotations

from typing import Annotated, Any

import jsonschema
import pytest
from pydantic import BaseModel, Field

from maya_tools.tools.schemas import compact, types_only, unwrapped


class Inner(BaseModel):
    """A docstring for Python readers."""

    title: str = Field(description="A property named title is a property, not a title.")


class Arguments(BaseModel):
    count: Annotated[int | None, Field(ge=0, le=200, description="Workers.")] = None
    name: Annotated[str, Field(max_length=10, description="A name.")]
    inner: Inner | None = None
    labels: dict[str, str] | None = None


SCHEMA = Arguments.model_json_schema()
INSTANCES: list[Any] = [
    {"name": "a"},
    {"name": "a", "count": None},
    {"name": "a", "count": 3, "inner": {"title": "t"}, "labels": {"k": "v"}},
    {"name": "a", "count": 201},
    {"name": "a", "count": "3"},
    {"name": "a" * 11},
    {"count": 1},
    {"name": "a", "inner": {}},
    {"name": "a", "labels": {"k": 1}},
]


@pytest.mark.parametrize("instance", INSTANCES)
def test_a_compact_schema_accepts_and_refuses_what_the_original_did(instance: Any) -> None:
    original = jsonschema.Draft202012Validator(SCHEMA).is_valid(instance)
    assert jsonschema.Draft202012Validator(compact(SCHEMA)).is_valid(instance) is original
    assert jsonschema.Draft202012Validator(types_only(compact(SCHEMA))).is_valid(instance) is original


def test_generated_titles_go_and_a_property_named_title_stays() -> None:
    schema = compact(SCHEMA)
    assert "title" not in schema and "title" not in schema["properties"]["name"]
    inner = schema["$defs"]["Inner"]
    assert set(inner["properties"]) == {"title"} and "description" not in inner  # the docstring
    assert inner["properties"]["title"]["description"].startswith("A property named title")
    assert schema["properties"]["count"] == {
        "maximum": 200,
        "minimum": 0,
        "type": ["integer", "null"],
        "description": "Workers.",
    }
    assert "anyOf" in schema["properties"]["inner"]  # a $ref is not merged


def test_types_only_keeps_a_property_named_description() -> None:
    schema = {"type": "object", "description": "x", "properties": {"description": {"type": "string"}}}
    assert types_only(schema) == {"type": "object", "properties": {"description": {"type": "string"}}}


def test_a_docstring_becomes_one_line_per_paragraph() -> None:
    assert unwrapped("First line\n        continues.\n\n        Second.") == "First line continues.\n\nSecond."
