"""The package's layers and which way they depend, checked on the source with ``ast``.

Each package directly under ``mibspec`` sits in one layer and imports only packages of the
layers below it (:data:`LAYERS`)::

    core ← documents ← metrics ← reference_impl ← validator ← verification
         ← importers, exporters, pages, spec_tools ← submissions, parity ← cli ← mibspec

``core`` imports nothing else of mibspec; ``metrics`` (numpy) never imports torch; the
reference implementation never imports the validator (its recomputers receive what they need
from the recompute stage); validator rules reach the metrics and the reference implementation
through public names, and only when they run. No package imports another package's
underscore-named modules or names, modules import each other without cycles, and validating a
document never imports torch.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "mibspec"

#: The packages directly under mibspec, lowest layer first; a package imports only packages of
#: lower layers. The top modules (``mibspec/__init__.py``, the public facade over
#: ``verification``, and ``__main__``, over ``cli``) form "mibspec", the top layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),  # the standard library only: findings, spec constants, strict JSON, files
    ("documents",),  # the typed document models (pydantic) the schemas are generated from
    ("metrics",),  # metric functions and declarations as data (numpy, no torch)
    ("reference_impl",),  # model engines (torch), recomputation, scoring, datasets
    ("validator",),  # parse, schema stage, rules, recompute stage
    ("verification",),  # verify(): paths, grouping, receipts, reporters
    ("importers", "exporters", "pages", "spec_tools"),  # each verifies through verification
    ("submissions", "parity"),  # a MIB submission imported, then verified; runs against the public code
    ("cli",),
    ("mibspec",),
)

PACKAGES = tuple(name for layer in LAYERS for name in layer if name != "mibspec")
LAYER = {name: rank for rank, layer in enumerate(LAYERS) for name in layer}

#: Libraries that mibspec.metrics never imports, not even inside a function.
TORCH_STACK = ("torch", "transformers", "safetensors", "tokenizers", "captum")

#: (importing package, imported module) pairs allowed to cross a package boundary to an
#: underscore-named module or name, each with the reason.
UNDERSCORE_ALLOWED: set[tuple[str, str]] = set()


#: Importing modules allowed to use underscore-named modules or names of a package that is
#: neither theirs nor one of its ancestors (within one top-level package), with the reason.
PRIVATE_ALLOWED = {
    # The transformer behaviour patches the engine's own forward pass over its weights: it
    # shares the engine's forward, tensor ops and metric helpers rather than copying them.
    "mibspec.reference_impl.behaviour.transformer",
}


@dataclass(frozen=True)
class Import:
    importer: str  # the importing module's dotted name
    module: str  # the module the statement names (resolved when relative)
    name: str | None  # the imported name of a ``from`` import
    in_function: bool  # inside a function body (runs when called, not on import)
    type_checking: bool  # under ``if TYPE_CHECKING:`` (never runs)
    line: int

    @property
    def target(self) -> str:
        """The module this import loads: ``module.name`` when that is a module, else ``module``."""
        if self.name and f"{self.module}.{self.name}" in MODULES:
            return f"{self.module}.{self.name}"
        return self.module

    def __str__(self) -> str:
        what = f"from {self.module} import {self.name}" if self.name else f"import {self.module}"
        return f"{MODULES[self.importer].relative_to(SRC)}:{self.line}: {what}"


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _resolve(importer: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if _is_package(importer) else importer.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _imports(module: str) -> Iterator[Import]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))

    def walk(node: ast.AST, in_function: bool, type_checking: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            function = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            checking = isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)
            guarded = type_checking or checking
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(module, alias.name, None, function, guarded, child.lineno)
            elif isinstance(child, ast.ImportFrom):
                resolved = _resolve(module, child)
                for alias in child.names:
                    yield Import(module, resolved, alias.name, function, guarded, child.lineno)
            yield from walk(child, function, guarded)

    yield from walk(tree, False, False)


IMPORTS = [imp for module in MODULES for imp in _imports(module)]
INTERNAL = [imp for imp in IMPORTS if imp.module == "mibspec" or imp.module.startswith("mibspec.")]


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in PACKAGES else "mibspec"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_the_module_index_sees_the_package() -> None:
    # Guards the checks below against passing vacuously (a moved folder, a parser change).
    assert {"mibspec.core", "mibspec.validator", "mibspec.reference_impl.recompute"} <= set(MODULES)
    assert any(imp.target == "mibspec.core.findings" for imp in INTERNAL)
    assert any(imp.in_function for imp in INTERNAL)


def test_packages_import_only_lower_layers() -> None:
    assert set(PACKAGES) == {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()} - {"spec"}
    bad = [
        imp
        for imp in INTERNAL
        if _package(imp.importer) != _package(imp.target)
        and LAYER[_package(imp.importer)] <= LAYER[_package(imp.target)]
    ]
    assert not bad, "\n".join(map(str, bad))


def test_metrics_never_import_torch() -> None:
    # Not even inside a function: validation reaches these modules, and torch must not load.
    metrics = [imp for imp in IMPORTS if _package(imp.importer) == "metrics"]
    assert any(imp.module == "numpy" for imp in metrics)  # the walk sees the package
    bad = [imp for imp in metrics if imp.module.split(".")[0] in TORCH_STACK]
    assert not bad, "\n".join(map(str, bad))


def test_metrics_build_documents_only_when_asked() -> None:
    # pydantic (the document models) loads only inside the function that builds a document.
    bad = [
        imp
        for imp in INTERNAL
        if _package(imp.importer) == "metrics" and _package(imp.target) == "documents" and not imp.in_function
    ]
    assert not bad, "\n".join(map(str, bad))


def test_core_needs_no_third_party_package_at_import() -> None:
    stdlib = set(sys.stdlib_module_names)
    bad = [
        imp
        for imp in IMPORTS
        if _package(imp.importer) == "core"
        and not imp.in_function
        and imp.module.split(".")[0] not in stdlib | {"mibspec", ""}
    ]
    assert not bad, "\n".join(map(str, bad))


def test_recomputation_never_imports_a_rule() -> None:
    bad = [
        imp
        for imp in INTERNAL
        if imp.importer.startswith("mibspec.reference_impl.recompute")
        and imp.target.startswith("mibspec.validator.rules")
    ]
    assert not bad, "\n".join(map(str, bad))


def test_no_package_imports_another_packages_private_names() -> None:
    bad = []
    for imp in INTERNAL:
        here, there = _package(imp.importer), _package(imp.target)
        if here == there or (here, imp.target) in UNDERSCORE_ALLOWED:
            continue
        private_module = any(_private(part) for part in imp.target.split("."))
        private_name = imp.name is not None and imp.target == imp.module and _private(imp.name)
        if private_module or private_name:
            bad.append(imp)
    assert not bad, "\n".join(map(str, bad))


#: What validator rules import only when they run: the metrics and the reference implementation.
DEFERRED = ("mibspec.metrics", "mibspec.reference_impl")


def _deferred_metric_import(imp: Import) -> bool:
    """A rule importing the metrics or the reference implementation when it runs: a document then
    loads only the metric modules (and numpy) that its own rules use, which keeps start-up short."""
    return imp.importer.startswith("mibspec.validator.rules.") and imp.target.startswith(DEFERRED)


def test_validator_and_core_import_mibspec_at_module_level() -> None:
    # Their modules form no cycle, so nothing needs a deferred import for that; the reference
    # implementation (torch) is reached only through the recompute stage's track registry,
    # its metric modules only from inside the rules that use them.
    bad = [
        imp
        for imp in INTERNAL
        if _package(imp.importer) in ("core", "validator")
        and imp.in_function
        and not _deferred_metric_import(imp)
    ]
    assert not bad, "\n".join(map(str, bad))


def test_rules_import_the_reference_implementation_only_when_they_run() -> None:
    # Module-level imports would make every validation pay for every track's metric modules.
    bad = [
        imp
        for imp in INTERNAL
        if imp.importer.startswith("mibspec.validator.")
        and imp.target.startswith(DEFERRED)
        and not imp.in_function
        and not imp.type_checking
    ]
    assert not bad, "\n".join(map(str, bad))


def test_importing_the_validator_loads_no_metric_module_and_no_numpy() -> None:
    code = (
        "import sys\n"
        "import mibspec.cli, mibspec.validator\n"
        f"heavy = [m for m in sys.modules if m == 'numpy' or m.startswith({DEFERRED!r})]\n"
        "print(','.join(sorted(heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=tempfile.gettempdir()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def _owner(module: str) -> str:
    """The package a module belongs to (a package owns itself)."""
    return module if _is_package(module) else module.rsplit(".", 1)[0]


def test_private_names_are_used_only_in_their_package_and_below() -> None:
    bad = []
    for imp in INTERNAL:
        if imp.importer in PRIVATE_ALLOWED or imp.target not in MODULES:
            continue
        here = _owner(imp.importer)
        parts = imp.target.split(".")
        owners = [".".join(parts[:i]) for i, part in enumerate(parts) if _private(part)][:1]
        if imp.name is not None and imp.target == imp.module and _private(imp.name):
            owners.append(_owner(imp.module))
        if any(here != owner and not here.startswith(owner + ".") for owner in owners):
            bad.append(imp)
    assert not bad, "\n".join(map(str, bad))


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (a path that returns to its start), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycles_at_module_level() -> None:
    graph: dict[str, set[str]] = {}
    for imp in INTERNAL:
        if imp.in_function or imp.type_checking or imp.target not in MODULES or imp.target == imp.importer:
            continue
        # A package importing its own submodules is how a package exposes them, not a cycle
        # unless a submodule imports the package back, which the edge below records.
        graph.setdefault(imp.importer, set()).add(imp.target)
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])


VALIDATED_KINDS = ["report", "circuit", "featurizer", "causal_model", "counterfactual_dataset"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", VALIDATED_KINDS)
def test_validation_never_imports_torch(kind: str) -> None:
    cases = sorted((Path(__file__).resolve().parents[1] / "conformance" / "v1" / kind / "valid").iterdir())
    documents = [path for case in cases for path in case.glob("*.json") if path.name != "expected.json"]
    assert documents, kind
    code = (
        "import sys\n"
        "import mibspec.validator as v\n"
        f"paths = {[str(p) for p in documents]!r}\n"
        "result = v.verify_paths(paths, v.VerifyOptions(recompute=False))\n"
        # The rules ran on every document: they are what reaches the reference implementation.
        "assert result.documents and all(d.valid for d in result.documents), result.to_json()\n"
        "heavy = ('torch', 'transformers', 'tokenizers', 'safetensors', 'pydantic')\n"
        "print(','.join(sorted(m for m in heavy if m in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=tempfile.gettempdir()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


#: Most lines a function (decorators and docstring included) may span.
MAX_FUNCTION_LINES = 80

#: Functions still longer than MAX_FUNCTION_LINES, with the reason. The list only shrinks: a
#: function listed here that is now within the limit fails the test until it is removed.
LONG_FUNCTIONS = {
    "reference_impl/engine/_forward.py::_run": "hot path: the per-layer loop stays in one frame",
    "reference_impl/engine/_intervene.py::forward_sites": "hot path: the per-layer loop stays in one frame",
}


def _function_lengths() -> dict[str, int]:
    lengths: dict[str, int] = {}

    def walk(node: ast.AST, where: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                name = f"{where}::{prefix}{child.name}"
                lengths[name] = max(lengths.get(name, 0), (child.end_lineno or start) - start + 1)
                walk(child, where, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, where, f"{prefix}{child.name}.")
            else:
                walk(child, where, prefix)

    for path in MODULES.values():
        walk(ast.parse(path.read_text(encoding="utf-8")), path.relative_to(PACKAGE).as_posix(), "")
    return lengths


@pytest.mark.slow
def test_functions_are_short() -> None:
    lengths = _function_lengths()
    assert "reference_impl/recompute/circuit.py::_recompute" in lengths  # the walk sees the package
    too_long = {
        name: n for name, n in lengths.items() if n > MAX_FUNCTION_LINES and name not in LONG_FUNCTIONS
    }
    assert not too_long, f"over {MAX_FUNCTION_LINES} lines (split into named steps): {too_long}"
    fixed = sorted(name for name in LONG_FUNCTIONS if lengths.get(name, 0) <= MAX_FUNCTION_LINES)
    assert not fixed, f"within {MAX_FUNCTION_LINES} lines now (or gone): remove from LONG_FUNCTIONS: {fixed}"
