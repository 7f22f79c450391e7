"""The options of a verification, declared once: :class:`VerificationRequest`.

Each field of the request is one option of ``mibspec verify`` and (unless it concerns only
what the command writes) one keyword of :func:`mibspec.verify`: its name, type and default
are the field's, its help, flags and bounds the :class:`Declared` in the field's metadata.
The command's click options (:mod:`mibspec.cli.verify`), the options that other commands
share with it (``--model-root``, ``--device``, ``--batch-size``) and the API's keywords are
derived from these fields; ``tests/verification/test_request.py`` keeps them equal.

A request is checked once, by :func:`check_request`, into a :class:`CheckedRequest`: the
device resolved (when recomputation runs), the batch size parsed, the rule codes resolved,
the paths expanded to report files, the outputs checked. A bad value raises
:class:`RequestError` (a ``ValueError`` naming the field; the command line shows it as a
usage error naming the flag), a missing path ``FileNotFoundError``.

This module imports only the standard library, :mod:`mibspec.core` and the device names of
:mod:`mibspec.reference_impl.devices` (which import no torch): the command line builds
``mibspec verify`` from it before anything heavier is imported.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import inspect
import os
import textwrap
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mibspec.core.progress import Progress
from mibspec.core.recompute_context import RECOMPUTE_NOT_REQUESTED
from mibspec.core.strict_json import DEFAULT_LIMITS, Limits
from mibspec.reference_impl.devices import DeviceError

__all__ = [
    "EXECUTORS",
    "OUTPUT_FORMATS",
    "CheckedRequest",
    "Declared",
    "DeviceRequestError",
    "RequestError",
    "VerificationRequest",
    "api_docs",
    "api_keywords",
    "api_signature",
    "check_request",
    "declared",
    "request_from_keywords",
]

#: ``output_format``: the reporters of :mod:`mibspec.verification.output_formats` (named here so
#: that building the command does not import them; a test keeps the two equal).
OUTPUT_FORMATS = ("text", "json", "github", "sarif", "junit")
#: ``executor``: where grouped verification runs (:mod:`mibspec.verification.grouping`).
EXECUTORS = ("process", "ray")

Surface = Literal["cli", "api"]


@dataclass(frozen=True)
class Declared:
    """How one option of a verification is given: its help, and on the command line its
    flags (default ``--field-name``), metavar, lower bound or choices.

    Attributes:
        help: one line for ``--help`` (and the API's documentation).
        flags: the command line's names; a ``bool`` with flags is a lone flag.
        metavar: what ``--help`` shows for the value.
        min: the least value of a number (the command line refuses smaller ones).
        choices: the values a ``str`` may take.
        where: the surfaces that take the option: the command line, the Python API.
        cli_name: the command's parameter name when it is not the field's (``--model-root``
            gives ``model_roots``).
        negated: the flag sets the field to ``False`` (``--no-recompute``).
        cli_type: the command line's type when it is not the field's (a repeatable option is
            a ``list``; ``--batch-size`` is read as text, ``auto`` or a number).
        expands: for a field holding a record of limits: the record's fields the command line
            gives as options of their own, each declared here.
        positional: the command line takes it as its arguments, not as an option.
        cli_help: the command line's help when its flag reads otherwise (``--no-recompute``).
        more: what the API's documentation says besides the help.
    """

    help: str
    flags: tuple[str, ...] = ()
    metavar: str | None = None
    min: float | None = None
    choices: tuple[str, ...] | None = None
    where: tuple[Surface, ...] = ("cli", "api")
    cli_name: str | None = None
    negated: bool = False
    cli_type: Any = None
    expands: tuple[tuple[str, Declared], ...] = ()
    positional: bool = False
    cli_help: str | None = None
    more: str = ""


def _declared(declaration: Declared) -> dict[str, Declared]:
    """A field's metadata: its declaration."""
    return {"declared": declaration}


def _limit(help: str, minimum: float) -> Declared:
    return Declared(help=help, min=minimum)


#: The limits ``mibspec verify`` takes one option each for (the others keep their defaults).
_LIMIT_OPTIONS: tuple[tuple[str, Declared], ...] = (
    ("max_bytes", _limit("Largest document accepted, in bytes.", 1)),
    ("max_depth", _limit("Deepest JSON nesting accepted.", 1)),
    ("max_values", _limit("Most JSON values (numbers, strings, arrays, ...) in one document.", 1)),
    ("max_findings", _limit("Most findings the parse, schema and rules stages report per document.", 1)),
    (
        "max_recompute_seconds",
        _limit(
            "Stop a report's recomputation after this many seconds (R105), and refuse before it "
            "starts declared work that cannot finish in them (R125); inf: no limit.",
            0.0,
        ),
    ),
    (
        "max_model_bytes",
        _limit(
            "Largest model recomputation reads and builds, in bytes: its files, and its "
            "parameters in the declared dtype (R107).",
            1,
        ),
    ),
    (
        "max_recompute_bytes",
        _limit(
            "Most memory one step of a recomputation may hold besides the model, in bytes; "
            "declared work over it is refused before it starts (R125).",
            1,
        ),
    ),
)


@dataclass(frozen=True)
class VerificationRequest:
    """What a verification is asked to do: every option of ``mibspec verify`` and of
    :func:`mibspec.verify`, as given (see :func:`check_request`)."""

    paths: tuple[str | os.PathLike[str], ...] = field(
        default=(),
        metadata=_declared(
            Declared(
                help="Documents, or folders: every report.json and *.report.json below them.",
                cli_type=list[Path],
                positional=True,
            )
        ),
    )
    output_format: str = field(
        default="text",
        metadata=_declared(
            Declared(
                help="text (for people), json (the stable contract), github (workflow annotations), "
                "sarif (SARIF 2.1.0), junit (JUnit XML).",
                flags=("--format", "-f"),
                choices=OUTPUT_FORMATS,
                where=("cli",),
            )
        ),
    )
    recompute: bool = field(
        default=True,
        metadata=_declared(
            Declared(
                help="Recompute claims from the model and artifacts (needs the recompute extra).",
                cli_help="Skip recomputing claims from the model and artifacts.",
                flags=("--no-recompute",),
                cli_name="no_recompute",
                negated=True,
            )
        ),
    )
    profile: str | None = field(
        default=None,
        metadata=_declared(
            Declared(help="Check under this profile instead of the declared one.", flags=("--profile",))
        ),
    )
    limits: Limits = field(
        default=DEFAULT_LIMITS,
        metadata=_declared(
            Declared(help="Parse and recomputation limits (a ``Limits``)", expands=_LIMIT_OPTIONS)
        ),
    )
    model_roots: tuple[str | os.PathLike[str], ...] = field(
        default=(),
        metadata=_declared(
            Declared(
                help="Extra folder to look up local models in (repeatable).",
                flags=("--model-root",),
                metavar="<path>",
                cli_name="model_root",
                cli_type=list[Path] | None,
            )
        ),
    )
    output: Path | None = field(
        default=None,
        metadata=_declared(
            Declared(
                help="Write the report to this file instead of stdout.",
                flags=("--output", "-o"),
                where=("cli",),
            )
        ),
    )
    select: tuple[str, ...] = field(
        default=(),
        metadata=_declared(
            Declared(
                help="Report only these codes, code prefixes (K1) or symbols; repeat or separate "
                "with commas.",
                flags=("--select",),
                metavar="<code>",
                more="Filtered rules-stage codes do not fail the rules stage (like a profile's "
                "``off``); findings of the other stages are only dropped from the result, and a "
                "stage that failed still fails its document (see ``resolve_codes``).",
                cli_type=list[str] | None,
            )
        ),
    )
    ignore: tuple[str, ...] = field(
        default=(),
        metadata=_declared(
            Declared(
                help="Do not report these codes, code prefixes or symbols; repeat or separate with commas.",
                flags=("--ignore",),
                metavar="<code>",
                more="As for ``select``.",
                cli_type=list[str] | None,
            )
        ),
    )
    error_on_warning: bool = field(
        default=False,
        metadata=_declared(
            Declared(
                help="Exit with 1 when a warning is reported.", flags=("--error-on-warning",), where=("cli",)
            )
        ),
    )
    receipt: Path | None = field(
        default=None,
        metadata=_declared(
            Declared(
                help="Write a verification receipt (hashes, environment, verdicts) here.",
                flags=("--receipt",),
                where=("cli",),
            )
        ),
    )
    jobs: int = field(
        default=1,
        metadata=_declared(
            Declared(help="Verify report files in this many processes.", flags=("--jobs", "-j"), min=1)
        ),
    )
    device: str = field(
        default="cpu",
        metadata=_declared(
            Declared(
                help="Where the model computes; auto: CUDA if present, else MPS, else the CPU.",
                flags=("--device",),
                metavar="<cpu|cuda|cuda:N|mps|auto>",
                more="Resolved once, when recomputation runs, to one present on this machine "
                "(``cpu``, ``cuda:N`` or ``mps``); without it, only checked for its form.",
            )
        ),
    )
    batch_size: int | str | None = field(
        default=None,
        metadata=_declared(
            Declared(
                help="Examples per forward pass of recomputation (default: the report's), or auto: "
                "chosen from free memory, halved on out-of-memory.",
                flags=("--batch-size",),
                metavar="<n|auto>",
                more='A positive integer or ``"auto"``; results depend on it by '
                "floating-point reassociation at most (engine.md ME-10).",
                cli_type=str | None,
            )
        ),
    )
    executor: str = field(
        default="process",
        metadata=_declared(
            Declared(
                help="process (the -j processes on this machine) or ray (one Ray task per group of "
                "reports; needs the ray extra).",
                flags=("--executor",),
                choices=EXECUTORS,
            )
        ),
    )
    address: str | None = field(
        default=None,
        metadata=_declared(
            Declared(
                help="The Ray cluster to join (with --executor ray; default: a local one).",
                flags=("--address",),
            )
        ),
    )
    trust_hash_cache: bool = field(
        default=False,
        metadata=_declared(
            Declared(
                help="Take model files' digests from the file-hash cache when a file's path, size, "
                "device, inode and times are unchanged, instead of hashing the bytes read (faster; "
                "trusts the file system, and says so with R111).",
                flags=("--trust-hash-cache",),
                more="Off by default (``mibspec.reference_impl.recompute._hash_cache`` says what it trusts).",
            )
        ),
    )
    follow_output_links: bool = field(
        default=False,
        metadata=_declared(
            Declared(
                help="Write outputs through symbolic links (by default an output that is, or passes "
                "through, a link is refused).",
                flags=("--follow-output-links",),
                where=("cli",),
            )
        ),
    )
    skipped_because: str = field(
        default=RECOMPUTE_NOT_REQUESTED,
        metadata=_declared(
            Declared(
                help="Without recompute, why the recompute stage was skipped, as its detail says.",
                where=("api",),
            )
        ),
    )
    progress: Progress | None = field(
        default=None,
        metadata=_declared(
            Declared(
                help="Where the recompute stage reports progress (start(description, total), "
                "advance(steps)); unused with several jobs.",
                where=("api",),
            )
        ),
    )


@functools.cache
def declared() -> dict[str, tuple[Declared, Any, Any]]:
    """Each field of :class:`VerificationRequest`: its declaration, type and default (one
    mapping, shared: not to be changed)."""
    hints = typing.get_type_hints(VerificationRequest)
    return {
        f.name: (f.metadata["declared"], hints[f.name], f.default)
        for f in dataclasses.fields(VerificationRequest)
    }


def api_keywords() -> list[str]:
    """The keywords :func:`mibspec.verify` takes besides its paths, in declaration order."""
    return [name for name, (d, _, _) in declared().items() if "api" in d.where and name != "paths"]


def api_signature() -> inspect.Signature:
    """The signature of :func:`mibspec.verify`: the paths, then each declared keyword with its
    type and default."""
    from mibspec.validator import VerificationResult

    fields = declared()
    parameters = [
        inspect.Parameter("paths", inspect.Parameter.VAR_POSITIONAL, annotation=str | os.PathLike[str]),
        *(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=fields[name][2], annotation=fields[name][1]
            )
            for name in api_keywords()
        ),
    ]
    return inspect.Signature(parameters, return_annotation=VerificationResult)


