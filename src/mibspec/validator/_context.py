"""What the verification pipeline passes around: the options of a run, the stages and
their statuses, the results, and the context a rule (or a recomputer) sees."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mibspec.core.comparisons import Comparison
from mibspec.core.findings import Finding, Severity
from mibspec.core.progress import Progress
from mibspec.core.recompute_context import RECOMPUTE_NOT_REQUESTED
from mibspec.core.spec import SPEC_VERSION
from mibspec.core.strict_json import DEFAULT_LIMITS, Limits, ParsedDocument, load_json_file
from mibspec.core.version import __version__

from ._catalogue import Catalogue, make_finding
from ._schema_stage import schema_for

__all__ = [
    "RECOMPUTE_NOT_REQUESTED",
    "DocumentResult",
    "RuleContext",
    "Stage",
    "StageStatus",
    "VerificationResult",
    "VerifyOptions",
]


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


@dataclass(frozen=True)
class VerifyOptions:
    """Options of one verification run.

    Attributes:
        recompute: run the recompute stage (needs the ``recompute`` extra).
        skipped_because: without ``recompute``, the recompute stage's detail: why it was
            skipped (default "not requested"; the CLI says --no-recompute, an import that it
            checks what it wrote).
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
        device: where recomputation runs: ``cpu``, ``cuda:N`` or ``mps``, already checked
            to be present (``mibspec.reference_impl.devices.resolve_device``).
        batch_size: examples per forward pass of recomputation: ``None`` (the batch size
            the report declares), a positive integer, or ``"auto"`` (chosen from the
            device's free memory, halved when the device runs out of memory).
        trust_hash_cache: let recomputation take model files' digests from the on-disk
            file-hash cache (keyed by path, size, device, inode, modification and change
            times) instead of hashing the bytes it reads; each digest so taken is reported
            (R111). Off by default: a verdict then rests only on digests of the bytes read.
        session: what the recomputation of several reports shares (a
            ``mibspec.reference_impl.recompute.RecomputeSession``; ``None``: nothing).
    """

    recompute: bool = True
    skipped_because: str = RECOMPUTE_NOT_REQUESTED
    profile: str | None = None
    limits: Limits = DEFAULT_LIMITS
    follow_references: bool = True
    model_roots: tuple[Path, ...] = ()
    progress: Progress | None = field(default=None, compare=False)
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    device: str = "cpu"
    batch_size: int | str | None = None
    trust_hash_cache: bool = False
    session: Any = field(default=None, compare=False, repr=False)

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
    #: The recompute stage's claimed-vs-recomputed comparisons.
    comparisons: list[Comparison] = field(default_factory=list)
    #: The model files recomputation used (``ModelFile`` objects), for the receipt.
    model_files: list[Any] = field(default_factory=list)
    #: Set when mibspec itself failed on this document (see ``record_internal_error``).
    internal_error: str | None = None
    #: A report's own ``description``, shown by the text output (not part of the JSON contract).
    description: str | None = None
    #: For a report that passed its schema: its numbers by how this run checked them (a
    #: ``ClaimStamp``, SPEC.md CL-2).
    claims: Any = None
    #: A report's profile (the one it was checked under) and what that profile does not check
    #: (``_unchecked.NotChecked``, SPEC.md V-5); set once the schema stage passed.
    profile: str | None = None
    not_checked: list[Any] | None = None

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
            **({"claims": self.claims.to_json()} if self.claims is not None else {}),
            **({"profile": self.profile} if self.profile else {}),
            **(
                {"not_checked": [item.to_json() for item in self.not_checked]}
                if self.not_checked is not None
                else {}
            ),
        }


@dataclass
class VerificationResult:
    """The outcome of verifying one or more paths (and the documents they reference)."""

    documents: list[DocumentResult]
    spec_version: str = SPEC_VERSION
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
    """What a rule sees: the document, where it lives, the profile, and a finding factory.

    It is also what the recompute stage hands a recomputer, which reads it as a
    :class:`mibspec.core.recompute_context.RecomputeContext` (the run's limits, model roots,
    device, batch size and session are read from its options) and writes nothing into it.
    """

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
        self.schema = schema_for(kind, spec_version)
        #: Filled by the artifact rule: artifact id → entry, for rules that read sidecars.
        self.artifacts: dict[str, dict[str, Any]] = {}
        #: Artifact ids whose file failed an integrity check (later rules skip them).
        self.broken_artifacts: set[str] = set()
        #: Documents this one references, read by its rules (``rules._referenced``), by
        #: (artifact id, kind).
        self.referenced: dict[tuple[Any, str], Any] = {}

    @property
    def limits(self) -> Limits:
        return self.options.limits

    @property
    def model_roots(self) -> tuple[Path, ...]:
        return self.options.model_roots

    @property
    def device(self) -> str:
        return self.options.device

    @property
    def batch_size(self) -> int | str | None:
        return self.options.batch_size

    @property
    def session(self) -> object | None:
        return self.options.session

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

    def load_json(self, path: Path) -> ParsedDocument:
        """Parse a JSON file the document references, strictly and under the run's limits."""
        return load_json_file(path, self.options.limits)
