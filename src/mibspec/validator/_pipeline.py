"""The verification pipeline: parse → schema → rules → recompute.

Every stage records a status. A stage that did not run is ``not_run`` or
``skipped`` (with the reason), never ``passed``; a document is valid only when
no stage failed and no error-level finding was reported.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from mibspec.core.findings import Finding, Severity
from mibspec.core.profiles import known_profiles, load_profile
from mibspec.core.progress import NULL_PROGRESS
from mibspec.core.spec import KNOWN_SPEC_VERSIONS, SPEC_VERSION
from mibspec.core.strict_json import ParsedDocument, load_json_file

from ._annotations import normalize_numbers
from ._catalogue import Catalogue, InternalError, catalogue, make_finding, parse_findings
from ._context import (
    DocumentResult,
    RuleContext,
    Stage,
    StageStatus,
    VerificationResult,
    VerifyOptions,
)
from ._recompute_stage import recompute_gaps, run_recompute
from ._schema_stage import check_schema, dispatch
from ._stamp import claim_stamp
from ._unchecked import not_checked
from .rules import run_rules

__all__ = ["printable_path", "record_internal_error", "verify_paths"]


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
        runner.verify_file(Path(path), display=printable_path(str(path)))
    return VerificationResult(documents=runner.results, profile=options.profile)


def printable_path(path: str) -> str:
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
            what = (
                "is a folder"
                if path.is_dir()
                else "not a regular file (a device, FIFO or socket)"
                if path.exists()
                else "no such file"
            )
            raise FileNotFoundError(f"{display}: {what}")
        result = DocumentResult(path=display, referenced_by=referenced_by)
        self.seen[resolved] = result
        self.results.append(result)
        cat = catalogue(SPEC_VERSION)
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
        """The stages of one document in order; a stage that fails ends the run (the stages
        after it stay ``not_run``)."""
        data = self._parse_stage(result, parsed, cat)
        if data is None:
            return
        ctx = self._schema_stage(result, data, path, cat)
        if ctx is None:
            return
        rule_errors = self._rules_stage(result, ctx, depth)
        self._recompute_stage(result, ctx, rule_errors)
        if result.kind == "report":
            rules_passed = result.stages[Stage.RULES][0] is StageStatus.PASSED
            result.claims = claim_stamp(ctx.data, result.comparisons, rules_passed)

    def _parse_stage(
        self, result: DocumentResult, parsed: ParsedDocument, cat: Catalogue
    ) -> dict[str, Any] | None:
        """Stage 1: the parsed document, an object; None when the parse stage failed."""
        if parsed.problems:
            result.findings.extend(parse_findings(parsed, cat))
            kept = len(parsed.problems)
            result.set_stage(
                Stage.PARSE, StageStatus.FAILED, _truncated(kept + 1, kept) if parsed.more_problems else None
            )
            return None
        data = parsed.data
        if not isinstance(data, dict):
            result.findings.append(make_finding(cat, None, "P108", "", detail=type(data).__name__))
            result.set_stage(Stage.PARSE, StageStatus.FAILED)
            return None
        result.set_stage(Stage.PARSE, StageStatus.PASSED)
        return data

    def _schema_stage(
        self, result: DocumentResult, data: dict[str, Any], path: Path, cat: Catalogue
    ) -> RuleContext | None:
        """Stage 2: version, kind, profile, schema. The rules' context when the schema stage
        passed, else None."""
        header = list(dispatch(data, cat))
        result.kind = data.get("kind") if isinstance(data.get("kind"), str) else None
        if result.kind == "report" and isinstance(data.get("description"), str):
            result.description = data["description"]
        version = data.get("spec_version")
        known = isinstance(version, str) and version in KNOWN_SPEC_VERSIONS  # a dict is unhashable
        result.spec_version = version if known else None
        if header:
            result.findings.extend(header)
            result.set_stage(Stage.SCHEMA, StageStatus.FAILED, "version or kind not recognised")
            return None
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
            return None
        result.set_stage(Stage.SCHEMA, StageStatus.PASSED)
        if result.kind == "report":
            result.profile = str(profile["name"])
            result.not_checked = not_checked(profile, data.get("track"))
        return RuleContext(
            path=path,
            data=data,
            kind=result.kind,
            spec_version=result.spec_version,
            profile=profile,
            options=self.options,
            cat=cat,
        )

    def _rules_stage(self, result: DocumentResult, ctx: RuleContext, depth: int) -> bool:
        """Stage 3: the rules, then the documents the artifacts reference. Whether a rule
        reported an error."""
        limit = self.options.limits.max_findings
        normalize_numbers(ctx.schema, ctx.data)  # 1.0 where an integer is due becomes 1 (see there)
        # The rules run first: they fill ctx.artifacts, which the references walk reads.
        rule_findings = [*run_rules(ctx), *self._references(ctx, result, depth)]
        rule_findings = [f for f in rule_findings if not _suppressed(ctx.profile, f.code, self.options)]
        result.findings.extend(rule_findings[:limit])
        rule_errors = any(f.severity is Severity.ERROR for f in rule_findings)
        result.set_stage(
            Stage.RULES,
            StageStatus.FAILED if rule_errors else StageStatus.PASSED,
            _truncated(len(rule_findings), limit),
        )
        return rule_errors

    def _recompute_stage(self, result: DocumentResult, ctx: RuleContext, rule_errors: bool) -> None:
        """Stage 4: recompute (reports only)."""
        if result.kind != "report":
            result.set_stage(Stage.RECOMPUTE, StageStatus.SKIPPED, "only reports carry claims to recompute")
        elif not self.options.recompute:
            # --no-recompute, or a command that checks structure only (import, score's own check).
            result.findings.extend(self._unrecomputable(result, ctx))
            result.set_stage(Stage.RECOMPUTE, StageStatus.SKIPPED, self.options.skipped_because)
        elif rule_errors:
            result.set_stage(Stage.RECOMPUTE, StageStatus.NOT_RUN, "the rules stage failed")
        else:
            outcome = run_recompute(ctx, self.options.progress or NULL_PROGRESS)
            result.findings.extend(f for f in outcome.findings if not _suppressed(ctx.profile, f.code))
            result.comparisons = list(outcome.comparisons)
            result.model_files = list(outcome.model_files)
            result.set_stage(Stage.RECOMPUTE, outcome.status, outcome.detail)

    def _unrecomputable(self, result: DocumentResult, ctx: RuleContext) -> list[Finding]:
        """R112 (a warning) for each declaration, read from the report alone, without which
        recomputation could not run on it (SPEC.md R-7), so that a verdict reached without
        recomputation says that one with it is not yet possible. A gap the rules stage already
        reported at the same pointer (V110) is not repeated."""
        said = {f.pointer for f in result.findings if f.code == "V110"}
        findings = [
            ctx.finding("R112", pointer, detail=detail)
            for pointer, detail in recompute_gaps(ctx)
            if pointer not in said
        ]
        return [f for f in findings if not _suppressed(ctx.profile, f.code, self.options)]

    def _profile(self, data: dict[str, Any], kind: str, cat: Catalogue) -> tuple[Any, list[Finding]]:
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
