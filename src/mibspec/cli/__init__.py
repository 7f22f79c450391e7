"""The ``mibspec`` command: a thin layer over the Python API.

Exit codes: 0 conformant, 1 error-level findings, 2 usage error or unreadable
path, 3 internal error.
"""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from mibspec.cli._support import (
    EXIT_FINDINGS,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    IMPORT_CHECKS_ONLY,
    DeviceOption,
    check_outputs_or_exit,
    exit_on_internal_errors,
    usage_error,
)
from mibspec.cli.imports import PositionsOption
from mibspec.core.display import visible
from mibspec.core.version import __version__

app = typer.Typer(
    name="mibspec",
    help="Verify interpretability benchmark reports against the mibspec standard.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
schema_app = typer.Typer(help="List, show and export the spec's JSON Schemas.", no_args_is_help=True)
app.add_typer(schema_app, name="schema")
import_app = typer.Typer(
    help="Convert files written by other tools into mibspec documents.", no_args_is_help=True
)
app.add_typer(import_app, name="import")
score_app = typer.Typer(
    help="Run a reference method on a model and a dataset and write a complete report.",
    no_args_is_help=True,
)
app.add_typer(score_app, name="score")


class OutputFormat(str, enum.Enum):
    text = "text"
    json = "json"


class VerifyFormat(str, enum.Enum):
    """Output formats of ``mibspec verify`` (see ``mibspec._output_formats``)."""

    text = "text"
    json = "json"
    github = "github"
    sarif = "sarif"
    junit = "junit"


class CiteFormat(str, enum.Enum):
    bibtex = "bibtex"
    text = "text"
    cff = "cff"


def _version(value: bool) -> None:
    if value:
        from mibspec._verify_api import SPEC_VERSION

        typer.echo(f"mibspec {__version__} (spec {SPEC_VERSION})")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """Verify interpretability benchmark reports against the mibspec standard."""


@app.command()
def verify(
    paths: Annotated[list[Path], typer.Argument(help="Documents, or folders holding report.json files.")],
    output_format: Annotated[
        VerifyFormat,
        typer.Option(
            "--format",
            "-f",
            help="text (for people), json (the stable contract), github (workflow annotations), "
            "sarif (SARIF 2.1.0), junit (JUnit XML).",
        ),
    ] = VerifyFormat.text,
    no_recompute: Annotated[
        bool, typer.Option("--no-recompute", help="Skip recomputing claims from the model and artifacts.")
    ] = False,
    profile: Annotated[
        str | None, typer.Option("--profile", help="Check under this profile instead of the declared one.")
    ] = None,
    max_bytes: Annotated[int, typer.Option(help="Largest document accepted, in bytes.", min=1)] = 64
    * 1024
    * 1024,
    max_depth: Annotated[int, typer.Option(help="Deepest JSON nesting accepted.", min=1)] = 64,
    max_values: Annotated[
        int, typer.Option(help="Most JSON values (numbers, strings, arrays, ...) in one document.", min=1)
    ] = 1_000_000,
    max_findings: Annotated[
        int, typer.Option(help="Most findings the parse, schema and rules stages report per document.", min=1)
    ] = 1000,
    max_recompute_seconds: Annotated[
        float | None,
        typer.Option(help="Stop a report's recomputation after this many seconds (R105).", min=0.0),
    ] = None,
    max_model_bytes: Annotated[
        int,
        typer.Option(
            help="Largest model recomputation reads and builds, in bytes: its files, and its "
            "parameters in the declared dtype (R107).",
            min=1,
        ),
    ] = 8 * 1024**3,
    model_root: Annotated[
        list[Path] | None,
        typer.Option(
            "--model-root", metavar="<path>", help="Extra folder to look up local models in (repeatable)."
        ),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the report to this file instead of stdout.")
    ] = None,
    select: Annotated[
        list[str] | None,
        typer.Option(
            "--select",
            metavar="<code>",
            help="Report only these codes, code prefixes (K1) or symbols; repeat or separate with commas.",
        ),
    ] = None,
    ignore: Annotated[
        list[str] | None,
        typer.Option(
            "--ignore",
            metavar="<code>",
            help="Do not report these codes, code prefixes or symbols; repeat or separate with commas.",
        ),
    ] = None,
    error_on_warning: Annotated[
        bool, typer.Option("--error-on-warning", help="Exit with 1 when a warning is reported.")
    ] = False,
    receipt: Annotated[
        Path | None,
        typer.Option("--receipt", help="Write a verification receipt (hashes, environment, verdicts) here."),
    ] = None,
    jobs: Annotated[
        int, typer.Option("--jobs", "-j", help="Verify report files in this many processes.", min=1)
    ] = 1,
    device: DeviceOption = "cpu",
    batch_size: Annotated[
        str | None,
        typer.Option(
            "--batch-size",
            metavar="<n|auto>",
            help="Examples per forward pass of recomputation (default: the report's), or auto: "
            "chosen from free memory, halved on out-of-memory.",
        ),
    ] = None,
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            help="process (the -j processes on this machine) or ray (one Ray task per group of "
            "reports; needs the ray extra).",
        ),
    ] = "process",
    address: Annotated[
        str | None,
        typer.Option(
            "--address", help="The Ray cluster to join (with --executor ray; default: a local one)."
        ),
    ] = None,
    no_hash_cache: Annotated[
        bool,
        typer.Option(
            "--no-hash-cache",
            help="Hash every model file again instead of reusing digests of unchanged files from "
            "the file-hash cache.",
        ),
    ] = False,
) -> None:
    """Check documents: strict parsing, schema, rules, then recomputation of claims."""
    import importlib.util
    import io

    from mibspec._output_formats import REPORTERS
    from mibspec._progress import TerminalProgress
    from mibspec._verify_api import collect_paths, resolve_codes, run_device
    from mibspec._verify_api import verify as run_verify
    from mibspec.validator import Limits, known_profiles

    if profile is not None and profile not in known_profiles():
        usage_error(f"unknown profile {profile!r}; known profiles: {', '.join(known_profiles())}")
    if executor not in ("process", "ray"):
        usage_error(f"--executor: expected process or ray, got {executor!r}")
    if address is not None and executor != "ray":
        usage_error("--address: only --executor ray joins a cluster")
    if executor == "ray" and importlib.util.find_spec("ray") is None:
        from mibspec.core.spec import install_hint

        usage_error(f"--executor ray needs the ray extra: {install_hint('ray')}")
    try:
        device, size = run_device(device, batch_size, not no_recompute)
    except ValueError as exc:  # a malformed or absent device, a malformed batch size
        usage_error(f"--{exc}".replace("--batch_size:", "--batch-size:", 1))
        return
    try:
        selected, ignored = resolve_codes(select or (), "--select"), resolve_codes(ignore or (), "--ignore")
        # Before the verification: every output can be written and none is a file it reads.
        check_outputs_or_exit(
            [(output, "--output"), (receipt, "--receipt")], collect_paths(paths), max_bytes=max_bytes
        )
    except (ValueError, FileNotFoundError) as exc:
        usage_error(str(exc))
        return
    if receipt is not None:  # before verifying: a receipt names files inside its folder only
        from mibspec._receipt import outside_folder
        from mibspec._verify_api import collect_paths

        try:
            # Model files recomputation reads are named in the receipt too: each --model-root
            # must lie inside its folder as well.
            roots = [] if no_recompute else [str(root) for root in (model_root or ())]
            outside = outside_folder([*collect_paths(paths), *roots], receipt)
        except FileNotFoundError as exc:
            usage_error(str(exc))
            return
        if outside is not None:
            usage_error(
                f"--receipt {receipt}: {outside} is outside the receipt's folder; a receipt names "
                "only files inside its own folder, so write it into a folder that holds every input "
                "and every --model-root"
            )
    try:
        with TerminalProgress(enabled=False if jobs > 1 and executor == "process" else None) as progress:
            result = run_verify(
                *paths,
                recompute=not no_recompute,
                skipped_because="disabled (--no-recompute)",
                profile=profile,
                limits=Limits(
                    max_bytes=max_bytes,
                    max_depth=max_depth,
                    max_values=max_values,
                    max_findings=max_findings,
                    max_recompute_seconds=max_recompute_seconds,
                    max_model_bytes=max_model_bytes,
                ),
                model_roots=model_root or (),
                progress=progress,
                select=selected,
                ignore=ignored,
                jobs=jobs,
                device=device,
                batch_size=size,
                executor=executor,
                address=address,
                hash_cache=not no_hash_cache,
            )
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        usage_error(str(exc))
        return
    render = REPORTERS[output_format.value]
    if output is None:
        render(result, sys.stdout)
    else:
        from mibspec.core.outputs import write_atomic

        buffer = io.StringIO()
        render(result, buffer)
        write_atomic(output, buffer.getvalue())
    if receipt is not None:
        from mibspec._receipt import ReceiptError, write_receipt

        try:
            write_receipt(
                result,
                receipt,
                options={
                    "recompute": not no_recompute,
                    "profile": profile,
                    "select": list(selected),
                    "ignore": list(ignored),
                    "error_on_warning": error_on_warning,
                    "max_bytes": max_bytes,
                    "batch_size": size,
                    "device": None if no_recompute else device,
                },
            )
        except ReceiptError as exc:  # a referenced file outside the receipt's folder
            usage_error(str(exc))
    exit_on_internal_errors(result)
    warnings = sum(len(doc.warnings) for doc in result.documents)
    if result.valid and error_on_warning and warnings:
        typer.echo(f"mibspec: failing on {warnings} warning(s) (--error-on-warning)", err=True)
        raise typer.Exit(EXIT_FINDINGS)
    raise typer.Exit(EXIT_OK if result.valid else EXIT_FINDINGS)


