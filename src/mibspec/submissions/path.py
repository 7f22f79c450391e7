"""One call from a MIB submission folder to a recomputed verdict.

:func:`verify_submission` takes the folder as MIB's scripts leave it, the dataset (a hub id
pinned as ``<id>@<40-hex commit>``, a released parquet or JSON Lines file, or a
counterfactual-dataset document) and the model's pin, and:

1. reads the dataset: a hub id from the local Hugging Face cache at that commit (fetched once
   when the hub can be reached and ``HF_HUB_OFFLINE`` is not set), its file of the split
   imported as a counterfactual-dataset document under ``<out>/datasets/``;
2. imports the submission into ``<out>``, with the dataset, split and model revision recorded
   in each report: for the circuit track, the circuits with the results pickles beside them;
   for the causal-variable track, the featurizers, then one report per
   ``<TASK>_<MODEL>_<VARIABLE>`` folder joining them with MIB's result files (``results``);
3. verifies every report written, with recomputation.

Every step that cannot go on stops with a finding that names what is missing and how to get
it; nothing is written when an import is refused, and the inputs are only read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mibspec.core.folders import safe_name
from mibspec.core.hub_cache import cache_root, download_advice, offline, repo_folder
from mibspec.core.spec import install_hint
from mibspec.importers import (
    ImportResult,
    ResultsModel,
    SubmissionOptions,
    UnresolvedModelError,
    import_mib_cv_submission,
    import_mib_dataset,
    import_mib_submission,
    join_mib_cv_results,
    submission_layout,
)
from mibspec.importers.mib_causal_results import CAUSAL_MODELS
from mibspec.importers.mib_dataset import released_files
from mibspec.importers.mib_submission import pinned_model_files
from mibspec.validator import Finding, VerificationResult, catalogue, make_finding
from mibspec.verification.api import verify_checked
from mibspec.verification.request import CheckedRequest, VerificationRequest

__all__ = [
    "DEFAULT_SPLIT",
    "LeaderboardRow",
    "ReleasedFile",
    "SubmissionOutcome",
    "SubmissionRequest",
    "hub_dataset_file",
    "leaderboard_rows",
    "verify_submission",
]

_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_HUB = re.compile(rf"^(?P<id>{_NAME}(?:/{_NAME})?)@(?P<rev>[0-9a-f]{{40}})$")
_RESULTS_SPLIT = re.compile(r"_(?P<split>train|validation|test)_abs-(?:True|False)\.pkl$")
_SET_SPLIT = re.compile(r"_(?P<split>train|validation|test)$")
_POSITIONS_FILE = "token_positions.json"
_DATASET_PATTERNS = ["*.parquet", "*.jsonl", "*.json", "*.md"]
#: The split MIB's public leaderboard is scored on.
DEFAULT_SPLIT = "test"


@dataclass(frozen=True)
class SubmissionRequest:
    """What :func:`verify_submission` needs. ``dataset`` is a hub id pinned as
    ``<id>@<40-hex commit>``, a released ``.parquet`` / ``.jsonl`` file, or a
    counterfactual-dataset document (``.json``). ``results`` are MIB's result files of a
    causal-variable submission (one JSON file per variable, as its evaluation writes them)."""

    submission: Path
    out_dir: Path
    dataset: str
    model_revision: str | None = None
    split: str | None = None
    counterfactual_type: str | None = None
    architecture: str | None = None
    method: str | None = None
    model_files: Path | None = None
    #: MIB's result files from anywhere: circuit track, results pickles, each used for the
    #: ``<task>_<model>`` folder its name names; causal-variable track, result JSON files.
    results: tuple[Path, ...] = ()
    positions: Path | None = None
    model_roots: tuple[Path, ...] = ()
    #: the device recomputation runs on, already resolved (``mibspec.reference_impl.devices``
    #: ``resolve_device``: the command line resolves it before importing anything) and the
    #: batch size, parsed: the verification takes them as they are
    device: str = "cpu"
    batch_size: int | str | None = None


@dataclass
class SubmissionOutcome:
    """What :func:`verify_submission` did: the findings that stopped it (then nothing was
    verified), what the imports wrote, and the verification of the reports."""

    track: str | None = None
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    reports: list[Path] = field(default_factory=list)
    verification: VerificationResult | None = None

    @property
    def valid(self) -> bool:
        """A verdict was reached, on at least one report, and every report passed."""
        return not self.findings and self.verification is not None and self.verification.valid


def verify_submission(request: SubmissionRequest, progress: Any = None) -> SubmissionOutcome:
    """Import ``request.submission`` with its dataset and model pin, then verify the reports
    written with recomputation. Bad input gives findings (never an exception).

    Raises:
        mibspec.core.outputs.OutputPathError: a file to be written is one of the inputs.
    """
    outcome = SubmissionOutcome()
    layout = submission_layout(request.submission)
    outcome.track = layout.track
    if layout.track is None:
        outcome.findings.append(_finding("I107", layout.problem(request.submission)))
        return outcome
    if layout.track == "causal_variable":
        return _causal_variable(request, outcome, progress)
    split = request.split or _results_split(request.submission, request.results, outcome)
    dataset = _dataset(request, split, outcome)
    if dataset is None:
        return outcome
    if not request.results and not any(request.submission.rglob("*.pkl")):
        # before the import, which would refuse the dataset and split it cannot record
        outcome.findings.append(_finding("I107", _no_results(request.submission)))
        return outcome
    options = SubmissionOptions(
        model_revision=request.model_revision,
        dataset=dataset,
        split=split,
        counterfactual_type=request.counterfactual_type,
        architecture=request.architecture,
        method=request.method,
        model_files=request.model_files,
        results=request.results,
    )
    imported = import_mib_submission(request.submission, request.out_dir, options)
    if not _imported(imported, outcome):
        return outcome
    outcome.reports = [path for path in imported.written if path.name == "report.json"]
    if not outcome.reports:
        outcome.findings.append(_finding("I107", _no_results(request.submission)))
        return outcome
    return _verified(request, outcome, progress)


def _verified(request: SubmissionRequest, outcome: SubmissionOutcome, progress: Any) -> SubmissionOutcome:
    """``outcome`` with its reports verified with recomputation, as the request asks: on the
    request's device as resolved by its caller (not looked for again), the reports just
    written as the files."""
    asked = VerificationRequest(
        paths=tuple(outcome.reports),
        recompute=True,
        model_roots=tuple(_roots(request)),
        progress=progress,
        device=request.device,
        batch_size=request.batch_size,
    )
    files = tuple(str(path) for path in outcome.reports)
    outcome.verification = verify_checked(
        CheckedRequest(asked, files, request.device, request.batch_size, (), ())
    )
    return outcome


def _no_results(submission: Path) -> str:
    return (
        f"{submission} holds no results file next to its circuits, so there is no "
        "claim to recompute: run MIB's run_evaluation.py on the submission and put the "
        "<task>_<model>_<split>_abs-<True|False>.pkl files it writes into each "
        "<task>_<model> folder, or give them with --results"
    )


def _causal_variable(
    request: SubmissionRequest, outcome: SubmissionOutcome, progress: Any = None
) -> SubmissionOutcome:
    """A causal-variable folder: its featurizers imported, joined with MIB's result files
    into one report per variable folder, and the reports verified with recomputation."""
    own = request.submission / _POSITIONS_FILE
    if request.positions is None and own.is_file():  # the import reads it (SPEC.md I-6)
        outcome.notes.append(f"token positions: {own} (the submission's own; --positions overrides it)")
    imported = import_mib_cv_submission(request.submission, request.out_dir, positions=request.positions)
    if not _imported(imported, outcome):
        return outcome
    if not request.results:
        outcome.findings.append(
            _finding(
                "I107",
                f"{request.submission} holds featurizers but no claim to recompute: give MIB's result "
                "files of the submission (one JSON file per variable, as its evaluation writes them) "
                "with --results",
            )
        )
        return outcome
    split = request.split or _sets_split(request.results, outcome)
    dataset = _dataset(request, split, outcome)
    if dataset is None:
        return outcome
    joined = join_mib_cv_results(
        list(request.results),
        imported.written,
        request.out_dir,
        dataset=Path(dataset),
        resolve=lambda name: _results_model(name, request),
        split=split,
    )
    if not _imported(joined, outcome):
        return outcome
    outcome.reports = list(joined.written)
    return _verified(request, outcome, progress)


def _sets_split(results: Iterable[Path], outcome: SubmissionOutcome) -> str:
    """The split the result files' counterfactual sets name (``<type>_<split>``, one for all),
    else MIB's test split."""
    splits = set()
    for path in results:
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue  # the join reports an unreadable file
        sets = data.get("dataset") if isinstance(data, dict) else None
        for name in sets if isinstance(sets, dict) else ():
            match = _SET_SPLIT.search(name)
            if match is not None:
                splits.add(match["split"])
    return _one_split(
        splits, outcome, "its result files name several splits", "no counterfactual set names a split"
    )


