"""``mibspec verify``: strict parsing, schema, rules, then recomputation of claims.

Layered as the command line is throughout: click parses the options into a plain
:class:`VerifyArgs`; :func:`run` checks them (usage errors exit 2), verifies, writes the
report and the receipt, and returns the exit code. The validator, the reporters and the
receipt writer are imported when :func:`run` needs them, so building this command (and
``mibspec verify --help``) stays light.
"""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import click

from mibspec.cli._options import Argument, Option
from mibspec.cli._support import (
    EXIT_FINDINGS,
    EXIT_OK,
    DeviceOption,
    FollowLinksOption,
    check_outputs_or_exit,
    check_profile_or_exit,
    exit_on_internal_errors,
    usage_error,
)

if TYPE_CHECKING:
    from mibspec.validator import Limits, VerificationResult

__all__ = ["VerifyArgs", "VerifyFormat", "run", "verify_command"]


class VerifyFormat(str, enum.Enum):
    """Output formats of ``mibspec verify`` (see ``mibspec.verification.output_formats``)."""

    text = "text"
    json = "json"
    github = "github"
    sarif = "sarif"
    junit = "junit"


@dataclass(frozen=True)
class VerifyArgs:
    """The options of ``mibspec verify``, as given (checked by :func:`run`)."""

    paths: list[Path]
    output_format: str = "text"
    recompute: bool = True
    profile: str | None = None
    max_bytes: int = 64 * 1024 * 1024
    max_depth: int = 64
    max_values: int = 1_000_000
    max_findings: int = 1000
    max_recompute_seconds: float = 3600.0
    max_model_bytes: int = 8 * 1024**3
    max_recompute_bytes: int = 8 * 1024**3
    model_roots: tuple[Path, ...] = ()
    output: Path | None = None
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    error_on_warning: bool = False
    receipt: Path | None = None
    jobs: int = 1
    device: str = "cpu"
    batch_size: str | None = None
    executor: str = "process"
    address: str | None = None
    trust_hash_cache: bool = False
    follow_output_links: bool = False


@dataclass(frozen=True)
class _Checked:
    """What :func:`_check` resolved: the device, the batch size, the selected and ignored codes."""

    device: str
    batch_size: int | str | None
    select: tuple[str, ...]
    ignore: tuple[str, ...]


def run(args: VerifyArgs) -> int:
    """Verify as ``args`` say, write the report (and receipt); return the exit code.

    A usage error (exit 2) or a document mibspec itself failed on (exit 3) exits instead.
    """
    checked = _check(args)
    result = _verify(args, checked)
    _write_report(args, result)
    if args.receipt is not None:
        _write_receipt(args, checked, result, args.receipt)
    exit_on_internal_errors(result)
    warnings = sum(len(doc.warnings) for doc in result.documents)
    if result.valid and args.error_on_warning and warnings:
        click.echo(f"mibspec: failing on {warnings} warning(s) (--error-on-warning)", err=True)
        return EXIT_FINDINGS
    return EXIT_OK if result.valid else EXIT_FINDINGS


def _check(args: VerifyArgs) -> _Checked:
    """Every usage check made before verifying; a usage error exits 2."""
    _check_choices(args)
    device, size = _device(args)
    from mibspec.verification.api import collect_paths, resolve_codes

    try:
        selected = resolve_codes(args.select, "--select")
        ignored = resolve_codes(args.ignore, "--ignore")
        # Before the verification: every output can be written and none is a file it reads.
        check_outputs_or_exit(
            [(args.output, "--output"), (args.receipt, "--receipt")],
            collect_paths(args.paths),
            max_bytes=args.max_bytes,
            follow_links=args.follow_output_links,
        )
    except (ValueError, FileNotFoundError) as exc:
        usage_error(str(exc))
    if args.receipt is not None:  # before verifying: a receipt names files inside its folder only
        _check_receipt_folder(args, args.receipt)
    return _Checked(device, size, tuple(selected), tuple(ignored))


def _check_choices(args: VerifyArgs) -> None:
    """--profile, --executor and --address name what exists and go together."""
    import importlib.util

    check_profile_or_exit(args.profile)
    if args.executor not in ("process", "ray"):
        usage_error(f"--executor: expected process or ray, got {args.executor!r}")
    if args.address is not None and args.executor != "ray":
        usage_error("--address: only --executor ray joins a cluster")
    if args.executor == "ray" and importlib.util.find_spec("ray") is None:
        from mibspec.core.spec import install_hint

        usage_error(f"--executor ray needs the ray extra: {install_hint('ray')}")