@app.command("verify-receipt")
def verify_receipt(
    receipt: Annotated[Path, typer.Argument(help="A receipt written by `mibspec verify --receipt`.")],
    output_format: Annotated[OutputFormat, typer.Option("--format", "-f")] = OutputFormat.text,
) -> None:
    """Re-hash the files a receipt lists (no recomputation); exit 1 listing what changed."""
    from mibspec._receipt import ReceiptError, check_receipt

    try:
        check = check_receipt(receipt)
    except ReceiptError as exc:
        usage_error(str(exc))
        return
    if output_format is OutputFormat.json:
        typer.echo(json.dumps(check.to_json(), indent=2, ensure_ascii=False))
    else:
        for line in check.lines():
            typer.echo(visible(line))
    raise typer.Exit(EXIT_OK if check.unchanged else EXIT_FINDINGS)


@app.command()
def rules(
    code: Annotated[str | None, typer.Argument(help="A rule code or symbol to explain.")] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format", "-f")] = OutputFormat.text,
    coverage: Annotated[
        bool,
        typer.Option(
            "--coverage",
            help="Print each MUST of the spec with the rules, schema constraints or stated reason "
            "covering it.",
        ),
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="With --coverage: exit 1 when a MUST is not covered or SPEC.md's coverage section "
            "is out of date.",
        ),
    ] = False,
    update_spec: Annotated[
        bool, typer.Option("--update-spec", help="With --coverage: rewrite SPEC.md's coverage section.")
    ] = False,
) -> None:
    """List the rule catalogue, or explain one rule, or show the spec's requirement coverage."""
    from mibspec.validator import catalogue

    if check or update_spec or coverage:
        if code is not None or not coverage:
            usage_error("--check and --update-spec go with --coverage, without a rule code")
            return
        _rules_coverage(output_format, check=check, update_spec=update_spec)
        return
    cat = catalogue()
    if code is not None:
        try:
            info = cat.get(code)
        except KeyError:
            usage_error(f"no rule {code!r}; run `mibspec rules` for the list")
            return
        if output_format is OutputFormat.json:
            typer.echo(json.dumps(info.__dict__ | {"severity": info.severity.value}, indent=2))
            return
        typer.echo(f"{info.code} {info.symbol} ({info.severity.value}, {info.stage} stage)")
        typer.echo(f"  {info.summary}")
        typer.echo(f"  family: {cat.families[info.code[0]]}")
        typer.echo(f"  requirement: {info.requirement} in spec/v1/SPEC.md")
        if info.enforces:
            typer.echo(f"  also checks: {', '.join(info.enforces)} (see `mibspec rules --coverage`)")
        typer.echo(f"  message: {info.message}")
        return
    if output_format is OutputFormat.json:
        typer.echo(json.dumps([r.__dict__ | {"severity": r.severity.value} for r in cat.rules], indent=2))
        return
    for info in cat.rules:
        typer.echo(f"{info.code}  {info.symbol:<30} {info.severity.value:<8} {info.summary}")


