"""The command table (``mibspec.cli.table``): the one place commands are registered, and the
lazy loading it allows: ``verify`` imports no other command's module."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from mibspec.cli import app
from mibspec.cli.table import COMMANDS, Command, Group

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "mibspec"
COMMAND_ENTRIES = [entry for entry in COMMANDS if isinstance(entry, Command)]

#: What the command line loads to run ``verify``: the entry point, the table, the lazy
#: groups, the option declarations, the shared helpers and verify's own module.
VERIFY_MODULES = {
    "mibspec.cli",
    "mibspec.cli._lazy",
    "mibspec.cli._options",
    "mibspec.cli._request",
    "mibspec.cli._support",
    "mibspec.cli.table",
    "mibspec.cli.verify",
}


def _callback(entry: Command) -> object:
    module, _, function = entry.target.partition(":")
    return getattr(importlib.import_module(module), function)


def test_names_are_unique_and_every_command_is_in_a_listed_group() -> None:
    names = [entry.name for entry in COMMANDS]
    assert len(names) == len(set(names))
    groups = {entry.name for entry in COMMANDS if isinstance(entry, Group)}
    for entry in COMMAND_ENTRIES:
        parent = entry.name.rpartition(" ")[0]
        assert not parent or parent in groups, entry.name
    assert all(any(c.name.startswith(f"{g} ") for c in COMMAND_ENTRIES) for g in groups)


@pytest.mark.parametrize("entry", COMMAND_ENTRIES, ids=lambda entry: entry.name)
def test_each_summary_is_the_first_paragraph_of_its_commands_help(entry: Command) -> None:
    doc = inspect.getdoc(_callback(entry)) or ""
    assert entry.summary.split() == doc.split("\n\n")[0].split()


def test_each_command_has_one_name() -> None:
    # no alias: two names for one command would be two names for one concept
    targets = [entry.target for entry in COMMAND_ENTRIES]
    assert len(COMMAND_ENTRIES) > 20
    assert len(targets) == len(set(targets)), sorted(t for t in targets if targets.count(t) > 1)


def test_the_application_is_exactly_the_table() -> None:
    def walk(command: object, prefix: str) -> list[str]:
        found = []
        for name, sub in getattr(command, "commands", {}).items():
            path = f"{prefix} {name}".strip()
            found.append(path)
            found.extend(walk(sub, path))
        return found

    assert walk(app, "") == [entry.name for entry in _tree_order()]


def _tree_order() -> list[Command | Group]:
    """The table's entries in depth-first order (a group, then its commands)."""
    ordered: list[Command | Group] = []
    for entry in COMMANDS:
        if " " not in entry.name:
            ordered.append(entry)
            ordered.extend(e for e in COMMANDS if e.name.startswith(f"{entry.name} "))
    return ordered


def _builds_a_command(call: ast.Call) -> str | None:
    """The name of what ``call`` uses to build or register a command, if it does."""
    func = call.func
    if isinstance(func, ast.Name) and func.id in ("build_command", "LazyGroup"):
        return func.id
    if isinstance(func, ast.Attribute) and func.attr == "add_command":
        return func.attr
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "click":
        return f"click.{func.attr}" if func.attr in ("Command", "Group", "command", "group") else None
    return None


def test_no_module_registers_a_command_outside_the_table() -> None:
    """Only the lazy groups turn a table entry into a command, and only the entry point builds
    the root group: nothing else builds a command or adds one to a group."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and (name := _builds_a_command(node)):
                found.add((path.relative_to(PACKAGE).as_posix(), name))
    assert found == {
        ("cli/_lazy.py", "build_command"),
        ("cli/_lazy.py", "LazyGroup"),  # a subgroup, built from its table entry
        ("cli/_lazy.py", "click.Command"),  # a throwaway, to shorten a summary as click does
        ("cli/__init__.py", "LazyGroup"),
    }


def _loaded_modules(*args: str) -> set[str]:
    code = (
        "import sys\n"
        f"sys.argv = ['mibspec', *{list(args)!r}]\n"
        "from mibspec.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=tempfile.gettempdir()
    )
    return set(done.stderr.split("\n")[-2].split())


def test_verify_imports_no_other_commands_module() -> None:
    report = str(REPO / "examples" / "circuit" / "report.json")
    loaded = _loaded_modules("verify", report, "--no-recompute")
    assert "mibspec.validator" in loaded  # it did verify
    assert {m for m in loaded if m.startswith("mibspec.cli")} == VERIFY_MODULES
    others = ("mibspec.importers", "mibspec.exporters", "mibspec.parity", "mibspec.reference_impl.scoring")
    assert not [m for m in loaded if m.startswith(others)]
    assert not loaded & {
        "mibspec.pages.leaderboard",
        "mibspec.pages.html",
        "mibspec.spec_tools.migrate",
        "mibspec.spec_tools.citation",
    }


def test_listing_the_commands_imports_none_of_them() -> None:
    loaded = _loaded_modules("--help")
    assert {m for m in loaded if m.startswith("mibspec.cli")} == VERIFY_MODULES - {
        "mibspec.cli.verify",
        "mibspec.cli._request",
    }


def test_the_command_line_runs_numpys_blas_on_one_thread() -> None:
    # set before numpy is imported, unless the environment already says how many threads
    code = (
        "import os, sys; from mibspec.cli import one_blas_thread; one_blas_thread(); "
        "print(os.environ.get('OPENBLAS_NUM_THREADS'), 'numpy' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.split() == ["1", "False"]
    env["OPENBLAS_NUM_THREADS"] = "3"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.split() == ["3", "False"]


def test_the_command_line_lets_idle_openmp_threads_sleep() -> None:
    # torch's threads spin between parallel regions by default; on busy cores that multiplied
    # the main job's CPU time (benchmarks/bench_steady.py); set before torch is imported,
    # unless the environment already chose a policy
    code = (
        "import os, sys; from mibspec.cli import one_blas_thread; one_blas_thread(); "
        "print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.split() == ["PASSIVE", "False"]
    env["OMP_WAIT_POLICY"] = "ACTIVE"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.split() == ["ACTIVE", "False"]
