"""The verification pipeline: parse → schema → rules → recompute.

Every stage records a status. A stage that did not run is ``not_run`` or
``skipped`` (with the reason), never ``passed``; a document is valid only when
no stage failed and no error-level finding was reported.
"""

from __future__ import annotations

import enum
import itertools
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mibspec._resources import KNOWN_SPEC_VERSIONS
from mibspec._version import __version__

from ._catalogue import Catalogue, catalogue
from ._findings import Finding, Severity
from ._parse import DEFAULT_LIMITS, PARSE_CODES, Limits, ParsedDocument, load_json_file

__all__ = [
    "DocumentResult",
    "InternalError",
    "RuleContext",
    "Stage",
    "StageStatus",
    "VerificationResult",
    "VerifyOptions",
    "record_internal_error",
    "verify_paths",
]

KNOWN_KINDS = (
    "report",
    "circuit",
    "featurizer",
    "counterfactual_dataset",
    "causal_model",
    "shortcut_dataset",
    "leaderboard",
)

_PARSE_CODES = PARSE_CODES  # the name the importers use


class InternalError(RuntimeError):
    """A defect in mibspec itself (exit code 3), never a property of the input."""


class Stage(str, enum.Enum):
    PARSE = "parse"
    SCHEMA = "schema"
    RULES = "rules"
    RECOMPUTE = "recompute"


class StageStatus(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    NOT_RUN = "not_run"


#: The recompute stage's detail when the caller asked for no recomputation.
RECOMPUTE_NOT_REQUESTED = "not requested"


@dataclass(frozen=True)
class VerifyOptions:
    """Options of one verification run.

    Attributes:
        recompute: run the recompute stage (needs the ``recompute`` extra).
        profile: check every report under this profile instead of the one it declares.
        limits: parse limits per document.
        follow_references: also verify documents referenced as artifacts.
        model_roots: extra folders in which local model paths are looked up.
        progress: where the recompute stage reports progress (``None``: nowhere).
        select: report only codes starting with one of these prefixes (empty: every code).
        ignore: do not report codes starting with one of these prefixes. Rules-stage
            codes filtered out this way are treated like a profile's ``off``: they do not
            fail the rules stage, so recomputation still runs. Other stages' findings are
            only hidden by the reporters; a stage that failed still fails its document.
    """

    recompute: bool = True
    profile: str | None = None
    limits: Limits = DEFAULT_LIMITS
    follow_references: bool = True
    model_roots: tuple[Path, ...] = ()
    progress: Any = field(default=None, compare=False)
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()

    def reports(self, code: str) -> bool:
        """Whether ``code`` passes the ``select`` / ``ignore`` prefix filters."""
        if self.select and not code.startswith(self.select):
            return False
        return not code.startswith(self.ignore) if self.ignore else True


@dataclass
class DocumentResult:
    """Verdict and findings for one document."""

    path: str
    kind: str | None = None
    spec_version: str | None = None
    findings: list[Finding] = field(default_factory=list)
    stages: dict[Stage, tuple[StageStatus, str | None]] = field(
        default_factory=lambda: dict.fromkeys(Stage, (StageStatus.NOT_RUN, None))
    )
    referenced_by: str | None = None
    #: The recompute stage's claimed-vs-recomputed comparisons (``Comparison`` objects).
    comparisons: list[Any] = field(default_factory=list)
    #: The model files recomputation used (``ModelFile`` objects), for the receipt.
    model_files: list[Any] = field(default_factory=list)
    #: Set when mibspec itself failed on this document (see :func:`record_internal_error`).
    internal_error: str | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.WARNING]

    @property
    def valid(self) -> bool:
        failed = any(status is StageStatus.FAILED for status, _ in self.stages.values())
        return not failed and not self.errors

    def set_stage(self, stage: Stage, status: StageStatus, detail: str | None = None) -> None:
        self.stages[stage] = (status, detail)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "valid": self.valid,
            "findings": [f.to_json() for f in self.findings],
            "stages": [
                {"name": stage.value, "status": status.value, **({"detail": detail} if detail else {})}
                for stage, (status, detail) in self.stages.items()
            ],
            **({"referenced_by": self.referenced_by} if self.referenced_by else {}),
            **({"recomputed": [c.to_json() for c in self.comparisons]} if self.comparisons else {}),
        }