def _rules_coverage(output_format: OutputFormat, *, check: bool, update_spec: bool) -> None:
    from mibspec._coverage import coverage, coverage_problems, markdown_table, spec_path, spec_with_section

    rows = coverage()
    if output_format is OutputFormat.json:
        typer.echo(json.dumps([row.to_json() for row in rows], indent=2, ensure_ascii=False))
    else:
        typer.echo(markdown_table(rows), nl=False)
    path = spec_path()
    text = path.read_text(encoding="utf-8")
    fresh = spec_with_section(text)
    if update_spec and fresh != text:
        path.write_text(fresh, encoding="utf-8")
        text = fresh
    if not check:
        return
    problems = coverage_problems()
    if fresh != text:
        problems.append(
            f"{path}: the coverage section is out of date; run `mibspec rules --coverage --update-spec`"
        )
    for problem in problems:
        typer.echo(f"error: {visible(problem)}", err=True)
    raise typer.Exit(EXIT_FINDINGS if problems else EXIT_OK)


def _schema_files() -> list[Path]:
    """The schema files of the current spec version, by name."""
    from mibspec.core.spec import spec_dir

    return sorted((spec_dir() / "schemas").glob("*.schema.json"))


@schema_app.command("list")
def schema_list() -> None:
    """List the schemas of the spec version: kind (what `schema show` takes), file and $id."""
    from mibspec._verify_api import SPEC_VERSION, schema_bundle_hash
    from mibspec.core.spec import load_spec_json

    files = _schema_files()
    typer.echo(f"spec {SPEC_VERSION}: {len(files)} schemas, bundle sha256 {schema_bundle_hash(SPEC_VERSION)}")
    for path in files:
        schema = load_spec_json(SPEC_VERSION, f"schemas/{path.name}")
        typer.echo(f"{path.name.removesuffix('.schema.json'):<26} {path.name:<38} {schema['$id']}")


