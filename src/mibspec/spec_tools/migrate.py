"""``mibspec migrate``: move documents from one spec version to a later one.

A migration is a chain of steps, each a pure function from a document of spec version
``from_version`` to a document of version ``to_version`` (a dict to a new dict; the
input is never modified). A :class:`MigrationRegistry` holds the steps in order, at
most one leaving each version, each going to a later version, so the path between two
versions is unique. :data:`REGISTRY` is the registry of the spec's published versions:
1.0 → 1.1 (:func:`migrate_1_0_to_1_1`) and 1.1 → 1.2 (:func:`migrate_1_1_to_1_2`).

Files are written atomically (a temporary file in the destination's folder, then
``os.replace``), and the input file is replaced only when asked (``in_place=True``).

A file is verified before it is migrated (parse, schema and rules, with the documents it
references; SPEC.md S-7): migrating must never turn a document that does not verify into
one that does (a 1.0 report declaring a ``rounding``, which 1.0 refuses, would verify as
1.1 with its claims widened by it). An input that does not verify is refused
(:class:`InvalidInputError`), unless ``keep_invalid`` asks to carry on: the output then
records the input's findings in ``extensions["mibspec:migration"]``, and a document
carrying them is not conformant (C127).

Migrating a document changes its bytes: a report that references it by SHA-256 must be
updated (migrate the report too and re-hash, e.g. by regenerating it).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mibspec.core.integers import parse_int

__all__ = [
    "REGISTRY",
    "InvalidInputError",
    "MigrationError",
    "MigrationRegistry",
    "MigrationResult",
    "MigrationStep",
    "UnreadableDocumentError",
    "migrate_1_0_to_1_1",
    "migrate_document",
    "migrate_file",
    "version_key",
    "write_json_atomic",
]

Document = dict[str, Any]


class MigrationError(ValueError):
    """A document cannot be migrated as asked (no path, a step broke its contract, ...)."""


class UnreadableDocumentError(ValueError):
    """The input is not a JSON object with a version: ``findings`` say why (codes, pointers)."""

    def __init__(self, path: str, findings: list[Any]) -> None:
        self.path = path
        self.findings = findings
        super().__init__(f"{path}: " + "; ".join(f"{f.code} {f.message}" for f in findings))


class InvalidInputError(ValueError):
    """The input does not verify: ``findings`` are its error-level findings (and those of the
    documents it references), each with ``document``, the path of the document it is in."""

    def __init__(self, path: str, findings: list[tuple[str, Any]]) -> None:
        self.path = path
        self.findings = findings
        codes = sorted({finding.code for _, finding in findings})
        super().__init__(f"{path}: does not verify ({', '.join(codes)}); nothing was migrated")


def version_key(version: str) -> tuple[int, int]:
    """``"MAJOR.MINOR"`` as a tuple of integers, for ordering.

    Raises:
        ValueError: ``version`` is not ``MAJOR.MINOR`` with non-negative integers.
    """
    parts = version.split(".") if isinstance(version, str) else []
    numbers = [n for n in map(parse_int, parts) if n is not None]
    if len(parts) != 2 or len(numbers) != 2:
        raise ValueError(f"version must be 'MAJOR.MINOR'; got {version!r}")
    return numbers[0], numbers[1]


@dataclass(frozen=True)
class MigrationStep:
    """One step: ``apply`` turns a ``from_version`` document into a ``to_version`` one.

    ``apply`` must be pure: it returns a new dict whose ``spec_version`` is
    ``to_version`` (the registry passes it a deep copy and checks the version).
    """

    from_version: str
    to_version: str
    apply: Callable[[Document], Document]
    description: str

    def __post_init__(self) -> None:
        if version_key(self.to_version) <= version_key(self.from_version):
            raise ValueError(
                f"to_version must be later than from_version ({self.from_version}); got {self.to_version}"
            )


@dataclass(frozen=True)
class MigrationResult:
    """What a migration did: the document, the steps applied (empty when already current), and
    the input's error findings carried into the output (``keep_invalid``; empty otherwise)."""

    document: Document
    from_version: str
    to_version: str
    steps: tuple[MigrationStep, ...]
    carried: tuple[tuple[str, Any], ...] = ()

    @property
    def already_current(self) -> bool:
        return not self.steps


