"""The pure rules refuse what the reference backend refuses: the whole value must match (R-ADD-01, R-RNODE-03)."""

from __future__ import annotations

import pytest

from backend_client import rules
from backend_client.models import PublicNodePoolCreateRequest


@pytest.mark.parametrize("name", ["other\n", "batch\n", "batch\r\n", "\nbatch", "bat\nch"])
def test_r_add_01_a_name_with_a_newline_is_not_a_dns_label(name: str) -> None:
    """R-ADD-01: `re.match` with `$` accepted `"other\\n"`; the pattern must match the whole name."""
    assert not rules.is_dns_label(name)
    found = rules.create_shape_violations(PublicNodePoolCreateRequest(name=name, size="dks.c5.xlarge"))
    assert [(v.rule, v.status, v.field) for v in found] == [("R-ADD-01", 422, "name")]


@pytest.mark.parametrize("name", ["a", "batch-1", "a" * 63])
def test_r_add_01_dns_labels_still_pass(name: str) -> None:
    assert rules.is_dns_label(name)
    assert rules.create_shape_violations(PublicNodePoolCreateRequest(name=name, size="dks.c5.xlarge")) == []


@pytest.mark.parametrize("name", ["node\n", "payments-prod-workers-abc12\n", "node\r\n", "\nnode"])
def test_r_rnode_03_a_node_name_with_a_newline_is_refused(name: str) -> None:
    """R-RNODE-03: `node\\n` is not a node name (400), however the pattern's `$` reads in Python."""
    assert not rules.is_node_name(name)
    violation = rules.node_name_violation(name)
    assert violation is not None and (violation.rule, violation.status) == ("R-RNODE-03", 400)


def test_r_rnode_03_well_formed_node_names_still_pass() -> None:
    assert rules.node_name_violation("ip-10-0-0-1.eu-west-1.compute.internal") is None


def _patterns(schema: object) -> list[str]:
    if isinstance(schema, dict):
        found = [schema["pattern"]] if isinstance(schema.get("pattern"), str) else []
        return found + [p for value in schema.values() for p in _patterns(value)]
    if isinstance(schema, list):
        return [p for value in schema for p in _patterns(value)]
    return []


def test_every_pattern_of_a_contract_model_is_anchored_at_both_ends() -> None:
    """pydantic-core applies a `pattern=` with Rust regex *search* semantics (unanchored, `$` only at
    the very end), so a contract pattern must be written `^…$` to be a full match."""
    from pydantic import BaseModel

    from backend_client import models

    contract = [
        m for m in vars(models).values() if isinstance(m, type) and issubclass(m, BaseModel) and m is not BaseModel
    ]
    patterns = [p for model in contract for p in _patterns(model.model_json_schema())]
    assert all(p.startswith("^") and p.endswith("$") for p in patterns), patterns


def test_pydantic_reads_an_anchored_pattern_as_a_full_match() -> None:
    """What the test above relies on: pydantic's `$` does not match before a final newline, and an
    unanchored pattern is a search."""
    from pydantic import BaseModel, Field, ValidationError

    class Anchored(BaseModel):
        name: str = Field(pattern=rules.DNS_LABEL.pattern)

    class Loose(BaseModel):
        name: str = Field(pattern=r"[a-z]+")

    assert Anchored(name="batch").name == "batch"
    with pytest.raises(ValidationError):
        Anchored(name="batch\n")
    assert Loose(name="1-batch-!").name == "1-batch-!"