def _device(args: VerifyArgs) -> tuple[str, int | str | None]:
    """The device and batch size recomputation runs with (checked even without it)."""
    from mibspec.verification.api import run_device

    try:
        return run_device(args.device, args.batch_size, args.recompute)
    except ValueError as exc:  # a malformed or absent device, a malformed batch size
        usage_error(f"--{exc}".replace("--batch_size:", "--batch-size:", 1))


def _check_receipt_folder(args: VerifyArgs, receipt: Path) -> None:
    """A usage error unless every input (and --model-root) lies inside the receipt's folder."""
    from mibspec.verification.api import collect_paths
    from mibspec.verification.receipt import outside_folder

    try:
        # Model files recomputation reads are named in the receipt too: each --model-root
        # must lie inside its folder as well.
        roots = [str(root) for root in args.model_roots] if args.recompute else []
        outside = outside_folder([*collect_paths(args.paths), *roots], receipt)
    except FileNotFoundError as exc:
        usage_error(str(exc))
    if outside is not None:
        usage_error(
            f"--receipt {receipt}: {outside} is outside the receipt's folder; a receipt names "
            "only files inside its own folder, so write it into a folder that holds every input "
            "and every --model-root"
        )


def _limits(args: VerifyArgs) -> Limits:
    from mibspec.validator import Limits

    return Limits(
        max_bytes=args.max_bytes,
        max_depth=args.max_depth,
        max_values=args.max_values,
        max_findings=args.max_findings,
        max_recompute_seconds=args.max_recompute_seconds,
        max_model_bytes=args.max_model_bytes,
        max_recompute_bytes=args.max_recompute_bytes,
    )


def _verify(args: VerifyArgs, checked: _Checked) -> VerificationResult:
    """Run the verification, with a progress bar on a terminal (not with -j processes)."""
    from mibspec.verification.api import verify
    from mibspec.verification.progress import TerminalProgress

    quiet = args.jobs > 1 and args.executor == "process"
    try:
        with TerminalProgress(enabled=False if quiet else None) as progress:
            return verify(
                *args.paths,
                recompute=args.recompute,
                skipped_because="disabled (--no-recompute)",
                profile=args.profile,
                limits=_limits(args),
                model_roots=args.model_roots,
                progress=progress,
                select=checked.select,
                ignore=checked.ignore,
                jobs=args.jobs,
                device=checked.device,
                batch_size=checked.batch_size,
                executor=args.executor,
                address=args.address,
                trust_hash_cache=args.trust_hash_cache,
            )
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        usage_error(str(exc))


def _write_report(args: VerifyArgs, result: VerificationResult) -> None:
    """Render the result in the chosen format on stdout or, atomically, into --output."""
    from mibspec.verification.output_formats import REPORTERS

    render = REPORTERS[args.output_format]
    if args.output is None:
        render(result, sys.stdout)
        return
    import io

    from mibspec.core.outputs import write_atomic

    buffer = io.StringIO()
    render(result, buffer)
    write_atomic(args.output, buffer.getvalue(), follow_links=args.follow_output_links)


def _write_receipt(args: VerifyArgs, checked: _Checked, result: VerificationResult, receipt: Path) -> None:
    from mibspec.verification.receipt import ReceiptError, write_receipt

    options = {
        "recompute": args.recompute,
        "profile": args.profile,
        "select": list(checked.select),
        "ignore": list(checked.ignore),
        "error_on_warning": args.error_on_warning,
        "max_bytes": args.max_bytes,
        "batch_size": checked.batch_size,
        "device": checked.device if args.recompute else None,
    }
    try:
        write_receipt(result, receipt, options=options, follow_links=args.follow_output_links)
    except ReceiptError as exc:  # a referenced file outside the receipt's folder
        usage_error(str(exc))