def api_docs(indent: str) -> str:
    """The ``Args`` entries of :func:`mibspec.verify`'s keywords, from their declarations
    (the first line unindented, to follow the placeholder it replaces)."""
    fields = declared()
    entries = []
    for name in api_keywords():
        text = " ".join(filter(None, (f"{name}: {fields[name][0].help}", fields[name][0].more)))
        if fields[name][0].expands:
            names = ", ".join(f"``{each}``" for each, _ in fields[name][0].expands)
            text += f"; the command line takes {names} as options of their own."
        entries.append(textwrap.fill(text, 88 - len(indent), subsequent_indent="    "))
    return textwrap.indent("\n".join(entries), indent).lstrip()


def request_from_keywords(
    paths: Iterable[str | os.PathLike[str]], keywords: Mapping[str, Any]
) -> VerificationRequest:
    """The request of ``verify(*paths, **keywords)``: the API's keywords, iterables as tuples.

    Raises:
        TypeError: a keyword that :func:`mibspec.verify` does not take (as Python says it).
    """
    allowed, fields = set(api_keywords()), declared()
    values = dict(keywords)
    for name, value in keywords.items():
        if name not in allowed:
            raise TypeError(f"verify() got an unexpected keyword argument {name!r}")
        if isinstance(fields[name][2], tuple):  # several values: any iterable, one string a value
            values[name] = (value,) if isinstance(value, str | os.PathLike) else tuple(value)
    return VerificationRequest(paths=tuple(paths), **values)