class MigrationRegistry:
    """Migration steps in order of their source version, at most one leaving each version."""

    def __init__(self, steps: Iterable[MigrationStep] = ()) -> None:
        self._steps: dict[str, MigrationStep] = {}
        for step in steps:
            self.register(step)

    def register(self, step: MigrationStep) -> None:
        """Add a step.

        Raises:
            ValueError: a step already leaves ``step.from_version``.
        """
        if step.from_version in self._steps:
            raise ValueError(
                f"step must leave a version no other step leaves; {step.from_version} already migrates "
                f"to {self._steps[step.from_version].to_version}"
            )
        self._steps[step.from_version] = step

    @property
    def steps(self) -> list[MigrationStep]:
        """Every step, by source version."""
        return [self._steps[v] for v in sorted(self._steps, key=version_key)]

    def versions(self) -> set[str]:
        """Every version a step leaves or reaches."""
        return {v for step in self._steps.values() for v in (step.from_version, step.to_version)}

    def path(self, from_version: str, to_version: str) -> list[MigrationStep]:
        """The steps from ``from_version`` to ``to_version`` (empty when they are equal).

        Raises:
            MigrationError: no chain of steps leads from one to the other.
        """
        steps: list[MigrationStep] = []
        current = from_version
        while current != to_version:
            step = self._steps.get(current)
            if step is None or version_key(step.to_version) > version_key(to_version):
                raise MigrationError(f"no migration from spec {from_version} to spec {to_version}")
            steps.append(step)
            current = step.to_version
        return steps


def _renamed(mapping: Document, old: str, new: str) -> Document:
    """``mapping`` with the key ``old`` renamed ``new``, in the same position."""
    return {new if key == old else key: value for key, value in mapping.items()}


def migrate_1_0_to_1_1(document: Document) -> Document:
    """Spec 1.0 → 1.1: the version, and a causal-variable report's ``highest`` is ``best``.

    Everything 1.1 adds (declared ``rounding``) is optional, so nothing else changes.
    Documents of every kind move to 1.1; their bytes change, so a report referencing
    one by SHA-256 needs its artifact entry re-hashed.
    """
    migrated = dict(document)
    migrated["spec_version"] = "1.1"
    claims = migrated.get("claims")
    if (
        migrated.get("kind") == "report"
        and migrated.get("track") == "causal_variable"
        and isinstance(claims, dict)
    ):
        variables = claims.get("variables")
        if isinstance(variables, list):
            migrated["claims"] = {
                **claims,
                "variables": [
                    _renamed(v, "highest", "best") if isinstance(v, dict) and "best" not in v else v
                    for v in variables
                ],
            }
    return migrated


def migrate_1_1_to_1_2(document: Document) -> Document:
    """Spec 1.1 → 1.2: the version only. What 1.2 adds (a causal-variable unit's ``joint_sites``)
    is optional, and a 1.1 document cannot hold it."""
    migrated = dict(document)
    migrated["spec_version"] = "1.2"
    return migrated


#: The migrations between the spec's published versions.
REGISTRY = MigrationRegistry(
    [
        MigrationStep(
            "1.0",
            "1.1",
            migrate_1_0_to_1_1,
            "declared rounding (optional); a causal-variable variable's `highest` becomes `best`",
        ),
        MigrationStep(
            "1.1",
            "1.2",
            migrate_1_1_to_1_2,
            "joint causal-variable units (optional `joint_sites`); nothing else changes",
        ),
    ]
)


def migrate_document(
    document: Document, to_version: str | None = None, *, registry: MigrationRegistry = REGISTRY
) -> MigrationResult:
    """Migrate a document (a dict) to ``to_version`` (default: the current spec version).

    The dict is not verified (it has no folder for its artifacts): :func:`migrate_file`
    verifies a file before it migrates it.

    Args:
        document: the document; never modified.
        to_version: the target spec version.
        registry: the steps to use (tests inject their own).

    Raises:
        MigrationError: the document has no string ``spec_version``, no path leads to the
            target, or a step did not return a dict of its ``to_version``.
    """
    from mibspec.verification.api import SPEC_VERSION

    target = SPEC_VERSION if to_version is None else to_version
    source = document.get("spec_version")
    if not isinstance(source, str):
        raise MigrationError(f'the document must have a string "spec_version"; got {source!r}')
    current: Document = document
    steps = registry.path(source, target)
    for step in steps:
        migrated = step.apply(copy.deepcopy(current))
        if not isinstance(migrated, dict) or migrated.get("spec_version") != step.to_version:
            found = migrated.get("spec_version") if isinstance(migrated, dict) else type(migrated).__name__
            raise MigrationError(
                f"the step {step.from_version} → {step.to_version} must return a document of spec "
                f"{step.to_version}; got {found!r}"
            )
        current = migrated
    return MigrationResult(
        document=copy.deepcopy(current) if not steps else current,
        from_version=source,
        to_version=target,
        steps=tuple(steps),
    )


