"""The ``mibspec import`` commands: EAP-IG graphs, MIB submission folders of either track,
MIB's results files and MIB's released datasets.

Each import writes its documents, then verifies them (recomputation is left to ``mibspec
verify``); the import's own warnings (for example the units whose token positions are still
undeclared) are reported with the verification, under the source's path.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import click

from mibspec.cli._options import Argument, Option
from mibspec.cli._support import (
    EXIT_FINDINGS,
    EXIT_OK,
    IMPORT_CHECKS_ONLY,
    FollowLinksOption,
    OutputFormat,
    check_outputs_or_exit,
    exit_on_internal_errors,
    followed,
    usage_error,
)
from mibspec.core.display import visible

if TYPE_CHECKING:
    from mibspec.importers import ImportResult, SubmissionOptions
    from mibspec.validator import VerificationResult

__all__ = [
    "PositionsOption",
    "ResultsOption",
    "import_eap_ig_command",
    "import_mib_causal_results_command",
    "import_mib_circuit_results_command",
    "import_mib_dataset_command",
    "import_mib_submission_command",
    "render_import_failure",
]

_FormatOption = Annotated[OutputFormat, Option("--format", "-f", help="Output format.")]


def _report(sources: list[Path], result: ImportResult, output_format: OutputFormat) -> None:
    """Render the import's findings, or verify and render what it wrote (with its warnings)."""
    from mibspec.validator import (
        DocumentResult,
        Stage,
        StageStatus,
        VerificationResult,
    )
    from mibspec.verification.api import verify as run_verify
    from mibspec.verification.output_formats import REPORTERS

    render = REPORTERS[output_format.value]
    where = str(sources[0]) if len(sources) == 1 else ", ".join(str(s) for s in sources)
    source_result = DocumentResult(path=where, kind=None, findings=list(result.findings))
    failed = any(f.severity.value == "error" for f in result.findings)
    if failed and not result.written:
        source_result.set_stage(Stage.PARSE, StageStatus.FAILED, "the input could not be imported")
        render(VerificationResult(documents=[source_result]), sys.stdout)
        raise click.exceptions.Exit(EXIT_FINDINGS)
    # Nothing is written when an input is refused: what was written is verified, with the warnings.
    verified = run_verify(*result.written, recompute=False, skipped_because=IMPORT_CHECKS_ONLY)
    verified = _with_revision_hints(verified)
    if result.findings:
        if failed:
            source_result.set_stage(Stage.PARSE, StageStatus.FAILED, "some inputs could not be imported")
        else:
            source_result.set_stage(Stage.PARSE, StageStatus.PASSED, "imported, with warnings")
        verified = VerificationResult(documents=[source_result, *verified.documents])
    render(verified, sys.stdout)
    exit_on_internal_errors(verified)
    raise click.exceptions.Exit(EXIT_OK if verified.valid and not failed else EXIT_FINDINGS)


