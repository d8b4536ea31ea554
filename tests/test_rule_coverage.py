"""Every rule of docs/door-api-rules.md is tested against the reference backend, and the catalogue is the shared one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RULES_DOC = REPO / "docs" / "door-api-rules.md"
SHARED_RULES_DOC = REPO.parent / "shared" / "door-api-rules.md"
RULE_TESTS = REPO / "tests" / "reference_backend"
BACKEND_DOC = REPO / "docs" / "reference-backend.md"
DIFFERS = "## Where it differs from Door"

RULE_ID = re.compile(r"R-[A-Z]+-\d\d")
CITED_ID = re.compile(r"\bR-[A-Z]+-\d\d\b")
TEST_NAME_ID = re.compile(r"^test_r_([a-z]+)_(\d\d)(?:_|$)")  # test_r_patch_04_… cites R-PATCH-04
# A rule row of the catalogue's tables: `| R-POOL-01 | … |`.
RULE_ROW = re.compile(r"^\|\s*(R-[A-Z]+-\d\d)\s*\|", re.MULTILINE)


def _catalogue_ids() -> set[str]:
    """The ids of the catalogue's rule rows (prose such as "name the rule (`R-POOL-07`)" is an example, not a rule)."""
    rows = RULE_ROW.findall(RULES_DOC.read_text(encoding="utf-8"))
    assert all(RULE_ID.fullmatch(row) for row in rows)
    return set(rows)


def _ids_cited_by_tests() -> dict[str, list[str]]:
    """Rule id → the tests that cite it in their name (`test_r_patch_04_…`) or docstring."""
    cited: dict[str, list[str]] = {}
    for path in sorted(RULE_TESTS.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.name.startswith("test_"):
                continue
            rules = set(CITED_ID.findall(ast.get_docstring(node) or ""))
            named = TEST_NAME_ID.match(node.name)
            if named:
                rules.add(f"R-{named.group(1).upper()}-{named.group(2)}")
            for rule in rules:
                cited.setdefault(rule, []).append(f"{path.name}::{node.name}")
    return cited


def test_the_catalogue_has_rules() -> None:
    """The parser finds the catalogue: every section's rules, from R-AUTH-01 to R-CREDIT-01."""
    ids = _catalogue_ids()
    assert {"R-AUTH-01", "R-PATCH-04", "R-RNODE-05", "R-CREDIT-01"} <= ids
    assert len(ids) >= 50, sorted(ids)


def test_every_rule_has_a_reference_backend_test() -> None:
    """Each rule id of docs/door-api-rules.md is named by at least one test under tests/reference_backend/."""
    cited = _ids_cited_by_tests()
    missing = sorted(_catalogue_ids() - set(cited))
    assert not missing, "rules without a reference backend test: " + ", ".join(missing)


def test_tests_cite_only_rules_that_exist() -> None:
    """A test naming a rule id that is not in the catalogue is a typo (or a stale rule)."""
    unknown = {rule: tests for rule, tests in _ids_cited_by_tests().items() if rule not in _catalogue_ids()}
    assert not unknown, f"tests cite rule ids missing from docs/door-api-rules.md: {unknown}"


def test_rules_doc_is_the_shared_catalogue() -> None:
    """docs/door-api-rules.md is a copy of ../shared/door-api-rules.md; without the shared file, it must hold the table."""
    local = RULES_DOC.read_text(encoding="utf-8")
    if SHARED_RULES_DOC.exists():
        shared = SHARED_RULES_DOC.read_text(encoding="utf-8")
        assert local == shared, f"{RULES_DOC} differs from {SHARED_RULES_DOC}: copy the shared catalogue again"
    else:
        assert local.strip(), f"{RULES_DOC} is empty"
        rows = RULE_ROW.findall(local)
        assert "| id | rule |" in local, "the rule table header `| id | rule |` is missing"
        assert len(rows) >= 50 and len(rows) == len(set(rows)), rows


def _decision_rows() -> set[str]:
    """The catalogue's rules that fix a reading the page leaves open (`**decision**` in their row)."""
    text = RULES_DOC.read_text(encoding="utf-8")
    return {match.group(1) for match in RULE_ROW.finditer(text) if "**decision**" in text[match.end() :].split("\n")[0]}


def _differences_table() -> list[list[str]]:
    """The rows of docs/reference-backend.md's "Where it differs from Door" table, as cells."""
    section = BACKEND_DOC.read_text(encoding="utf-8").split(DIFFERS, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]  # without the header
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def test_every_decision_row_says_what_the_reference_backend_does() -> None:
    """Each **decision** of the catalogue has a row in the reference backend's page naming its rule id first,
    with what the page leaves open and what the backend does; every id there exists."""
    assert {"R-AUTH-01", "R-ADD-09", "R-CREDIT-01"} <= _decision_rows()
    rows = _differences_table()
    assert all(len(cells) == 3 and all(cells) for cells in rows), rows
    named = {rule for cells in rows for rule in CITED_ID.findall(cells[0])}
    missing = sorted(_decision_rows() - named)
    assert not missing, f"decision rows with no entry under {DIFFERS!r} in docs/reference-backend.md: {missing}"
    assert named <= _catalogue_ids(), sorted(named - _catalogue_ids())