def write_json_atomic(path: str | os.PathLike[str], document: Any, *, mode_from: Path | None = None) -> None:
    """Write ``document`` as indented UTF-8 JSON atomically (see :func:`mibspec.core.outputs.write_atomic`).

    Either the whole new file is in place or the old one is untouched.

    Args:
        path: the destination.
        document: any JSON value.
        mode_from: copy this file's permission bits onto the new file.
    """
    from mibspec.core.outputs import write_atomic

    write_atomic(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n", mode_from=mode_from)


def migrate_file(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str] | None = None,
    *,
    to_version: str | None = None,
    in_place: bool = False,
    registry: MigrationRegistry = REGISTRY,
    keep_invalid: bool = False,
) -> MigrationResult:
    """Migrate the document in ``source`` and write it to ``destination`` (or over ``source``).

    Nothing is written when the document is already at the target version. The file is
    verified first (without recomputation, with the documents it references), under the
    version it declares when this implementation knows it (a caller's own steps may lead
    from versions it does not).

    Args:
        source: the document file (read strictly, as ``mibspec verify`` reads it).
        destination: where to write the migrated document; must not be ``source``, a file
            it declares (an artifact, a referenced document), or a link to either.
        to_version: the target spec version (default: the current one).
        in_place: replace ``source`` itself (then ``destination`` must be omitted).
        registry: the steps to use.
        keep_invalid: migrate an input that does not verify; the output records its findings
            (``extensions["mibspec:migration"]``) and does not verify either (C127).

    Raises:
        ValueError: neither or both of ``destination`` and ``in_place``, or ``destination``
            is the input file or one it declares (:class:`~mibspec.core.outputs.OutputPathError`).
        FileNotFoundError: ``source`` does not exist.
        UnreadableDocumentError: the file is not a JSON object with a string ``spec_version``.
        InvalidInputError: the file does not verify (and ``keep_invalid`` is not set).
        MigrationError: see :func:`migrate_document`.
    """
    from mibspec.core.outputs import Inputs, input_files
    from mibspec.validator import Stage, StageStatus, VerifyOptions, load_json_file, verify_paths

    src = Path(source)
    if in_place and destination is not None:
        raise ValueError("destination must be omitted with in_place=True; got both")
    if not in_place and destination is None:
        raise ValueError("destination is required unless in_place=True; got neither")
    if not src.is_file():
        raise FileNotFoundError(f"{source}: no such file")
    dst = src if in_place else Path(destination)  # type: ignore[arg-type]
    if not in_place:
        Inputs([src]).refuse(dst, "destination", hint="the input is replaced only in place (--in-place)")
        # nor over a file the document declares (an artifact, a referenced document)
        input_files([src]).refuse(dst, "destination")
    parsed = load_json_file(src)
    if (
        parsed.problems
        or not isinstance(parsed.data, dict)
        or not isinstance(parsed.data.get("spec_version"), str)
    ):
        # The verifier's parse and header checks say what is wrong, with codes and positions.
        check = verify_paths([src], VerifyOptions(recompute=False, follow_references=False))
        doc = check.documents[0]
        findings = [f for f in doc.findings if f.code[0] == "P" or f.code in ("S101", "S102")]
        if doc.stages[Stage.PARSE][0] is StageStatus.PASSED and not findings:
            findings = doc.findings[:1]
        raise UnreadableDocumentError(str(source), findings)
    result = migrate_document(parsed.data, to_version, registry=registry)
    if result.already_current:
        return result
    carried = _input_errors(src, result.from_version)
    if carried and not keep_invalid:
        raise InvalidInputError(str(source), carried)
    if carried:
        result = dataclasses.replace(
            result, document=_with_findings(result.document, result, carried), carried=tuple(carried)
        )
    dst.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(dst, result.document, mode_from=src if in_place else None)
    return result


def _input_errors(source: Path, version: str) -> list[tuple[str, Any]]:
    """The error findings of ``source`` and the documents it references, each with its
    document's path: verified without recomputation, under its own version (none for a
    version this implementation does not know)."""
    from mibspec.core.spec import KNOWN_SPEC_VERSIONS
    from mibspec.validator import VerifyOptions, verify_paths

    if version not in KNOWN_SPEC_VERSIONS:
        return []
    checked = verify_paths([source], VerifyOptions(recompute=False))
    found = [(doc.path, finding) for doc in checked.documents for finding in doc.errors]
    if not found and not checked.valid:  # a stage failed without an error finding
        found = [(doc.path, finding) for doc in checked.documents for finding in doc.findings]
    return found


def _with_findings(document: Document, result: MigrationResult, carried: list[tuple[str, Any]]) -> Document:
    """``document`` with the input's findings recorded where C127 finds them (S-7)."""
    from mibspec.core.spec import MIGRATION_EXTENSION

    extensions = document.get("extensions")
    record = {
        "from": result.from_version,
        "to": result.to_version,
        "input_findings": [
            {"document": path, "code": f.code, "pointer": f.pointer, "message": f.message}
            for path, f in carried
        ],
    }
    merged = {**(extensions if isinstance(extensions, dict) else {}), MIGRATION_EXTENSION: record}
    return {**document, "extensions": merged}
