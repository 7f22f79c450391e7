"""The examples in the package's docstrings run, and show what the code returns."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import mibspec

PACKAGE = Path(mibspec.__file__).resolve().parent


def _modules_with_examples() -> list[str]:
    """Every module of the installed package whose source holds a docstring example."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__main__.py" or ">>> " not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = _modules_with_examples()


def test_the_package_has_examples_to_run() -> None:
    # the search itself works: the package's own docstring has one
    assert "mibspec" in MODULES
    assert len(MODULES) >= 10


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, name) if t.examples]
    assert tests, f"{name}: no example found, though its source has one"
    for test in tests:
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples of {name} failed"
