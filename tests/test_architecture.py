"""The import graph of our five packages keeps the layers of DESIGN.md, has no cycle, and no module is huge.

The graph is read from the source (``ast``), not from ``sys.modules``: every ``import`` counts,
including those inside functions and under ``if TYPE_CHECKING:``, since a deferred import hides a
cycle rather than removing it. ``from package import name`` is an edge to ``package.name`` when that
is a module, else to ``package`` itself.

A KNOWN_* list names a violation that exists today outside the part of the code this test was
written with; each is someone's work to remove. The test fails on any violation not listed, and on
a listed one that is gone (so the list only shrinks).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("backend_client", "reference_backend", "confirmation_cards", "prompts", "maya_tools")
MAX_LINES = 500

# The contract: what reference_backend may import of backend_client (DESIGN.md, "Packages").
CONTRACT = frozenset({"backend_client.models", "backend_client.rules"})

# Import cycles that exist today, each as the sorted modules of one strongly connected component.
KNOWN_CYCLES: frozenset[tuple[str, ...]] = frozenset()

# Layer breaks that exist today, as (importer, imported). Another engineer removes them.
KNOWN_LAYER_VIOLATIONS: frozenset[tuple[str, str]] = frozenset()

# A package's __init__ runs before any of its modules, so ``import backend_client.models`` executes
# ``backend_client/__init__.py``; it loads the client and the error tree lazily (PEP 562), so importing
# the contract loads nothing beyond it.
KNOWN_CONTRACT_LEAKS: frozenset[str] = frozenset()

# The one module of maya_tools that imports reference_backend (DESIGN.md: "Only one module of
# maya_tools builds the embedded reference backend").
EMBEDDED = "maya_tools.embedded"

# The entry point of both programs, server and chat: the one server-side module that imports the chat.
CLI = "maya_tools.cli"

# Modules over MAX_LINES today, outside reference_backend; another engineer shrinks them.
KNOWN_LARGE_MODULES: frozenset[str] = frozenset()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of the five packages, by dotted name."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


@cache
def trees() -> dict[str, ast.Module]:
    """Every module's syntax tree, parsed once for all the checks here."""
    return {
        module: ast.parse(path.read_text(encoding="utf-8"), filename=str(path)) for module, path in modules().items()
    }


def _is_package(name: str) -> bool:
    return modules()[name].name == "__init__.py"