@schema_app.command("show")
def schema_show(kind: Annotated[str, typer.Argument(help="Document kind or schema name.")]) -> None:
    """Print one schema (JSON), e.g. `mibspec schema show report`."""
    by_kind = {path.name.removesuffix(".schema.json"): path for path in _schema_files()}
    path = by_kind.get(kind.removesuffix(".schema.json"))
    if path is None:
        usage_error(f"no schema {kind!r}; the kinds are {', '.join(by_kind)}")
        return
    typer.echo(path.read_text(encoding="utf-8"), nl=False)


@schema_app.command("export")
def schema_export(
    directory: Annotated[Path, typer.Argument(help="Folder to write the schemas into (made if missing).")],
) -> None:
    """Write the spec version's schema bundle into a folder (for editors and offline hooks)."""
    from mibspec.core.outputs import write_atomic

    files = _schema_files()
    # The bundle's own folder is an input: exporting into it would overwrite the spec.
    check_outputs_or_exit(
        [(directory / path.name, "DIR") for path in files],
        [files[0].parent] if files else [],
        folders=[(directory, "DIR")],
    )
    for path in files:
        write_atomic(directory / path.name, path.read_bytes())
        typer.echo(str(directory / path.name))


def _render_import_failure(source: Path, findings: list[Any], output_format: OutputFormat) -> NoReturn:
    """Report the findings of an input that could not be imported; exit 1."""
    from mibspec._output_formats import REPORTERS
    from mibspec.validator import DocumentResult, Stage, StageStatus, VerificationResult

    failed = DocumentResult(path=str(source), kind=None, findings=findings)
    failed.set_stage(Stage.PARSE, StageStatus.FAILED, "the file could not be imported")
    REPORTERS[output_format.value](VerificationResult(documents=[failed]), sys.stdout)
    raise typer.Exit(EXIT_FINDINGS)


def _import_and_verify(
    source: Path, out_dir: Path, output_format: OutputFormat, importer: str, **options: object
) -> None:
    """Run an importer, report its findings, or verify and report what it wrote."""
    from mibspec import importers
    from mibspec._output_formats import REPORTERS
    from mibspec._verify_api import verify as run_verify
    from mibspec.core.outputs import OutputPathError

    if not (source.is_dir() if importer == "import_mib_submission" else source.is_file()):
        usage_error(f"{source}: no such {'folder' if importer == 'import_mib_submission' else 'file'}")
    check_outputs_or_exit([], [source], folders=[(out_dir, "--output")])
    render = REPORTERS[output_format.value]
    try:
        result = getattr(importers, importer)(source, out_dir, **options)
    except OutputPathError as exc:
        usage_error(str(exc))
        return
    for note in getattr(result, "notes", ()):
        typer.echo(f"mibspec: note: {visible(note)}", err=True)
    if not result.ok:
        _render_import_failure(source, result.findings, output_format)
    verified = run_verify(*result.written, recompute=False, skipped_because=IMPORT_CHECKS_ONLY)
    render(verified, sys.stdout)
    exit_on_internal_errors(verified)
    raise typer.Exit(EXIT_OK if verified.valid else EXIT_FINDINGS)