def _results_model(name: str, request: SubmissionRequest) -> ResultsModel:
    """The model a result file names, declared as the report gives it: a MIB model by its hub
    id, another by ``name`` as a hub id with ``--architecture`` and the config.json of its
    pinned snapshot; a local folder under ``--model-root`` when no revision is given.

    Raises:
        UnresolvedModelError: an unknown model without ``--architecture``, or no readable config.
    """
    if name in CAUSAL_MODELS:
        hub_id, architecture, config = CAUSAL_MODELS[name]
        names = {key for key, value in CAUSAL_MODELS.items() if value[0] == hub_id}
        block: dict[str, Any] = {"architecture": architecture, "config": config}
    elif request.architecture is None:
        known = ", ".join(sorted({v[0] for v in CAUSAL_MODELS.values()}))
        raise UnresolvedModelError(
            "I110",
            f"model {name!r} is not one of MIB's ({known}); give its architecture with --architecture "
            '(the class its config.json names under "architectures")',
        )
    else:
        hub_id, architecture = name, request.architecture
        config, names = _model_config(hub_id, request), {name}
        block = {"architecture": architecture}
    local = _local_model(hub_id, request)
    if request.model_revision is None and local is not None:
        block.update(source="local", path=local.name, files=_pinned(local))
    else:
        block.update(source="hub", id=hub_id)
        if request.model_revision is not None:
            block["revision"] = request.model_revision
        if request.model_files is not None:
            block["files"] = _pinned(request.model_files)
    return ResultsModel(block=block, config=config, names=frozenset({*names, architecture}))