@dataclass
class VerificationResult:
    """The outcome of verifying one or more paths (and the documents they reference)."""

    documents: list[DocumentResult]
    spec_version: str = "1.0"
    profile: str | None = None

    @property
    def valid(self) -> bool:
        return bool(self.documents) and all(doc.valid for doc in self.documents)

    @property
    def findings(self) -> list[Finding]:
        return [finding for doc in self.documents for finding in doc.findings]

    @property
    def internal_errors(self) -> list[DocumentResult]:
        """Documents on which mibspec itself failed (exit code 3); the others were verified."""
        return [doc for doc in self.documents if doc.internal_error is not None]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "valid": self.valid,
            "spec_version": self.spec_version,
            "tool": {"name": "mibspec", "version": __version__},
        }
        if self.profile:
            out["profile"] = self.profile
        out["documents"] = [doc.to_json() for doc in self.documents]
        return out


class RuleContext:
    """What a rule sees: the document, where it lives, the profile, and a finding factory."""

    def __init__(
        self,
        *,
        path: Path,
        data: dict[str, Any],
        kind: str,
        spec_version: str,
        profile: Any,
        options: VerifyOptions,
        cat: Catalogue,
    ) -> None:
        self.path = path
        self.folder = path.parent
        self.data = data
        self.kind = kind
        self.spec_version = spec_version
        self.profile = profile
        self.options = options
        self.catalogue = cat
        #: The compiled JSON Schema validator of the document's kind.
        from ._schema_stage import schema_for

        self.schema = schema_for(kind, spec_version)
        #: Filled by the artifact rule: artifact id → entry, for rules that read sidecars.
        self.artifacts: dict[str, dict[str, Any]] = {}
        #: Artifact ids whose file failed an integrity check (later rules skip them).
        self.broken_artifacts: set[str] = set()
        #: Filled by recomputation: the model files it used (``ModelFile``: resolved path,
        #: SHA-256 and size of the bytes used), listed by the receipt.
        self.model_files: list[Any] = []
        #: Findings recomputation reports besides its result (R106), even when it fails later.
        self.recompute_findings: list[Finding] = []

    def finding(
        self,
        code: str,
        pointer: str = "",
        /,
        *,
        hint: str | None = None,
        data: dict[str, Any] | None = None,
        **params: Any,
    ) -> Finding:
        """Build a finding for ``code`` with the catalogue's message and severity."""
        return make_finding(self.catalogue, self.profile, code, pointer, hint=hint, data=data, **params)


def make_finding(
    cat: Catalogue,
    profile: Any,
    code: str,
    pointer: str = "",
    /,
    *,
    hint: str | None = None,
    data: dict[str, Any] | None = None,
    **params: Any,
) -> Finding:
    try:
        info = cat.by_code[code]
    except KeyError as exc:
        raise InternalError(f"rule code {code} is not in the catalogue") from exc
    severity = info.severity
    override = getattr(profile, "severity", {}).get(code) if profile is not None else None
    if override and override != "off":
        severity = Severity(override)
    return Finding(
        code=code,
        severity=severity,
        message=info.format(params),
        pointer=pointer,
        hint=hint,
        data=data or {},
    )


def _suppressed(profile: Any, code: str, options: VerifyOptions | None = None) -> bool:
    if options is not None and not options.reports(code):
        return True
    return profile is not None and getattr(profile, "severity", {}).get(code) == "off"


# --- the pipeline ---------------------------------------------------------------------------


def verify_paths(paths: Iterable[str | os.PathLike[str]], options: VerifyOptions) -> VerificationResult:
    """Verify each path (a document file) and every document it references.

    Raises:
        FileNotFoundError / OSError: a path given by the caller cannot be read (usage error).
    """
    runner = _Runner(options)
    for path in paths:
        runner.verify_file(Path(path), display=_printable(str(path)))
    return VerificationResult(documents=runner.results, profile=options.profile)


def _printable(path: str) -> str:
    """A path as shown in findings: bytes of a file name that are not UTF-8 (decoded by Python
    as lone surrogates) become U+FFFD, so every output format stays valid UTF-8."""
    return re.sub("[\ud800-\udfff]", "\ufffd", path)


