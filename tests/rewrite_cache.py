"""Assertion rewriting once per run instead of once per xdist worker.

pytest rewrites the ``assert`` statements of every test module and conftest when it imports them,
about 1.3 s of CPU for this suite, and caches the result in ``__pycache__`` (a pyc checked against
its source's hash). In a fresh checkout, or under ``PYTHONDONTWRITEBYTECODE``, there is no cache, so
each xdist worker, all of them collecting the whole suite at the same moment, pays it again. Here the
controller writes that cache before it starts the workers, on two processes, and each worker only
reads it. pytest still checks each cached file against its source before using it, and anything
that goes wrong here only means that the workers rewrite as they would have anyway.

It also keeps pytest from rewriting the libraries of the plugins the suite blocks (``-p no:…`` in
pyproject's ``addopts``: schemathesis and hypothesis, which ``test_schemathesis`` calls as plain
libraries). pytest marks every package of a plugin's distribution for rewriting before it reads
``-p no:``, so the worker that imports them rewrote some 300 of their modules, about 2 s of CPU.

And it compiles the project's own packages (``compile_packages``): under ``PYTHONDONTWRITEBYTECODE``
nothing else writes their bytecode, so in a fresh checkout every `maya-tools` process a test starts
compiled the modules it imports again, about 0.07 s of CPU each.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def rewritten_files(config: pytest.Config) -> list[Path]:
    """The files pytest rewrites here: the conftests and the test modules (``python_files``)."""
    patterns = config.getini("python_files")
    found: set[Path] = set()
    for root in config.getini("testpaths") or ["."]:
        base = config.rootpath / root
        found.update(base.rglob("conftest.py"))
        for pattern in patterns:
            found.update(base.rglob(pattern))
    return sorted(found)


def unmark_blocked_plugins(config: pytest.Config) -> set[str]:
    """Take back pytest's rewrite marks on the packages of plugin distributions all of whose plugins
    are blocked: they are imported as libraries, if at all. Returns the names unmarked."""
    import importlib.metadata

    hook = getattr(config.pluginmanager, "rewrite_hook", None)
    marked = getattr(hook, "_must_rewrite", None)
    cache = getattr(hook, "_marked_for_rewrite_cache", None)
    if not isinstance(marked, set) or not isinstance(cache, dict):  # another pytest: nothing to take back
        return set()
    try:
        from _pytest.config import _iter_rewritable_modules
    except ImportError:
        return set()
    unmarked: set[str] = set()
    for dist in importlib.metadata.distributions():
        plugins = [ep.name for ep in dist.entry_points if ep.group == "pytest11"]
        if plugins and all(config.pluginmanager.is_blocked(name) for name in plugins):
            unmarked |= marked & set(_iter_rewritable_modules(str(file) for file in dist.files or []))
    marked -= unmarked
    cache.clear()
    return unmarked


def package_sources(config: pytest.Config) -> list[Path]:
    """The modules of the project's packages: every top-level folder with an ``__init__.py`` but the tests."""
    roots = (d for d in sorted(config.rootpath.iterdir()) if (d / "__init__.py").is_file() and d.name != "tests")
    return [path for root in roots for path in sorted(root.rglob("*.py"))]


def compile_packages(files: list[Path]) -> int:
    """Write the bytecode of each of ``files`` whose ``__pycache__`` entry is missing or stale, as an
    import would without ``PYTHONDONTWRITEBYTECODE``; how many it wrote."""
    import compileall
    import importlib.util

    written = 0
    for fn in files:
        before = _stamp(Path(importlib.util.cache_from_source(str(fn))))
        if compileall.compile_file(fn, quiet=2) and _stamp(Path(importlib.util.cache_from_source(str(fn)))) != before:
            written += 1
    return written


def _stamp(path: Path) -> float | None:
    return path.stat().st_mtime_ns if path.exists() else None


def cached(fn: Path) -> Path:
    """Where pytest keeps ``fn``'s rewritten code (``PYC_TAIL`` names the pytest version)."""
    from _pytest.assertion.rewrite import PYC_TAIL, get_cache_dir

    return get_cache_dir(fn) / (fn.name[:-3] + PYC_TAIL)


def prewarm(config: pytest.Config, files: list[Path] | None = None, sources: list[Path] | None = None) -> int:
    """Write the rewritten code of each of ``files`` (default: every file pytest rewrites here) and the
    bytecode of each of ``sources`` (default: the packages' modules) whose cache is missing or stale;
    how many rewritten files it wrote."""
    try:
        from _pytest.assertion import assertstate_key
        from _pytest.assertion.rewrite import _read_pyc, _rewrite_test, _write_pyc, get_cache_dir
    except ImportError:  # another pytest: its workers rewrite for themselves
        return 0
    if config.getoption("assertmode") != "rewrite" or assertstate_key not in config.stash:
        return 0
    state = config.stash[assertstate_key]
    todo = [fn for fn in (rewritten_files(config) if files is None else files) if _read_pyc(fn, cached(fn)) is None]
    sources = package_sources(config) if sources is None else sources

    def write(part: list[Path]) -> None:
        for fn in part:
            try:
                get_cache_dir(fn).mkdir(exist_ok=True)
                source_hash, code = _rewrite_test(fn, config)
                _write_pyc(state, code, source_hash, cached(fn))
            except Exception:  # a file that cannot be read or parsed: its worker reports it
                continue

    if hasattr(os, "fork"):
        child = os.fork()
        if child == 0:  # the second half, on the other core
            try:
                write(todo[1::2])
                compile_packages(sources[1::2])
            finally:
                os._exit(0)
        write(todo[0::2])
        compile_packages(sources[0::2])
        os.waitpid(child, 0)
    else:
        write(todo)
        compile_packages(sources)
    return sum(_read_pyc(fn, cached(fn)) is not None for fn in todo)
