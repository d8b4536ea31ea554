"""Each rule id is decided in exactly one function (STYLE.md 6): the backend and the planner call it
with their own data, and the client's errors take its fix from ``rules.FIXES``.

A function "decides" a rule when it builds the refusal naming it: ``Violation("R-…", …)`` or a
``Refusal(…, rule="R-…")`` with the rule id written out. The map below is the expected one; a
second function deciding a rule, or a rule decided somewhere unlisted, fails.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("backend_client", "reference_backend", "confirmation_cards", "prompts", "maya_tools")
RULE = re.compile(r"^R-[A-Z]+-\d\d$")

DECIDED_IN: dict[str, str] = {
    "R-ADD-01": "backend_client/rules.py:create_shape_violations",
    "R-ADD-02": "backend_client/rules.py:name_clash_violation",
    "R-ADD-03": "backend_client/rules.py:tier_violation",
    "R-ADD-06": "backend_client/rules.py:_bounds_shape",
    "R-AUTH-01": "reference_backend/backend.py:authenticate",
    "R-AUTH-02": "reference_backend/backend.py:cluster_for",
    "R-AUTH-03": "backend_client/rules.py:role_violation",
    "R-AUTH-04": "reference_backend/backend.py:cluster_for",
    "R-CREDIT-01": "backend_client/rules.py:credit_violation",
    "R-DEL-01": "backend_client/rules.py:last_pool_violation",
    "R-NODE-05": "reference_backend/backend.py:nodes_body",
    "R-OP-01": "backend_client/rules.py:busy_pool_violation",
    "R-PATCH-01": "backend_client/rules.py:patch_field_violation",
    "R-PATCH-02": "backend_client/rules.py:empty_patch_violation",
    "R-PATCH-03": "confirmation_cards/planner.py:_patch_card",
    "R-PHASE-01": "backend_client/rules.py:phase_violation",
    "R-PHASE-02": "reference_backend/backend.py:nodes_body",
    "R-POOL-04": "backend_client/rules.py:patch_field_violation",
    "R-RNODE-03": "backend_client/rules.py:node_name_violation",
    "R-RNODE-05": "backend_client/rules.py:node_busy_violation",
    # Decided with the rule id passed in by the caller (R-PATCH-07 or R-DEL-03), never written twice.
    "R-PATCH-07": "backend_client/rules.py:missing_pool_violation",
    "R-PATCH-10": "confirmation_cards/tier_plan.py:plan_tier_change",  # a move to the tier the pool has
    "R-DEL-03": "backend_client/rules.py:missing_pool_violation",
}
# Rules whose id reaches their one deciding function as an argument rather than as a literal.
PASSED_IN = {"R-PATCH-07", "R-DEL-03"}


def _rule_of(call: ast.Call) -> str | None:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
    if name not in ("Violation", "Refusal"):
        return None
    candidates = [call.args[0]] if name == "Violation" and call.args else []
    candidates += [kw.value for kw in call.keywords if kw.arg == "rule"]
    for node in candidates:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and RULE.match(node.value):
            return node.value
    return None


def deciders() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for function in ast.walk(tree):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(function):
                    if isinstance(node, ast.Call) and (rule := _rule_of(node)) is not None:
                        where = f"{path.relative_to(ROOT).as_posix()}:{function.name}"
                        found.setdefault(rule, set()).add(where)
    return found


def test_each_rule_id_is_decided_in_exactly_one_function() -> None:
    found = deciders()
    twice = {rule: sorted(places) for rule, places in found.items() if len(places) > 1}
    assert twice == {}, "a rule decided in more than one function: call the one that decides it"
    written = {rule: next(iter(places)) for rule, places in found.items()}
    expected = {rule: place for rule, place in DECIDED_IN.items() if rule not in PASSED_IN}
    assert written == expected


def test_the_rules_passed_in_are_decided_by_their_one_function() -> None:
    source = (ROOT / "backend_client" / "rules.py").read_text(encoding="utf-8")
    assert "def missing_pool_violation(" in source
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for rule in PASSED_IN:
                text = path.read_text(encoding="utf-8")
                # The rule id is passed to the deciding function (rule=...), never used to build a refusal.
                assert f'Violation("{rule}"' not in text and f'rule="{rule}",\n' not in text, path


def test_the_clients_advice_is_the_rules_own_fix() -> None:
    from backend_client import errors, rules

    assert not hasattr(errors, "_ADVICE")
    assert rules.FIXES["R-DEL-01"] == rules.last_pool_violation("w", "c", 1).fix  # type: ignore[union-attr]
    assert rules.FIXES["R-OP-01"] == rules.busy_pool_violation("w", ("op", "pool.update", "12:00")).fix  # type: ignore[union-attr]
