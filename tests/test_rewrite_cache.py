"""The controller's rewritten test modules are the ones a worker would make, and pytest reads them back."""

from __future__ import annotations

from pathlib import Path

import pytest
from _pytest.assertion.rewrite import _read_pyc

from tests.rewrite_cache import cached, prewarm, rewritten_files


def test_a_prewarmed_module_is_read_back_and_explains_its_failing_assert(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    source = tmp_path / "test_sample.py"
    source.write_text("def test_sum():\n    total = 1 + 1\n    assert total == 3\n")

    assert prewarm(pytestconfig, [source, source.with_name("conftest.py")], []) == 1  # a missing file is skipped
    code = _read_pyc(source, cached(source))
    assert code is not None, "pytest does not accept the cached file"
    namespace: dict[str, object] = {}
    exec(code, namespace)
    with pytest.raises(AssertionError, match=r"assert 2 == 3"):  # rewritten: the values are explained
        namespace["test_sum"]()  # type: ignore[operator]
    assert prewarm(pytestconfig, [source], []) == 0  # cached, and valid while the source is unchanged

    source.write_text("def test_sum():\n    assert 1 + 1 == 2\n")
    assert _read_pyc(source, cached(source)) is None  # pytest checks the source's hash, not the file's age
    assert prewarm(pytestconfig, [source], []) == 1


def test_every_test_module_and_conftest_of_the_suite_is_prewarmed(pytestconfig: pytest.Config) -> None:
    found = {path.relative_to(pytestconfig.rootpath).as_posix() for path in rewritten_files(pytestconfig)}
    assert {"tests/conftest.py", "tests/browser/conftest.py", "tests/test_rewrite_cache.py"} <= found
    assert "tests/maya_tools/test_faults_live.py" in found and "tests/postgres.py" not in found


def test_the_libraries_of_blocked_plugins_are_imported_without_rewriting(pytestconfig: pytest.Config) -> None:
    """schemathesis and hypothesis are blocked plugins (pyproject's ``-p no:``): their modules load as
    plain libraries, while the test modules are still rewritten."""
    import _hypothesis_globals  # the hypothesis distribution's smallest module
    from _pytest.assertion.rewrite import AssertionRewritingHook

    assert pytestconfig.pluginmanager.is_blocked("hypothesispytest")
    assert pytestconfig.pluginmanager.is_blocked("schemathesis")
    assert _hypothesis_globals.__spec__ is not None
    assert not isinstance(_hypothesis_globals.__spec__.loader, AssertionRewritingHook)
    assert isinstance(__spec__.loader, AssertionRewritingHook)  # type: ignore[name-defined]


def test_the_packages_bytecode_is_written_once_and_read_back(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    """Under PYTHONDONTWRITEBYTECODE nothing else writes it: the controller compiles every package module."""
    import importlib.util
    import marshal

    from tests.rewrite_cache import compile_packages, package_sources

    source = tmp_path / "module.py"
    source.write_text("ANSWER = 42\n")
    prewarm(pytestconfig, [], [source])  # as the controller does, on its two processes
    data = Path(importlib.util.cache_from_source(str(source))).read_bytes()
    assert data[:4] == importlib.util.MAGIC_NUMBER  # this interpreter's bytecode, which an import reads
    namespace: dict[str, object] = {}
    exec(marshal.loads(data[16:]), namespace)
    assert namespace["ANSWER"] == 42
    assert compile_packages([source]) == 0  # up to date: not written again
    found = {path.relative_to(pytestconfig.rootpath).as_posix() for path in package_sources(pytestconfig)}
    assert {"maya_tools/server.py", "reference_backend/app.py", "backend_client/models.py"} <= found
    assert not any(name.startswith("tests/") for name in found)