class RequestError(ValueError):
    """An option of a verification that is malformed, out of range or not usable here.

    ``str()`` is ``"<field>: <detail>"`` (the API's message); :attr:`flag` and :meth:`usage`
    give the command line's (``--batch-size: ...``).
    """

    def __init__(self, name: str, detail: str, *, whole: bool = False) -> None:
        self.name, self.detail, self.whole = name, detail, whole
        super().__init__(detail if whole else f"{name}: {detail}")

    @property
    def flag(self) -> str:
        """The command line's first long flag of the option."""
        fields = declared()
        flags = fields[self.name][0].flags if self.name in fields else ()  # a limit: --max-...
        long = [flag for flag in flags if flag.startswith("--")]
        return long[0] if long else "--" + self.name.replace("_", "-")

    def usage(self) -> str:
        """The message the command line shows (exit 2)."""
        return self.detail if self.whole else f"{self.flag}: {self.detail}"


class DeviceRequestError(RequestError, DeviceError):
    """A device that is malformed or not present: a :class:`RequestError` and the reference
    implementation's ``DeviceError``."""


@dataclass(frozen=True)
class CheckedRequest:
    """A request whose every option was checked (:func:`check_request`), with what checking
    resolved: the report files, the device (resolved when recomputation runs), the batch size
    and the rule codes."""

    request: VerificationRequest
    files: tuple[str, ...]
    device: str
    batch_size: int | str | None
    select: tuple[str, ...]
    ignore: tuple[str, ...]


