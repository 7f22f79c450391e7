"""The tests mirror the packages: ``tests/<package path>/test_<module>.py`` tests
``mibspec.<package path>.<module>``, checked here on the file tree.

A folder under ``tests/`` is a package of ``src/mibspec`` (``tests/reference_impl/engine`` is
``mibspec.reference_impl.engine``), a package of ``devtools/mibspec_dev`` under
``tests/devtools``, or one of the program-wide suites of :data:`PROGRAM_WIDE`. In a package's
folder, ``test_<name>.py`` names a module of the package (``<name>.py`` or ``_<name>.py``) or a
subpackage; ``test_<name>_<aspect>.py`` is one more file on the same module. Test modules
whose subject spans modules of their package are listed in :data:`SPANNING`, each with the
reason. Every other Python file in a package's folder is a ``conftest.py`` or an
underscore-named helper.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SRC = REPO / "src" / "mibspec"
DEVTOOLS = REPO / "devtools" / "mibspec_dev"

#: Folders of ``tests/`` that are not a package's: what each holds.
PROGRAM_WIDE = {
    "hardening": "soundness, hostile inputs, limits and the fuzzers' test runs, across every package",
    "fuzz": "the fuzzers that tests/hardening and the long runs drive (no tests of their own)",
    "parity": "mibspec against the public MIB code and pyvene, named by what each run compares",
    "benchmarks": "benchmarks/run_all.py and the results page it writes",
    "examples": "the bundled examples/ end to end: they verify, and their scripts reproduce them",
    "spec": "the spec/ and conformance/ folders: schemas, profiles, spec text, the suite's cases",
    "data": "files the tests read (other formats' schemas); no tests",
}

#: Test modules at the top of ``tests/``: program-wide, each about the whole repository.
TOP_LEVEL = {
    "test_architecture.py": "the layers and which way the packages depend",
    "test_layout.py": "this file: the tests mirror the packages",
    "test_doctests.py": "the examples in every docstring of the package",
    "test_docs_and_help.py": "what a new user reads: README, docs links, install hints, help",
    "test_packaging.py": "the wheel's contents and the import paths",
    "test_precommit.py": "the pre-commit hook, run by pre-commit",
}

#: Test modules in a package's folder whose subject spans modules of the package.
SPANNING = {
    "cli/test_cli.py": "the command line as a whole: exit codes and the output contract of every command",
    "core/test_core.py": "the small shared modules: file hashes, pointers, tolerances, progress, constants",
    "documents/test_document_dump.py": "dump() and document_bytes() of the package, over every kind",
    "importers/test_hostile_sources.py": "hostile inputs to every importer and exporter",
    "reference_impl/datasets/test_counterfactuals.py": "every task generator's counterfactuals",
}


def _source(folder: Path) -> Path | None:
    """The package folder a test folder mirrors, or ``None`` for a program-wide suite."""
    parts = folder.relative_to(TESTS).parts
    if parts[0] in PROGRAM_WIDE:
        return None
    if parts[0] == "devtools":
        return DEVTOOLS.joinpath(*parts[1:])
    return SRC.joinpath(*parts)


def _package_folders() -> list[tuple[Path, Path]]:
    """Every test folder of a package, with the package folder it mirrors."""
    folders = [p for p in sorted(TESTS.rglob("*")) if p.is_dir() and "__pycache__" not in p.parts]
    return [(folder, source) for folder in folders if (source := _source(folder)) is not None]


def _subjects(package: Path) -> set[str]:
    """What a test module in the mirror of ``package`` may be named after."""
    modules = {p.stem.removeprefix("_") for p in package.glob("*.py") if not p.stem.startswith("__")}
    return modules | {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}


def _names_a_subject(test: Path, subjects: set[str]) -> bool:
    words = test.stem.removeprefix("test_").split("_")
    return any("_".join(words[:n]) in subjects for n in range(1, len(words) + 1))


def test_every_test_folder_mirrors_a_package() -> None:
    stray = [
        f"tests/{folder.relative_to(TESTS)}"
        for folder, source in _package_folders()
        if not (source / "__init__.py").is_file()
    ]
    assert stray == [], "not a package of src/mibspec or devtools/mibspec_dev, nor in PROGRAM_WIDE"


def test_every_test_module_names_its_subject() -> None:
    unnamed = []
    for folder, source in _package_folders():
        subjects = _subjects(source) if source.is_dir() else set()
        for test in sorted(folder.glob("test_*.py")):
            relative = test.relative_to(TESTS).as_posix()
            if relative not in SPANNING and not _names_a_subject(test, subjects):
                unnamed.append(relative)
    assert unnamed == [], "name no module or subpackage of their package (rename, or add to SPANNING)"


def test_spanning_modules_exist_and_name_no_module() -> None:
    for relative in SPANNING:
        test = TESTS / relative
        source = _source(test.parent)
        assert test.is_file(), relative
        assert source is not None, relative
        assert not _names_a_subject(test, _subjects(source)), f"{relative} names a module: it spans nothing"


def test_other_files_in_package_folders_are_conftests_or_helpers() -> None:
    others = [
        path.relative_to(TESTS).as_posix()
        for folder, _ in _package_folders()
        for path in sorted(folder.iterdir())
        if path.is_file() and not (path.name.startswith(("test_", "_")) or path.name == "conftest.py")
    ]
    assert others == []


def test_the_top_of_tests_holds_only_declared_suites() -> None:
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert set(PROGRAM_WIDE) <= folders
    assert {p.name for p in TESTS.glob("test_*.py")} == set(TOP_LEVEL)


def test_the_tests_are_modules_not_packages() -> None:
    """``--import-mode=importlib`` lets test modules share a name (tests/metrics/test_circuit.py
    and tests/validator/rules/test_circuit.py); an ``__init__.py`` would make them packages."""
    assert "--import-mode=importlib" in (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert sorted(TESTS.rglob("__init__.py")) == []


def test_the_development_guide_names_every_program_wide_folder() -> None:
    guide = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    assert [name for name in PROGRAM_WIDE if f"`tests/{name}/`" not in guide] == []
