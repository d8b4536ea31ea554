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


def cached(fn: Path) -> Path:
    """Where pytest keeps ``fn``'s rewritten code (``PYC_TAIL`` names the pytest version)."""
    from _pytest.assertion.rewrite import PYC_TAIL, get_cache_dir

    return get_cache_dir(fn) / (fn.name[:-3] + PYC_TAIL)


def prewarm(config: pytest.Config, files: list[Path] | None = None) -> int:
    """Write the rewritten code of each of ``files`` (default: every file pytest rewrites here) whose
    cache is missing or stale; how many it wrote."""
    try:
        from _pytest.assertion import assertstate_key
        from _pytest.assertion.rewrite import _read_pyc, _rewrite_test, _write_pyc, get_cache_dir
    except ImportError:  # another pytest: its workers rewrite for themselves
        return 0
    if config.getoption("assertmode") != "rewrite" or assertstate_key not in config.stash:
        return 0
    state = config.stash[assertstate_key]
    todo = [fn for fn in (rewritten_files(config) if files is None else files) if _read_pyc(fn, cached(fn)) is None]

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
            finally:
                os._exit(0)
        write(todo[0::2])
        os.waitpid(child, 0)
    else:
        write(todo)
    return sum(_read_pyc(fn, cached(fn)) is not None for fn in todo)