def check_request(request: VerificationRequest, *, surface: Surface = "api") -> CheckedRequest:
    """Check every option of ``request`` once, in this order: jobs, profile (on the command
    line), executor and address, the batch size and device, the codes, the paths, the outputs
    and the receipt's folder.

    Raises:
        RequestError: a bad option (the device: ``DeviceError``'s message, as given).
        FileNotFoundError: a path that does not exist, a folder with no report.
    """
    if request.jobs < 1:
        raise RequestError("jobs", f"expected an integer >= 1, got {request.jobs!r}")
    if surface == "cli":  # the API reports an unknown profile on each document (S104)
        _check_profile(request.profile)
    _check_executor(request.executor, request.address)
    device, size = _run_device(request.device, request.batch_size, request.recompute)
    from mibspec.verification.api import collect_paths, resolve_codes

    try:
        select = resolve_codes(request.select, "select")
        ignore = resolve_codes(request.ignore, "ignore")
    except ValueError as exc:
        name, _, detail = str(exc).partition(": ")
        raise RequestError(name, detail) from None
    files = tuple(collect_paths(request.paths))
    _check_outputs(request, files)
    return CheckedRequest(request, files, device, size, select, ignore)


def _check_profile(profile: str | None) -> None:
    from mibspec.core.profiles import known_profiles

    if profile is not None and profile not in known_profiles():
        raise RequestError(
            "profile",
            f"unknown profile {profile!r}; known profiles: {', '.join(known_profiles())}",
            whole=True,
        )