def _local_model(hub_id: str, request: SubmissionRequest) -> Path | None:
    """The local copy of the model: ``--model-files``, else (without a revision) a folder
    named after the model under a ``--model-root``."""
    if request.model_files is not None:
        return request.model_files
    name = hub_id.rsplit("/", 1)[-1]
    found = [root / name for root in request.model_roots if (root / name).is_dir()]
    return found[0] if found and request.model_revision is None else None


def _pinned(folder: Path) -> dict[str, str]:
    """The SHA-256 of the model files of ``folder`` (SPEC.md M-4).

    Raises:
        UnresolvedModelError: the folder holds no config.json, or a file leads out of it.
    """
    from mibspec.core.folders import OutsideFolderError
    from mibspec.importers import OptionError

    try:
        return pinned_model_files(folder)
    except OptionError as exc:
        raise UnresolvedModelError("I111", exc.detail) from None
    except OutsideFolderError as exc:
        raise UnresolvedModelError("I127", str(exc)) from None


def _model_config(hub_id: str, request: SubmissionRequest) -> dict[str, int]:
    """``n_layers`` and ``n_heads`` from the model's config.json: in the local hub cache at the
    pinned revision, else in a ``--model-root`` folder named after the model.

    Raises:
        UnresolvedModelError: no config.json found (I129), or one that is not a supported model's.
    """
    revision = request.model_revision
    if revision is not None:
        path = repo_folder(hub_id) / "snapshots" / revision / "config.json"
        missing = (
            f"the config.json of model {hub_id}@{revision} is not in the local Hugging Face cache "
            f"({repo_folder(hub_id)}); {download_advice(hub_id, revision)}"
        )
    else:
        name = hub_id.rsplit("/", 1)[-1]
        path = (_local_model(hub_id, request) or Path(name)) / "config.json"
        missing = (
            f"model {hub_id!r}: give its pinned revision with --model-revision (read from the local "
            f"Hugging Face cache), or its folder with --model-files or under --model-root"
        )
    if not path.is_file():
        raise UnresolvedModelError("I129", missing)
    try:
        from mibspec.reference_impl.engine import config_summary
    except ImportError:
        hint = install_hint("recompute")
        raise UnresolvedModelError("I104", f"reading a model's config needs torch: {hint}") from None
    try:
        summary = config_summary(json.loads(path.read_bytes()))
    except (ValueError, OSError) as exc:
        raise UnresolvedModelError("I110", f"{path}: {exc}") from None
    return {"n_layers": int(summary["n_layers"]), "n_heads": int(summary["n_heads"])}