def _ours(name: str) -> str | None:
    """The longest prefix of a dotted name that is one of our modules (None for third-party names)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules():
            return candidate
        parts.pop()
    return None


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of import nodes under ``if TYPE_CHECKING:``: edges for cycles, but never executed."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for inner in node.body:
                guarded.update(id(sub) for sub in ast.walk(inner))
    return guarded


def _imported_names(module: str, tree: ast.AST, *, runtime_only: bool = False) -> Iterator[str]:
    """Every dotted name the module imports, anywhere in its body (functions and TYPE_CHECKING included,
    the latter left out with ``runtime_only``)."""
    package = module if _is_package(module) else module.rpartition(".")[0]
    skipped = _type_checking_only(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - node.level + 1]
                base = ".".join([*base_parts, node.module] if node.module else base_parts)
            else:
                base = node.module or ""
            for alias in node.names:
                yield f"{base}.{alias.name}"  # ``_ours`` falls back to ``base`` when this is not a module


@cache
def third_party_imports() -> dict[str, frozenset[str]]:
    """The imported names that are not ours, per module (for the chat's MCP rule)."""
    result: dict[str, frozenset[str]] = {}
    for module, tree in trees().items():
        result[module] = frozenset(name for name in _imported_names(module, tree) if _ours(name) is None)
    return result


@cache
def graph(runtime_only: bool = False) -> dict[str, frozenset[str]]:
    """Module → the modules of ours it imports (with ``runtime_only``: those an import executes)."""
    edges: dict[str, frozenset[str]] = {}
    for module, tree in trees().items():
        targets = {_ours(name) for name in _imported_names(module, tree, runtime_only=runtime_only)}
        edges[module] = frozenset(t for t in targets if t is not None and t != module)
    return edges


def strongly_connected(edges: dict[str, frozenset[str]]) -> list[tuple[str, ...]]:
    """Tarjan's algorithm, iteratively: the components with more than one module (the cycles)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[tuple[str, ...]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(tuple(sorted(component)))
    return cycles


def _package(module: str) -> str:
    return module.partition(".")[0]


def _is_chat(module: str) -> bool:
    """The Maya chat (DESIGN.md ``maya_tools/chat/``): the ``maya_tools.chat`` package and everything in it,
    the eval included (it reads the server it measures as an MCP client, over stdio)."""
    return module == "maya_tools.chat" or module.startswith("maya_tools.chat.")


def layer_break(importer: str, imported: str) -> str | None:
    """Why the edge importer → imported breaks the layer table of DESIGN.md, or None when it is allowed."""
    source, target = _package(importer), _package(imported)
    if _is_chat(importer):
        if _is_chat(imported) or target == "prompts":
            return None
        return "maya_tools/chat/ imports only prompts and the MCP SDK client, never the server's modules"
    if _is_chat(imported) and importer != CLI:
        return "the server never imports the chat (only cli.py, which starts either program)"
    if source == target:
        return None
    if source == "backend_client":
        return "backend_client imports nothing of ours"
    if source == "reference_backend":
        if imported in CONTRACT:
            return None
        return "reference_backend imports only the contract (backend_client.models, backend_client.rules)"
    if source == "confirmation_cards":
        return None if target == "backend_client" else "confirmation_cards imports only backend_client"
    if source == "prompts":
        return "prompts imports nothing of ours"
    return None  # maya_tools: all of the above


def _with_parents(module: str) -> list[str]:
    """The module and the package inits Python runs before it (``a``, ``a.b`` for ``a.b.c``)."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def loaded_by(module: str) -> set[str]:
    """Every module of ours that importing ``module`` executes: its imports and every package init on the way."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        current = todo.pop()
        for each in _with_parents(current):
            if each not in seen and each in modules():
                seen.add(each)
                todo.extend(graph(runtime_only=True)[each])
    return seen


# --- the tests ------------------------------------------------------------------------------------


def test_the_graph_sees_every_package_and_deferred_imports() -> None:
    assert {_package(m) for m in modules()} == set(PACKAGES)
    assert "backend_client.models" in graph()["reference_backend.backend"]


def test_no_import_cycle_between_modules() -> None:
    cycles = set(strongly_connected(graph()))
    assert cycles - KNOWN_CYCLES == set(), "new import cycles (imports inside functions count)"
    assert KNOWN_CYCLES - cycles == set(), "a known cycle is gone: remove it from KNOWN_CYCLES"


def test_every_import_keeps_the_layer_table() -> None:
    breaks = {
        (importer, imported): why
        for importer, targets in graph().items()
        for imported in targets
        if (why := layer_break(importer, imported)) is not None
    }
    new = {edge: why for edge, why in breaks.items() if edge not in KNOWN_LAYER_VIOLATIONS}
    assert new == {}, "imports that break DESIGN.md's layer table"
    assert KNOWN_LAYER_VIOLATIONS - breaks.keys() == set(), "a known violation is gone: remove it from the list"


def test_the_chat_uses_only_the_mcp_client_of_the_sdk() -> None:
    server_side = {
        (module, name)
        for module, names in third_party_imports().items()
        if _is_chat(module)
        for name in names
        if name.startswith("mcp.server")
    }
    assert server_side == set()


def test_the_contract_loads_without_the_http_client() -> None:
    """Importing the contract executes nothing of backend_client beyond the contract and its package init."""
    leaks = set().union(*(loaded_by(contract) for contract in CONTRACT)) - CONTRACT - {"backend_client"}
    assert leaks - KNOWN_CONTRACT_LEAKS == set()
    assert KNOWN_CONTRACT_LEAKS - leaks == set(), "a known leak is gone: remove it from KNOWN_CONTRACT_LEAKS"


def test_reference_backend_loads_only_itself_and_the_contract() -> None:
    allowed = CONTRACT | {"backend_client"} | KNOWN_CONTRACT_LEAKS
    outside = {
        module: sorted(m for m in loaded_by(module) if _package(m) != "reference_backend" and m not in allowed)
        for module in modules()
        if _package(module) == "reference_backend"
    }
    assert {module: extra for module, extra in outside.items() if extra} == {}


def test_only_the_embedded_module_of_maya_tools_imports_the_reference_backend() -> None:
    importers = {
        module
        for module, targets in graph().items()
        if _package(module) == "maya_tools" and any(_package(t) == "reference_backend" for t in targets)
    }
    assert importers == {EMBEDDED}


def test_the_scripts_import_nothing_from_the_tests() -> None:
    """``scripts/record_cassettes.py`` shares the recording flows with the tests through ``scripts/``."""
    imported: set[tuple[str, str]] = set()
    for path in sorted((ROOT / "scripts").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update((path.name, alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                imported.add((path.name, node.module))
    assert ("record_cassettes.py", "scripts.cassette_flows") in imported
    assert {(script, name) for script, name in imported if name.partition(".")[0] == "tests"} == set()


def test_only_the_postgresql_engines_import_psycopg() -> None:
    """The card store is split by engine (``confirmation_cards/stores/``), and so is the Door-credential store
    beside it (``maya_tools/auth/storage*.py``, imported lazily): a SQLite server never loads psycopg."""
    importers = {
        module
        for module, names in third_party_imports().items()
        if any(name.partition(".")[0] in ("psycopg", "psycopg_pool") for name in names)
    }
    assert importers == {"confirmation_cards.stores.postgres", "maya_tools.auth.storage_postgres"}


def test_no_module_is_over_500_lines() -> None:
    large = {
        module for module, path in modules().items() if len(path.read_text(encoding="utf-8").splitlines()) > MAX_LINES
    }
    assert large - KNOWN_LARGE_MODULES == set(), f"modules over {MAX_LINES} lines"
    assert KNOWN_LARGE_MODULES - large == set(), "a known large module shrank: remove it from KNOWN_LARGE_MODULES"
    assert not any(_package(m) == "reference_backend" for m in KNOWN_LARGE_MODULES)