# The options, declared once here so that the command's signature stays readable.
_Paths = Annotated[
    list[Path], Argument(help="Documents, or folders: every report.json and *.report.json below them.")
]
_Format = Annotated[
    VerifyFormat,
    Option(
        "--format",
        "-f",
        help="text (for people), json (the stable contract), github (workflow annotations), "
        "sarif (SARIF 2.1.0), junit (JUnit XML).",
    ),
]
_NoRecompute = Annotated[
    bool, Option("--no-recompute", help="Skip recomputing claims from the model and artifacts.")
]
_Profile = Annotated[
    str | None, Option("--profile", help="Check under this profile instead of the declared one.")
]
_MaxBytes = Annotated[int, Option(help="Largest document accepted, in bytes.", min=1)]
_MaxDepth = Annotated[int, Option(help="Deepest JSON nesting accepted.", min=1)]
_MaxValues = Annotated[
    int, Option(help="Most JSON values (numbers, strings, arrays, ...) in one document.", min=1)
]
_MaxFindings = Annotated[
    int, Option(help="Most findings the parse, schema and rules stages report per document.", min=1)
]
_MaxRecomputeSeconds = Annotated[
    float,
    Option(
        help="Stop a report's recomputation after this many seconds (R105), and refuse before it "
        "starts declared work that cannot finish in them (R125); inf: no limit.",
        min=0.0,
    ),
]
_MaxRecomputeBytes = Annotated[
    int,
    Option(
        help="Most memory one step of a recomputation may hold besides the model, in bytes; "
        "declared work over it is refused before it starts (R125).",
        min=1,
    ),
]
_MaxModelBytes = Annotated[
    int,
    Option(
        help="Largest model recomputation reads and builds, in bytes: its files, and its "
        "parameters in the declared dtype (R107).",
        min=1,
    ),
]
_ModelRoot = Annotated[
    list[Path] | None,
    Option("--model-root", metavar="<path>", help="Extra folder to look up local models in (repeatable)."),
]
_Output = Annotated[
    Path | None, Option("--output", "-o", help="Write the report to this file instead of stdout.")
]
_Select = Annotated[
    list[str] | None,
    Option(
        "--select",
        metavar="<code>",
        help="Report only these codes, code prefixes (K1) or symbols; repeat or separate with commas.",
    ),
]
_Ignore = Annotated[
    list[str] | None,
    Option(
        "--ignore",
        metavar="<code>",
        help="Do not report these codes, code prefixes or symbols; repeat or separate with commas.",
    ),
]
_ErrorOnWarning = Annotated[
    bool, Option("--error-on-warning", help="Exit with 1 when a warning is reported.")
]
_Receipt = Annotated[
    Path | None,
    Option("--receipt", help="Write a verification receipt (hashes, environment, verdicts) here."),
]
_Jobs = Annotated[int, Option("--jobs", "-j", help="Verify report files in this many processes.", min=1)]
_BatchSize = Annotated[
    str | None,
    Option(
        "--batch-size",
        metavar="<n|auto>",
        help="Examples per forward pass of recomputation (default: the report's), or auto: "
        "chosen from free memory, halved on out-of-memory.",
    ),
]
_Executor = Annotated[
    str,
    Option(
        "--executor",
        choices=("process", "ray"),
        help="process (the -j processes on this machine) or ray (one Ray task per group of "
        "reports; needs the ray extra).",
    ),
]
_Address = Annotated[
    str | None,
    Option("--address", help="The Ray cluster to join (with --executor ray; default: a local one)."),
]
_TrustHashCache = Annotated[
    bool,
    Option(
        "--trust-hash-cache",
        help="Take model files' digests from the file-hash cache when a file's path, size, "
        "device, inode and times are unchanged, instead of hashing the bytes read (faster; "
        "trusts the file system, and says so with R111).",
    ),
]


def verify_command(
    paths: _Paths,
    output_format: _Format = VerifyFormat.text,
    no_recompute: _NoRecompute = False,
    profile: _Profile = None,
    max_bytes: _MaxBytes = 64 * 1024 * 1024,
    max_depth: _MaxDepth = 64,
    max_values: _MaxValues = 1_000_000,
    max_findings: _MaxFindings = 1000,
    max_recompute_seconds: _MaxRecomputeSeconds = 3600.0,
    max_model_bytes: _MaxModelBytes = 8 * 1024**3,
    max_recompute_bytes: _MaxRecomputeBytes = 8 * 1024**3,
    model_root: _ModelRoot = None,
    output: _Output = None,
    select: _Select = None,
    ignore: _Ignore = None,
    error_on_warning: _ErrorOnWarning = False,
    receipt: _Receipt = None,
    jobs: _Jobs = 1,
    device: DeviceOption = "cpu",
    batch_size: _BatchSize = None,
    executor: _Executor = "process",
    address: _Address = None,
    trust_hash_cache: _TrustHashCache = False,
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Check documents: strict parsing, schema, rules, then recomputation of claims."""
    args = VerifyArgs(
        paths=paths,
        output_format=output_format.value,
        recompute=not no_recompute,
        profile=profile,
        max_bytes=max_bytes,
        max_depth=max_depth,
        max_values=max_values,
        max_findings=max_findings,
        max_recompute_seconds=max_recompute_seconds,
        max_model_bytes=max_model_bytes,
        max_recompute_bytes=max_recompute_bytes,
        model_roots=tuple(model_root or ()),
        output=output,
        select=tuple(select or ()),
        ignore=tuple(ignore or ()),
        error_on_warning=error_on_warning,
        receipt=receipt,
        jobs=jobs,
        device=device,
        batch_size=batch_size,
        executor=executor,
        address=address,
        trust_hash_cache=trust_hash_cache,
        follow_output_links=follow_output_links,
    )
    raise click.exceptions.Exit(run(args))