def import_mib_dataset_command(
    sources: Annotated[
        list[Path],
        Argument(
            help="Released dataset files: parquet (needs the mib extra) or JSON Lines; or one hub "
            "dataset pinned as ID@40-HEX-REVISION, whose file of the split is read from the local "
            "Hugging Face cache."
        ),
    ],
    out_dir: Annotated[
        Path, Option("--output", "-o", help="Folder to write <stem>.json and <stem>.jsonl into.")
    ],
    task: Annotated[
        str | None,
        Option(
            help="ioi, mcqa, arc_easy, arc_challenge, arithmetic, arithmetic_subtraction or ravel "
            "(default: from the columns)."
        ),
    ] = None,
    split: Annotated[
        str | None,
        Option(help="train, validation, test or private_test (default: from the file name)."),
    ] = None,
    hub_id: Annotated[
        str | None, Option("--hub-id", help="The dataset repository, e.g. mib-bench/ioi.")
    ] = None,
    revision: Annotated[str | None, Option(help="The repository's full commit hash.")] = None,
    attributes: Annotated[
        Path | None,
        Option(
            "--attributes",
            help="RAVEL's attribute table (entity → {attribute: value}), from which RAVEL's answers come.",
        ),
    ] = None,
    output_format: _FormatOption = OutputFormat.text,
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Import MIB's released dataset files as counterfactual datasets, then verify them."""
    from mibspec.core.outputs import OutputPathError
    from mibspec.importers import import_mib_dataset

    if len(sources) == 1 and not sources[0].exists() and "@" in str(sources[0]):
        hub = _hub_source(str(sources[0]), hub_id, revision, split, output_format)
        sources, hub_id, revision, split = [hub[0]], hub[1], hub[2], hub[3]
    for source in [*sources, *([attributes] if attributes else [])]:
        if not source.is_file():
            usage_error(f"{source}: no such file")
    check_outputs_or_exit([], sources, folders=[(out_dir, "--output")], follow_links=follow_output_links)
    try:
        result = import_mib_dataset(
            sources,
            followed(out_dir, follow_output_links),
            task=task,
            split=split,
            hub_id=hub_id,
            revision=revision,
            attributes=attributes,
        )
    except OutputPathError as exc:
        usage_error(str(exc))
    _report(sources, result, output_format)


def _hub_source(
    pinned: str, hub_id: str | None, revision: str | None, split: str | None, output_format: OutputFormat
) -> tuple[Path, str, str, str]:
    """The released file of the split (``test`` unless given) in the hub dataset ``pinned``,
    read from the local Hugging Face cache, with the pin to record; findings end the command."""
    from mibspec.submissions import DEFAULT_SPLIT, hub_dataset_file

    if hub_id is not None or revision is not None:
        usage_error(
            f"{pinned}: a pinned hub dataset names its repository and revision; drop --hub-id, --revision"
        )
    chosen = split or DEFAULT_SPLIT
    released = hub_dataset_file(pinned, chosen)
    if released.file is None:
        from mibspec.importers import ImportResult

        _report([Path(pinned)], ImportResult(findings=released.findings), output_format)
        raise click.exceptions.Exit(EXIT_FINDINGS)  # _report exits first: a finding is an error
    return released.file, released.hub_id, released.revision, chosen


PositionsOption = Annotated[
    Path | None,
    Option(
        "--positions",
        help="Causal-variable track: JSON object mapping the submission's token-position names to "
        'declared rules, e.g. {"last_token": {"rule": "last"}} (default: the folder\'s own '
        "token_positions.json, which export mib-submission writes; both given must agree).",
    ),
]


def run_cv_import(
    source: Path, out_dir: Path, positions: Path | None, output_format: str, follow_links: bool = False
) -> None:
    """Import a causal-variable submission folder, then verify and report what was written."""
    from mibspec.core.outputs import OutputPathError
    from mibspec.importers import import_mib_cv_submission

    if not source.is_dir():
        usage_error(f"{source}: no such folder")
    if positions is not None and not positions.is_file():
        usage_error(f"{positions}: no such file")
    check_outputs_or_exit([], [], folders=[(out_dir, "--output")], follow_links=follow_links)
    try:
        result = import_mib_cv_submission(source, followed(out_dir, follow_links), positions=positions)
    except OutputPathError as exc:
        usage_error(str(exc))
    _report([source], result, OutputFormat(output_format))


def render_import_failure(source: Path, findings: list[Any], output_format: OutputFormat) -> NoReturn:
    """Report the findings of an input that could not be imported; exit 1."""
    from mibspec.validator import DocumentResult, Stage, StageStatus, VerificationResult
    from mibspec.verification.output_formats import REPORTERS

    failed = DocumentResult(path=str(source), kind=None, findings=findings)
    failed.set_stage(Stage.PARSE, StageStatus.FAILED, "the file could not be imported")
    REPORTERS[output_format.value](VerificationResult(documents=[failed]), sys.stdout)
    raise click.exceptions.Exit(EXIT_FINDINGS)


def _import_and_verify(
    source: Path,
    out_dir: Path,
    output_format: OutputFormat,
    importer: str,
    follow_links: bool = False,
    **options: object,
) -> None:
    """Run an importer, report its findings, or verify and report what it wrote."""
    from mibspec import importers
    from mibspec.core.outputs import OutputPathError
    from mibspec.verification.api import verify as run_verify
    from mibspec.verification.output_formats import REPORTERS

    if not (source.is_dir() if importer == "import_mib_submission" else source.is_file()):
        usage_error(f"{source}: no such {'folder' if importer == 'import_mib_submission' else 'file'}")
    check_outputs_or_exit([], [source], folders=[(out_dir, "--output")], follow_links=follow_links)
    render = REPORTERS[output_format.value]
    try:
        result = getattr(importers, importer)(source, followed(out_dir, follow_links), **options)
    except OutputPathError as exc:
        usage_error(str(exc))
        return
    for note in getattr(result, "notes", ()):
        click.echo(f"mibspec: note: {visible(note)}", err=True)
    if not result.ok:
        render_import_failure(source, result.findings, output_format)
    verified = _with_revision_hints(
        run_verify(*result.written, recompute=False, skipped_because=IMPORT_CHECKS_ONLY)
    )
    render(verified, sys.stdout)
    exit_on_internal_errors(verified)
    raise click.exceptions.Exit(EXIT_OK if verified.valid else EXIT_FINDINGS)


RevisionOption = Annotated[
    str | None, Option("--model-revision", help="The model's 40-hex hub commit (pins it: rule A111).")
]


DatasetOption = Annotated[
    str | None,
    Option(
        "--dataset",
        help="A counterfactual-dataset document (copied beside each report), or a hub id pinned as "
        "ID@40-HEX-REVISION.",
    ),
]


SplitOption = Annotated[
    str | None, Option("--split", help="The split the results are on: train, validation, test.")
]


def _report_options(revision: str | None, dataset: str | None, split: str | None) -> dict[str, object]:
    from mibspec.importers import ImportOptions

    return {"options": ImportOptions(model_revision=revision, dataset=dataset, split=split)}


def import_eap_ig_command(
    source: Annotated[Path, Argument(help="An EAP-IG graph: .json or .pt (read with weights_only=True).")],
    out_dir: Annotated[
        Path, Option("--output", "-o", help="Folder to write circuit.json and its sidecar into.")
    ],
    model: Annotated[
        str | None, Option("--model", help="The MIB model id of the graph (gpt2, qwen2.5, ...).")
    ] = None,
    model_revision: RevisionOption = None,
    output_format: _FormatOption = OutputFormat.text,
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Import an EAP-IG graph as a circuit document, then verify what was written.

    A circuit document names no dataset or split: the report that mibspec import
    mib-submission writes does.
    """
    if model_revision is not None and model is None:
        usage_error("--model-revision needs --model (the MIB model id it pins)")
    _import_and_verify(
        source,
        out_dir,
        output_format,
        "import_eap_ig",
        follow_output_links,
        model=model,
        model_revision=model_revision,
    )


CounterfactualTypeOption = Annotated[
    str | None,
    Option("--counterfactual-type", help="The dataset's counterfactual type used as the corrupted run."),
]


ArchitectureOption = Annotated[
    str | None,
    Option(
        "--architecture",
        help="For a model outside MIB's five: the class its config.json names under "
        '"architectures", e.g. GPT2LMHeadModel.',
    ),
]


MethodOption = Annotated[
    str | None, Option("--method", help="Method name (default: the submission folder's parent).")
]


ModelFilesOption = Annotated[
    Path | None,
    Option("--model-files", help="A local copy of the model: pin its files by SHA-256 (rule R106)."),
]


ResultsOption = Annotated[
    list[Path] | None,
    Option(
        "--results",
        metavar="<path>",
        help="Circuit track: a results file of MIB's run_evaluation.py "
        "(<task>_<model>_<split>_abs-<True|False>.pkl) from anywhere, used for the <task>_<model> "
        "folder its name names (repeatable).",
    ),
]


def import_mib_submission_command(
    source: Annotated[
        Path,
        Argument(
            help="A MIB submission folder of either track: <task>_<model> folders (circuit track) or "
            "<TASK>_<MODEL>_<VARIABLE> folders (causal-variable track); the layout is detected."
        ),
    ],
    out_dir: Annotated[
        Path,
        Option(
            "--output",
            "-o",
            help="Folder to write <task>_<model>/circuit.json (and report.json), or "
            "<TASK>_<MODEL>_<VARIABLE>/<unit>.json, into.",
        ),
    ],
    model_revision: RevisionOption = None,
    dataset: DatasetOption = None,
    split: SplitOption = None,
    counterfactual_type: CounterfactualTypeOption = None,
    architecture: ArchitectureOption = None,
    method: MethodOption = None,
    model_files: ModelFilesOption = None,
    results: ResultsOption = None,
    positions: PositionsOption = None,
    output_format: _FormatOption = OutputFormat.text,
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Import a MIB submission folder of either track, then verify what was written.

    Circuit track: circuit documents (and reports where results are present). Causal-variable
    track: featurizer documents (never the submission's code; token positions from
    --positions). The options before --positions apply to the circuit track only.
    """
    from mibspec.importers import SubmissionOptions

    options = SubmissionOptions(
        model_revision=model_revision,
        dataset=dataset,
        split=split,
        counterfactual_type=counterfactual_type,
        architecture=architecture,
        method=method,
        model_files=model_files,
        results=tuple(results or ()),
    )
    for path in options.results:
        if not path.is_file():
            usage_error(f"--results {path}: no such file")
    if _submission_track(source, output_format) == "causal_variable":
        _refuse_circuit_options(source, options)
        run_cv_import(source, out_dir, positions, output_format.value, follow_output_links)
        return
    if positions is not None:
        usage_error(
            f"--positions: a causal-variable option, but {source} is a circuit-track submission, "
            "whose circuits have no token positions"
        )
    _import_and_verify(
        source, out_dir, output_format, "import_mib_submission", follow_output_links, options=options
    )


def _submission_track(source: Path, output_format: OutputFormat) -> str:
    """The track of the submission folder ``source``; a usage error when it is no folder, and
    the import's failure (I107) when its layout is neither track's."""
    from mibspec.importers import submission_layout

    if not source.is_dir():
        usage_error(f"{source}: no such folder")
    layout = submission_layout(source)
    track = layout.track
    if track is None:
        from mibspec.validator import catalogue, make_finding

        finding = make_finding(catalogue(), None, "I107", "", detail=layout.problem(source)).located(1, 1)
        render_import_failure(source, [finding], output_format)
    return track


#: The circuit track's options of ``import mib-submission``: field of SubmissionOptions → flag.
_CIRCUIT_FLAGS = {
    "model_revision": "--model-revision",
    "dataset": "--dataset",
    "split": "--split",
    "counterfactual_type": "--counterfactual-type",
    "architecture": "--architecture",
    "method": "--method",
    "model_files": "--model-files",
    "results": "--results",
}


def _refuse_circuit_options(source: Path, options: SubmissionOptions) -> None:
    """A usage error naming the circuit-track options given for a causal-variable submission."""
    given = [flag for name, flag in _CIRCUIT_FLAGS.items() if getattr(options, name) not in (None, ())]
    if given:
        usage_error(
            f"{', '.join(given)}: circuit-track option(s), but {source} is a causal-variable "
            "submission, whose featurizer documents name no model, dataset, method or results"
        )


def import_mib_circuit_results_command(
    sources: Annotated[
        list[Path],
        Argument(
            help="MIB circuit-track leaderboard results JSON files, or results pickles of MIB's "
            "run_evaluation.py (<task>_<model>_<split>_abs-<True|False>.pkl; read by a restricted "
            "unpickler that runs nothing)."
        ),
    ],
    out_dir: Annotated[
        Path,
        Option(
            "--output",
            "-o",
            help="Folder to write <task>_<model>_<method>/report.json into (a pickle's: "
            "<task>_<model>_<method>_<split>_<ranking>/).",
        ),
    ],
    model_revision: RevisionOption = None,
    dataset: DatasetOption = None,
    split: SplitOption = None,
    output_format: _FormatOption = OutputFormat.text,
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Import MIB circuit results as reports, then verify them (exit 1 lists what they lack)."""
    _import_results(
        sources,
        out_dir,
        output_format,
        "import_mib_circuit_results",
        follow_output_links,
        _report_options(model_revision, dataset, split),
    )


def import_mib_causal_results_command(
    sources: Annotated[
        list[Path], Argument(help="MIB causal-variable-track result JSON files (one variable each).")
    ],
    out_dir: Annotated[
        Path,
        Option("--output", "-o", help="Folder to write <task>_<model>_<method>_<variable>/report.json into."),
    ],
    model_revision: RevisionOption = None,
    dataset: DatasetOption = None,
    split: SplitOption = None,
    output_format: _FormatOption = OutputFormat.text,
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Import MIB causal-variable results as reports, then verify them (exit 1 lists what they lack)."""
    _import_results(
        sources,
        out_dir,
        output_format,
        "import_mib_causal_results",
        follow_output_links,
        _report_options(model_revision, dataset, split),
    )


def _import_results(
    sources: list[Path],
    out_dir: Path,
    output_format: OutputFormat,
    importer: str,
    follow_links: bool,
    options: dict[str, object],
) -> None:
    """Import results files (all or none), then verify and report what was written."""
    from mibspec import importers
    from mibspec.core.outputs import OutputPathError

    for source in sources:
        if not source.is_file():
            usage_error(f"{source}: no such file")
    check_outputs_or_exit([], sources, folders=[(out_dir, "--output")], follow_links=follow_links)
    try:
        result = getattr(importers, importer)(sources, followed(out_dir, follow_links), **options)
    except OutputPathError as exc:
        usage_error(str(exc))
    _report(sources, result, output_format)


def _with_revision_hints(verified: VerificationResult) -> VerificationResult:
    """``verified`` with each unpinned-model finding (A111) of an imported document saying what
    to pass: the import option, the model's hub id and where its commit can be found."""
    import json
    from dataclasses import replace

    from mibspec.core.hub_cache import revision_hint
    from mibspec.importers import hub_id

    for doc in verified.documents:
        for i, finding in enumerate(doc.findings):
            if finding.code != "A111":
                continue
            try:
                model = json.loads(Path(doc.path).read_text(encoding="utf-8"))["model"]["id"]
            except (OSError, ValueError, KeyError, TypeError):
                continue
            repo = hub_id(model)
            doc.findings[i] = replace(
                finding,
                message=f"{finding.message} (import again with --model-revision COMMIT, "
                f"the commit of {repo} on the hub)",
                hint=f"{revision_hint(repo)}",
            )
    return verified