FormatOption = Annotated[OutputFormat, typer.Option("--format", "-f", help="Output format.")]
RevisionOption = Annotated[
    str | None, typer.Option("--model-revision", help="The model's 40-hex hub commit (pins it: rule A111).")
]
DatasetOption = Annotated[
    str | None,
    typer.Option(
        "--dataset",
        help="A counterfactual-dataset document (copied beside each report), or a hub id pinned as "
        "ID@40-HEX-REVISION.",
    ),
]
SplitOption = Annotated[
    str | None, typer.Option("--split", help="The split the results are on: train, validation, test.")
]


def _report_options(revision: str | None, dataset: str | None, split: str | None) -> dict[str, object]:
    from mibspec.importers import ImportOptions

    return {"options": ImportOptions(model_revision=revision, dataset=dataset, split=split)}


@import_app.command("eap-ig")
def import_eap_ig_command(
    source: Annotated[
        Path, typer.Argument(help="An EAP-IG graph: .json or .pt (read with weights_only=True).")
    ],
    out_dir: Annotated[
        Path, typer.Option("--output", "-o", help="Folder to write circuit.json and its sidecar into.")
    ],
    model: Annotated[
        str | None, typer.Option("--model", help="The MIB model id of the graph (gpt2, qwen2.5, ...).")
    ] = None,
    model_revision: RevisionOption = None,
    dataset: DatasetOption = None,
    split: SplitOption = None,
    output_format: FormatOption = OutputFormat.text,
) -> None:
    """Import an EAP-IG graph as a circuit document, then verify what was written."""
    if dataset is not None or split is not None:
        usage_error(
            "--dataset and --split describe a report's task; a circuit document has none: give them to "
            "`mibspec import mib-submission`, which writes the report"
        )
    if model_revision is not None and model is None:
        usage_error("--model-revision needs --model (the MIB model id it pins)")
    _import_and_verify(
        source, out_dir, output_format, "import_eap_ig", model=model, model_revision=model_revision
    )


@import_app.command("mib-submission")
def import_mib_submission_command(
    source: Annotated[
        Path,
        typer.Argument(
            help="A MIB submission folder of either track: <task>_<model> folders (circuit track) or "
            "<TASK>_<MODEL>_<VARIABLE> folders (causal-variable track); the layout is detected."
        ),
    ],
    out_dir: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="Folder to write <task>_<model>/circuit.json (and report.json), or "
            "<TASK>_<MODEL>_<VARIABLE>/<unit>.json, into.",
        ),
    ],
    model_revision: RevisionOption = None,
    dataset: DatasetOption = None,
    split: SplitOption = None,
    counterfactual_type: Annotated[
        str | None,
        typer.Option(
            "--counterfactual-type", help="The dataset's counterfactual type used as the corrupted run."
        ),
    ] = None,
    architecture: Annotated[
        str | None, typer.Option("--architecture", help="Architecture of a model outside MIB's five.")
    ] = None,
    method: Annotated[
        str | None, typer.Option("--method", help="Method name (default: the submission folder's parent).")
    ] = None,
    model_files: Annotated[
        Path | None,
        typer.Option(
            "--model-files", help="A local copy of the model: pin its files by SHA-256 (rule R106)."
        ),
    ] = None,
    positions: PositionsOption = None,
    output_format: FormatOption = OutputFormat.text,
) -> None:
    """Import a MIB submission folder of either track, then verify what was written.

    Circuit track: circuit documents (and reports where results are present). Causal-variable
    track: featurizer documents (never the submission's code; token positions from
    --positions). The options before --positions apply to the circuit track only.
    """
    from mibspec.importers import SubmissionOptions, submission_layout

    if not source.is_dir():
        usage_error(f"{source}: no such folder")
    layout = submission_layout(source)
    if layout.track is None:
        from mibspec.validator import catalogue, make_finding

        finding = make_finding(catalogue(), None, "I107", "", detail=layout.problem(source)).located(1, 1)
        _render_import_failure(source, [finding], output_format)
    circuit_options = {
        "--model-revision": model_revision,
        "--dataset": dataset,
        "--split": split,
        "--counterfactual-type": counterfactual_type,
        "--architecture": architecture,
        "--method": method,
        "--model-files": model_files,
    }
    if layout.track == "causal_variable":
        given = [name for name, value in circuit_options.items() if value is not None]
        if given:
            usage_error(
                f"{', '.join(given)}: circuit-track option(s), but {source} is a causal-variable "
                "submission, whose featurizer documents name no model, dataset or method"
            )
        from mibspec.cli.imports import run_cv_import

        run_cv_import(source, out_dir, positions, output_format.value)
        return
    if positions is not None:
        usage_error(
            f"--positions: a causal-variable option, but {source} is a circuit-track submission, "
            "whose circuits have no token positions"
        )
    options = SubmissionOptions(
        model_revision=model_revision,
        dataset=dataset,
        split=split,
        counterfactual_type=counterfactual_type,
        architecture=architecture,
        method=method,
        model_files=model_files,
    )
    _import_and_verify(source, out_dir, output_format, "import_mib_submission", options=options)