def _imported(result: ImportResult, outcome: SubmissionOutcome) -> bool:
    outcome.findings.extend(result.findings)
    outcome.notes.extend(result.notes)
    outcome.written.extend(result.written)
    return result.ok


def _roots(request: SubmissionRequest) -> list[Path]:
    roots = list(request.model_roots)
    if request.model_files is not None:
        roots.append(request.model_files.parent)
    return roots


def _results_split(submission: Path, given: tuple[Path, ...], outcome: SubmissionOutcome) -> str:
    """The split the submission's results files and those ``given`` name (one for all), else
    MIB's test split."""
    splits = set()
    for path in [*sorted(submission.rglob("*.pkl")), *given]:
        match = _RESULTS_SPLIT.search(path.name)
        if match is not None:
            splits.add(match["split"])
    return _one_split(
        splits, outcome, "its results files name several splits", "no results file names a split"
    )


def _one_split(splits: set[str], outcome: SubmissionOutcome, several: str, none: str) -> str:
    """The one split named, else MIB's test split, with a note saying why (``several`` or
    ``none``) and how to choose."""
    if len(splits) == 1:
        return next(iter(splits))
    outcome.notes.append(f"split: {DEFAULT_SPLIT} ({several if splits else none}; pass --split to choose)")
    return DEFAULT_SPLIT


def _dataset(request: SubmissionRequest, split: str, outcome: SubmissionOutcome) -> str | None:
    """The dataset option of the submission import: a counterfactual-dataset document, made
    from the hub or a released file when given as one; ``None`` after a finding."""
    given = request.dataset
    hub = _HUB.match(given)
    if hub is not None:
        released = hub_dataset_file(given, split)
        outcome.findings.extend(released.findings)
        if released.file is None:
            return None
        return _imported_dataset(released.file, request, split, outcome, hub["id"], hub["rev"])
    path = Path(given)
    if "@" in given and not path.exists():
        outcome.findings.append(
            _finding(
                "I111",
                f"--dataset {given!r}: a hub dataset is pinned as <id>@<40-hex commit>, "
                "e.g. mib-bench/ioi@<commit>",
            )
        )
        return None
    if not path.is_file():
        outcome.findings.append(_finding("I111", f"--dataset {given}: no such file"))
        return None
    if path.suffix in (".parquet", ".jsonl"):
        return _imported_dataset(path, request, split, outcome)
    return given


@dataclass
class ReleasedFile:
    """The released file of a split in a pinned hub dataset, or the findings saying why not."""

    file: Path | None = None
    hub_id: str = ""
    revision: str = ""
    findings: list[Finding] = field(default_factory=list)


def hub_dataset_file(pinned: str, split: str) -> ReleasedFile:
    """The one released file (parquet, else JSON Lines) of ``split`` in the hub dataset
    ``pinned`` (``<id>@<40-hex commit>``), read from the local Hugging Face cache (fetched
    once when the hub may be reached). Bad input gives findings, never an exception."""
    hub = _HUB.match(pinned)
    if hub is None:
        detail = f"{pinned!r}: a hub dataset is pinned as <id>@<40-hex commit>, e.g. mib-bench/ioi@<commit>"
        return ReleasedFile(findings=[_finding("I111", detail)])
    outcome = SubmissionOutcome()
    released = ReleasedFile(hub_id=hub["id"], revision=hub["rev"], findings=outcome.findings)
    snapshot = _dataset_snapshot(hub["id"], hub["rev"], outcome)
    if snapshot is None:
        return released
    files = released_files(snapshot, split)
    if len(files) != 1:
        what = "no parquet or JSON Lines file" if not files else f"{len(files)} files"
        outcome.findings.append(
            _finding(
                "I117",
                f"dataset {pinned} holds {what} of the split {split!r} (looked in {snapshot}); "
                "pass --split, or import the file you mean with `mibspec import mib-dataset FILE` and "
                "give the document it writes as --dataset",
            )
        )
        return released
    released.file = files[0]
    return released


def _imported_dataset(
    source: Path,
    request: SubmissionRequest,
    split: str,
    outcome: SubmissionOutcome,
    hub_id: str | None = None,
    revision: str | None = None,
) -> str | None:
    out = request.out_dir / "datasets" / safe_name(hub_id or source.stem)
    result = import_mib_dataset([source], out, split=split, hub_id=hub_id, revision=revision)
    if not _imported(result, outcome):
        return None
    return str(result.written[0])