def _check_executor(executor: str, address: str | None) -> None:
    if executor not in EXECUTORS:
        raise RequestError("executor", f"expected one of {', '.join(EXECUTORS)}, got {executor!r}")
    if address is not None and executor != "ray":
        raise RequestError("address", "only the ray executor joins a cluster")
    if executor == "ray" and importlib.util.find_spec("ray") is None:
        from mibspec.core.spec import install_hint

        raise RequestError("executor", f"ray needs the ray extra: {install_hint('ray')}")


def _run_device(device: str, batch_size: int | str | None, recompute: bool) -> tuple[str, int | str | None]:
    """The batch size parsed, the device checked for its form, and resolved (present on this
    machine) when recomputation runs and torch is installed (without it the recompute stage
    says so, R101)."""
    from mibspec.reference_impl.devices import parse_batch_size, parse_device, resolve_device

    try:
        size = None if batch_size is None else parse_batch_size(batch_size)
        name = parse_device(device)
        if recompute and importlib.util.find_spec("torch") is not None:
            name = resolve_device(name)
    except DeviceError as exc:  # "device: ..."
        raise DeviceRequestError("device", str(exc).partition(": ")[2]) from None
    except ValueError as exc:  # "batch_size: ..."
        raise RequestError("batch_size", str(exc).partition(": ")[2]) from None
    return name, size


def _check_outputs(request: VerificationRequest, files: tuple[str, ...]) -> None:
    """The command line's outputs: each can be written and none is a file it reads; a receipt
    is written into a folder holding every input and every model root."""
    if request.output is None and request.receipt is None:
        return
    from mibspec.core.outputs import OutputPathError, check_outputs, input_files

    try:
        check_outputs(
            [(request.output, "--output"), (request.receipt, "--receipt")],
            input_files(files, max_bytes=request.limits.max_bytes),
            follow_links=request.follow_output_links,
        )
    except OutputPathError as exc:
        raise RequestError("output", str(exc), whole=True) from None
    if request.receipt is not None:
        _check_receipt_folder(request, request.receipt, files)


def _check_receipt_folder(request: VerificationRequest, receipt: Path, files: tuple[str, ...]) -> None:
    from mibspec.verification.receipt import outside_folder

    # Model files recomputation reads are named in the receipt too: each --model-root must
    # lie inside its folder as well.
    roots = [str(root) for root in request.model_roots] if request.recompute else []
    outside = outside_folder([*files, *roots], receipt)
    if outside is not None:
        raise RequestError(
            "receipt",
            f"--receipt {receipt}: {outside} is outside the receipt's folder; a receipt names "
            "only files inside its own folder, so write it into a folder that holds every input "
            "and every --model-root",
            whole=True,
        )