@import_app.command("mib-circuit-results")
def import_mib_circuit_results_command(
    source: Annotated[Path, typer.Argument(help="A MIB circuit-track leaderboard results JSON file.")],
    out_dir: Annotated[
        Path, typer.Option("--output", "-o", help="Folder to write <task>_<model>/report.json into.")
    ],
    model_revision: RevisionOption = None,
    dataset: DatasetOption = None,
    split: SplitOption = None,
    output_format: FormatOption = OutputFormat.text,
) -> None:
    """Import MIB circuit results as reports, then verify them (exit 1 lists what they lack)."""
    options = _report_options(model_revision, dataset, split)
    _import_and_verify(source, out_dir, output_format, "import_mib_circuit_results", **options)


@import_app.command("mib-causal-results")
def import_mib_causal_results_command(
    source: Annotated[Path, typer.Argument(help="A MIB causal-variable-track result JSON file.")],
    out_dir: Annotated[
        Path,
        typer.Option("--output", "-o", help="Folder to write <task>_<model>_<method>/report.json into."),
    ],
    model_revision: RevisionOption = None,
    dataset: DatasetOption = None,
    split: SplitOption = None,
    output_format: FormatOption = OutputFormat.text,
) -> None:
    """Import MIB causal-variable results as a report, then verify it (exit 1 lists what it lacks)."""
    options = _report_options(model_revision, dataset, split)
    _import_and_verify(source, out_dir, output_format, "import_mib_causal_results", **options)


def _register_export_commands() -> None:
    # export eap-ig, export mib-submission: implemented in mibspec.cli.exports.
    from mibspec.cli.exports import register

    register(app)


_register_export_commands()


@app.command()
def cite(output_format: Annotated[CiteFormat, typer.Option("--format", "-f")] = CiteFormat.bibtex) -> None:
    """How to cite the spec version and the exact schema bundle a report was checked with."""
    from mibspec._citation import citation_bibtex, citation_cff, citation_text

    render = {
        CiteFormat.bibtex: citation_bibtex,
        CiteFormat.cff: citation_cff,
        CiteFormat.text: citation_text,
    }
    typer.echo(render[output_format](), nl=False)


def _register_score_commands() -> None:
    import importlib

    from mibspec.core.tracks import TRACKS

    for track in TRACKS.values():
        importlib.import_module(track.score_command).register(score_app)


_register_score_commands()


def _register_report_commands() -> None:
    # report, leaderboard, conformance run, migrate: implemented in mibspec.cli.report_page.
    from mibspec.cli.report_page import register

    register(app)


_register_report_commands()


def _register_mib_commands() -> None:
    # MIB datasets and causal-variable submissions: implemented in mibspec.cli.imports.
    from mibspec.cli.exports import export_app
    from mibspec.cli.imports import register

    register(import_app, export_app)


_register_mib_commands()


def _register_parity_command() -> None:
    # parity circuit: implemented in mibspec.cli.parity (the public code runs in its own env).
    from mibspec.cli.parity import register

    register(app)


_register_parity_command()


def main() -> None:
    """Console entry point: maps every failure to a documented exit code, never a traceback."""
    from mibspec.validator import InternalError

    try:
        app(standalone_mode=True)
    except InternalError as exc:
        typer.echo(f"mibspec: internal error: {visible(str(exc))}", err=True)
        sys.exit(EXIT_INTERNAL)
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as exc:  # a path the system refused: too long, unreadable, unwritable, a full disk
        where = f"{exc.filename}: " if exc.filename else ""
        typer.echo(f"mibspec: error: {where}{exc.strerror or exc}", err=True)
        sys.exit(EXIT_USAGE)
    except Exception as exc:  # a defect in mibspec, reported as such
        typer.echo(f"mibspec: internal error: {type(exc).__name__}: {visible(str(exc))}", err=True)
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()