def _dataset_snapshot(repo_id: str, revision: str, outcome: SubmissionOutcome) -> Path | None:
    """The local snapshot of the dataset repository at ``revision``: the cache, else one
    download when the hub may be reached; ``None`` after a finding naming what to do."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        hint = install_hint("recompute")
        outcome.findings.append(_finding("I104", f"reading hub datasets needs huggingface_hub: {hint}"))
        return None
    where = f"{repo_id}@{revision}"
    try:
        return Path(
            snapshot_download(
                repo_id,
                repo_type="dataset",
                revision=revision,
                local_files_only=True,
                allow_patterns=_DATASET_PATTERNS,
                cache_dir=cache_root(),  # the folder the findings name, read from the environment now
            )
        )
    except Exception:  # not in the cache (the library's errors vary by version)
        pass
    if offline():
        outcome.findings.append(
            _finding(
                "I129",
                f"dataset {where} is not in the local Hugging Face cache ({repo_folder(repo_id, 'dataset')} "
                f"holds no snapshot {revision}) and the hub is offline (HF_HUB_OFFLINE); "
                f"{download_advice(repo_id, revision, 'dataset')}",
            )
        )
        return None
    try:
        return Path(
            snapshot_download(
                repo_id,
                repo_type="dataset",
                revision=revision,
                allow_patterns=_DATASET_PATTERNS,
                cache_dir=cache_root(),
            )
        )
    except Exception as exc:  # a network or hub failure is a finding
        outcome.findings.append(
            _finding(
                "I129",
                f"dataset {where} is not in the local Hugging Face cache ({cache_root()}) and could not "
                f"be fetched ({type(exc).__name__}: {exc}); {download_advice(repo_id, revision, 'dataset')}",
            )
        )
        return None


def _finding(code: str, detail: str) -> Finding:
    return make_finding(catalogue(), None, code, "", detail=detail).located(1, 1)


@dataclass(frozen=True)
class LeaderboardRow:
    """One number of a MIB leaderboard row: the value the submission's results claim beside
    the value recomputed from the declared artifacts."""

    report: str
    quantity: str
    claimed: float | None
    recomputed: float | None
    within: bool | None


#: The circuit track's leaderboard numbers, by their pointer in a report.
_LEADERBOARD = {"/claims/cpr/value": "CPR", "/claims/cmd/value": "CMD"}


def leaderboard_rows(verification: VerificationResult, reports: Iterable[Path]) -> list[LeaderboardRow]:
    """The leaderboard numbers of each report verified, claimed and recomputed: CPR and CMD
    for a circuit report, each variable's Average and best for a causal-variable report."""
    wanted = {str(path) for path in reports}
    rows = []
    for document in verification.documents:
        if document.path not in wanted:
            continue
        written = _read(document.path)
        compared = {c.pointer: c for c in document.comparisons}
        for pointer, quantity in _leaderboard(written).items():
            comparison = compared.get(pointer)
            claimed = _claimed(written, pointer) if comparison is None else comparison.claimed
            rows.append(
                LeaderboardRow(
                    report=document.path,
                    quantity=quantity,
                    claimed=claimed,
                    recomputed=None if comparison is None else comparison.recomputed,
                    within=None if comparison is None else comparison.within,
                )
            )
    return rows


def _read(path: str) -> Any:
    """The report file (written by the import), or None."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _leaderboard(report: Any) -> dict[str, str]:
    """The leaderboard's numbers of a report's track, by their pointer."""
    if not isinstance(report, dict) or report.get("track") != "causal_variable":
        return _LEADERBOARD
    variables = (report.get("claims") or {}).get("variables") or []
    numbers = {}
    for v, variable in enumerate(variables):
        name = variable.get("name", str(v)) if isinstance(variable, dict) else str(v)
        numbers[f"/claims/variables/{v}/average"] = f"{name} Average"
        numbers[f"/claims/variables/{v}/best"] = f"{name} best"
    return numbers


def _claimed(report: Any, pointer: str) -> float | None:
    """The value at ``pointer`` in the report, if a number."""
    value = report
    try:
        for part in pointer.strip("/").split("/"):
            value = value[int(part)] if isinstance(value, list) else value[part]
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
