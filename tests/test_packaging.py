"""Packaging: the spec ships inside the package, and names resolve as documented."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import mibspec
from mibspec.core.spec import spec_dir

REPO = Path(__file__).resolve().parents[1]


def test_subpackages_live_under_the_mibspec_namespace() -> None:
    assert importlib.util.find_spec("mibspec.validator") is not None
    assert importlib.util.find_spec("mibspec.reference_impl") is not None
    # The folders are the import paths: no top-level module of another name is installed.
    for name in ("validator", "reference_impl"):
        assert importlib.util.find_spec(name) is None, name


def test_folders_are_import_paths() -> None:
    """Every package folder under src/ is the dotted name it is imported as."""
    src = REPO / "src"
    for init in sorted(src.rglob("__init__.py")):
        dotted = ".".join(init.parent.relative_to(src).parts)
        spec = importlib.util.find_spec(dotted)
        assert spec is not None, dotted
        assert Path(spec.origin or "").name == "__init__.py", dotted
        assert Path(spec.origin or "").parent.relative_to(Path(mibspec.__file__).parent) == (
            init.parent.relative_to(src / "mibspec")
        ), dotted


def test_spec_data_is_found() -> None:
    assert (spec_dir() / "rules.json").is_file()
    assert (spec_dir() / "SPEC.md").is_file()
    assert (spec_dir() / "profiles" / "default.json").is_file()


def test_installed_package_carries_its_own_spec_files() -> None:
    """In CI the package is installed non-editable; the spec must come from inside it."""
    if os.environ.get("MIBSPEC_REQUIRE_INSTALLED") != "1":
        # Development checkouts (editable installs) read spec/ beside the package; that
        # layout is exercised by every other test. CI sets the variable and checks this one.
        assert spec_dir().parent.parent in (Path(mibspec.__file__).parent, REPO)
        return
    package = Path(mibspec.__file__).resolve().parent
    assert package != REPO / "src" / "mibspec", (
        f"tests imported the source tree, not the installed package: {package}"
    )
    assert "site-packages" in package.parts
    assert spec_dir().resolve().is_relative_to(package)


def test_developer_tools_are_not_part_of_the_package() -> None:
    """Training of the tiny models and the tree comparison live in devtools/, outside the wheel."""
    import mibspec_dev

    assert Path(mibspec_dev.__file__).resolve().parent == REPO / "devtools" / "mibspec_dev"
    for name in ("mibspec.reference_impl.training", "mibspec._compare_trees", "mibspec.compare_trees"):
        assert importlib.util.find_spec(name) is None, name