class _Runner:
    MAX_REFERENCE_DEPTH = 8

    def __init__(self, options: VerifyOptions) -> None:
        self.options = options
        self.results: list[DocumentResult] = []
        self.seen: dict[Path, DocumentResult] = {}

    def verify_file(
        self,
        path: Path,
        *,
        display: str,
        referenced_by: str | None = None,
        depth: int = 0,
    ) -> DocumentResult:
        resolved = path.resolve()
        if resolved in self.seen:
            return self.seen[resolved]
        if not path.is_file():
            raise FileNotFoundError(f"{display}: no such file")
        result = DocumentResult(path=display, referenced_by=referenced_by)
        self.seen[resolved] = result
        self.results.append(result)
        cat = catalogue("1.0")
        parsed = load_json_file(path, self.options.limits)
        try:
            self._run(result, parsed, path, cat, depth)
        except Exception as exc:  # a defect of mibspec on this document; the others still run
            record_internal_error(result, exc)
        finally:
            _explain_not_run(result)
            _locate(result, parsed)
        return result

    def _run(
        self, result: DocumentResult, parsed: ParsedDocument, path: Path, cat: Catalogue, depth: int
    ) -> None:
        # Stage 1: parse.
        if parsed.problems:
            for problem in parsed.problems:
                finding = make_finding(
                    cat,
                    None,
                    _PARSE_CODES[problem.symbol],
                    problem.pointer,
                    hint=problem.hint,
                    detail=problem.message,
                )
                line, column = parsed.position_of(problem.offset)
                result.findings.append(finding.located(line, column))
            kept = len(parsed.problems)
            result.set_stage(
                Stage.PARSE, StageStatus.FAILED, _truncated(kept + 1, kept) if parsed.more_problems else None
            )
            return
        data = parsed.data
        if not isinstance(data, dict):
            result.findings.append(make_finding(cat, None, "P108", "", detail=type(data).__name__))
            result.set_stage(Stage.PARSE, StageStatus.FAILED)
            return
        result.set_stage(Stage.PARSE, StageStatus.PASSED)

        # Stage 2: version, kind, profile, schema.
        from ._schema_stage import check_schema, dispatch

        header = list(dispatch(data, cat))
        result.kind = data.get("kind") if isinstance(data.get("kind"), str) else None
        version = data.get("spec_version")
        known = isinstance(version, str) and version in KNOWN_SPEC_VERSIONS  # a dict is unhashable
        result.spec_version = version if known else None
        if header:
            result.findings.extend(header)
            result.set_stage(Stage.SCHEMA, StageStatus.FAILED, "version or kind not recognised")
            return
        if result.kind is None or result.spec_version is None:  # dispatch() reported it
            raise InternalError("dispatch passed a document without a known kind and version")
        profile, profile_findings = self._profile(data, result.kind, cat)
        limit = self.options.limits.max_findings
        schema_findings = [
            *profile_findings,
            *itertools.islice(check_schema(data, result.kind, result.spec_version, cat), limit + 1),
        ]
        if schema_findings:
            result.findings.extend(schema_findings[:limit])
            result.set_stage(Stage.SCHEMA, StageStatus.FAILED, _truncated(len(schema_findings), limit))
            result.set_stage(Stage.RULES, StageStatus.NOT_RUN, "the schema stage failed")
            return
        result.set_stage(Stage.SCHEMA, StageStatus.PASSED)

        # Stage 3: rules.
        from .rules import run_rules

        ctx = RuleContext(
            path=path,
            data=data,
            kind=result.kind,
            spec_version=result.spec_version,
            profile=profile,
            options=self.options,
            cat=cat,
        )
        from ._annotations import normalize_numbers

        normalize_numbers(ctx.schema, data)  # 1.0 where an integer is due becomes 1 (see there)
        # The rules run first: they fill ctx.artifacts, which the references walk reads.
        rule_findings = [*run_rules(ctx), *self._references(ctx, result, depth)]
        rule_findings = [f for f in rule_findings if not _suppressed(profile, f.code, self.options)]
        result.findings.extend(rule_findings[:limit])
        rule_errors = any(f.severity is Severity.ERROR for f in rule_findings)
        result.set_stage(
            Stage.RULES,
            StageStatus.FAILED if rule_errors else StageStatus.PASSED,
            _truncated(len(rule_findings), limit),
        )

        # Stage 4: recompute (reports only).
        if result.kind != "report":
            result.set_stage(Stage.RECOMPUTE, StageStatus.SKIPPED, "only reports carry claims to recompute")
        elif not self.options.recompute:
            # --no-recompute, or a command that checks structure only (import, score's own check).
            result.set_stage(Stage.RECOMPUTE, StageStatus.SKIPPED, RECOMPUTE_NOT_REQUESTED)
        elif rule_errors:
            result.set_stage(Stage.RECOMPUTE, StageStatus.NOT_RUN, "the rules stage failed")
        else:
            from ._recompute_stage import NULL_PROGRESS, run_recompute

            status, detail, findings, comparisons = run_recompute(ctx, self.options.progress or NULL_PROGRESS)
            result.findings.extend(f for f in findings if not _suppressed(profile, f.code))
            result.comparisons = list(comparisons)
            result.model_files = list(ctx.model_files)
            result.set_stage(Stage.RECOMPUTE, status, detail)

    def _profile(self, data: dict[str, Any], kind: str, cat: Catalogue) -> tuple[Any, list[Finding]]:
        from ._profiles import known_profiles, load_profile

        name = self.options.profile or (data.get("profile") if kind == "report" else None) or "default"
        try:
            return load_profile(str(name)), []
        except KeyError:
            pointer = "" if self.options.profile else "/profile"
            finding = make_finding(
                cat, None, "S104", pointer, detail=repr(name), known=", ".join(known_profiles())
            )
            return load_profile("default"), [finding]

    def _references(self, ctx: RuleContext, parent: DocumentResult, depth: int) -> Iterator[Finding]:
        if not self.options.follow_references:
            return
        for index, artifact in enumerate(ctx.data.get("artifacts", [])):
            if artifact.get("media_type") != "application/json" or not artifact.get("kind"):
                continue
            if artifact["id"] in ctx.broken_artifacts:
                continue
            if depth >= self.MAX_REFERENCE_DEPTH:
                yield ctx.finding(
                    "A107",
                    f"/artifacts/{index}",
                    path=artifact["path"],
                    detail=f"is nested more than {self.MAX_REFERENCE_DEPTH} references deep",
                )
                continue
            target = ctx.folder / artifact["path"]
            display = os.path.normpath(os.path.join(os.path.dirname(parent.path), artifact["path"]))
            child = self.verify_file(target, display=display, referenced_by=parent.path, depth=depth + 1)
            if child.kind is not None and child.kind != artifact["kind"]:
                yield ctx.finding(
                    "A107",
                    f"/artifacts/{index}/kind",
                    path=artifact["path"],
                    detail=f"is a {child.kind} document, declared as {artifact['kind']}",
                )
            elif not child.valid:
                codes = sorted({f.code for f in child.errors}) or ["a failed stage"]
                yield ctx.finding(
                    "A107",
                    f"/artifacts/{index}",
                    path=artifact["path"],
                    detail=f"is not conformant ({', '.join(codes)})",
                )


_MAX_DETAIL = 500


def record_internal_error(result: DocumentResult, exc: BaseException) -> None:
    """Fail the stage that was running when mibspec itself failed on a document.

    Stages record their status when they finish, so the running one is the first still
    ``not_run``. It fails with the error as its detail (never a pass), and
    ``result.internal_error`` marks the document for exit code 3.
    """
    text = str(exc) if isinstance(exc, InternalError) else f"{type(exc).__name__}: {exc}"
    if len(text) > _MAX_DETAIL:
        text = text[: _MAX_DETAIL - 1] + "…"
    detail = f"internal error: {text}"
    running = next((s for s, (status, _) in result.stages.items() if status is StageStatus.NOT_RUN), None)
    result.set_stage(running or Stage.RECOMPUTE, StageStatus.FAILED, detail)
    result.internal_error = detail
    _explain_not_run(result)


def _explain_not_run(result: DocumentResult) -> None:
    """Give every stage left ``not_run`` after a failed stage the reason it did not run."""
    failed: Stage | None = None
    for stage, (status, detail) in list(result.stages.items()):
        if status is StageStatus.FAILED and failed is None:
            failed = stage
        elif status is StageStatus.NOT_RUN and detail is None and failed is not None:
            result.set_stage(stage, StageStatus.NOT_RUN, f"the {failed.value} stage failed")


def _truncated(count: int, limit: int) -> str | None:
    """The stage detail when a stage found more than ``limit`` findings, else None."""
    if count <= limit:
        return None
    return f"stopped reporting after {limit} findings (the findings limit, --max-findings)"


def _locate(result: DocumentResult, parsed: ParsedDocument) -> None:
    """Fill in line:column for findings that only know their pointer, then sort them."""
    unlocated = [f.pointer for f in result.findings if f.line is None]
    if unlocated and parsed.text and parsed.data is not None:
        parsed.source_map.prepare(unlocated)  # one scan for all of them, indexing only these
    located = []
    for finding in result.findings:
        if finding.line is None and parsed.text:
            # An unexpected property is best shown at its key; everything else at its value.
            finding = finding.located(*parsed.locate(finding.pointer, prefer_key=finding.code == "S112"))
        if finding.line is None:
            # Nothing more precise is known (e.g. a file too large to read): the file's start.
            finding = finding.located(1, 1)
        located.append(finding)
    located.sort(key=lambda f: (f.severity.rank, f.line or 0, f.column or 0, f.code, f.pointer))
    result.findings = located
