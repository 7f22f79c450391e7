"""``mibspec parity circuit``: the public MIB code and mibspec side by side on a report;
``mibspec parity causal-variable``: pyvene and mibspec on a causal-variable report's units."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import click

from mibspec.cli._options import Argument, Option
from mibspec.cli._support import EXIT_FINDINGS, EXIT_OK, usage_error
from mibspec.core.display import visible
from mibspec.core.findings import Severity

if TYPE_CHECKING:
    from mibspec.parity import CausalParity, ParityRow

_METHOD_TASKS = {"EAP": "EAP", "EAP-IG (inputs)": "EAP-IG-inputs"}


#: ``--model-root`` of both parity commands.
_ModelRootOption = Annotated[
    list[Path] | None,
    Option("--model-root", metavar="<path>", help="Folder to look for the report's model in (repeatable)."),
]


class ParityFormat(str, enum.Enum):
    text = "text"
    json = "json"


def _tasks(report: dict[str, Any], everything: bool) -> list[str]:
    tasks = ["logits", "circuits_patching", "curve"]
    method = _METHOD_TASKS.get(str(report.get("method", {}).get("name")))
    if method is not None:
        tasks.append(method)
    if everything:
        tasks += ["circuits_mean", "nodes", *(t for t in _METHOD_TASKS.values() if t not in tasks)]
    return tasks


def _table(rows: list[Any], title: str, public: str = "public") -> str:
    header = f"{'quantity':<40} {public:>15} {'mibspec':>15} {'|Δ|':>9} {'rel':>9}  verdict"
    lines = [title, header, "-" * len(header)]
    for row in rows:
        if row.promised:
            verdict = "agrees" if row.ok else "DIFFERS (promised)"
        else:
            verdict = "not promised" + (f": {row.note}" if row.note else "")
        lines.append(
            f"{visible(row.quantity):<40} {row.public:>15.9g} {row.mibspec:>15.9g} "
            f"{row.abs_diff:>9.2e} {row.rel_diff:>9.2e}  {verdict}"
        )
    return "\n".join(lines)


def parity_circuit_command(
    report: Annotated[Path, Argument(help="A circuit-track report (edge granularity).")],
    peer: Annotated[
        Path | None,
        Option(
            "--peers",
            "--peer",
            help="Folder with the public code (eap-ig/, mib-circuit-track/); default $MIBSPEC_PEERS. "
            "One of the two is required.",
        ),
    ] = None,
    peer_python: Annotated[
        Path | None,
        Option(help="Python of the public code's environment; default $MIBSPEC_PEER_PYTHON or the cache."),
    ] = None,
    build_env: Annotated[
        bool, Option(help="Build the public code's environment in the cache when it is missing.")
    ] = False,
    model_root: _ModelRootOption = None,
    profile: Annotated[
        str | None, Option(help="Profile whose promises are checked; default the report's.")
    ] = None,
    everything: Annotated[
        bool,
        Option("--all", help="Also node circuits, mean ablation and both attribution methods."),
    ] = False,
    task: Annotated[
        str | None,
        Option(
            help="The public loader's task (ioi, mcqa, arc_easy, arc_challenge, arithmetic_addition, "
            "arithmetic_subtraction); default from the report's task.name. Every task but ioi needs "
            "the released rows file beside the report's dataset document (source.file).",
        ),
    ] = None,
    output_format: Annotated[
        ParityFormat, Option("--format", "-f", help="Output format.")
    ] = ParityFormat.text,
) -> None:
    """Print the public code's and mibspec's values side by side; exit 1 when a value the
    profile promises to reproduce differs beyond its float32 tolerance, 2 when the report does
    not verify or the public code or its environment is missing.

    The report is verified first, without recomputation, and nothing it points to is read
    unless it verifies."""
    from mibspec.parity import PUBLIC_ANSWER_TOKEN, PeerUnavailableError, circuit_parity, load_circuit_inputs

    if not report.is_file():
        usage_error(f"report {report} does not exist")
    _verified_or_exit(report)
    peers, python = _public_code(peer, peer_python, build_env)
    try:
        if task is not None and task not in PUBLIC_ANSWER_TOKEN:
            usage_error(f"unknown task {task!r} (known: {', '.join(PUBLIC_ANSWER_TOKEN)})")
        inputs = load_circuit_inputs(report, model_root or [], task)
    except (ValueError, KeyError, OSError) as exc:
        usage_error(f"cannot compare {report}: {exc}")
    name = _profile_name(profile, inputs.report)
    steps = int(inputs.report.get("method", {}).get("hyperparameters", {}).get("ig_steps", 5))
    tasks = _tasks(inputs.report, everything)
    try:
        _, by_profile = circuit_parity(inputs, peers, python, [name], tasks, ig_steps=steps)
    except PeerUnavailableError as exc:
        usage_error(str(exc))
    rows = by_profile[name]
    failed = [row for row in rows if row.promised and not row.ok]
    _print_rows(rows, failed, name, peers, output_format)
    raise click.exceptions.Exit(EXIT_FINDINGS if failed else EXIT_OK)


def _public_code(peer: Path | None, peer_python: Path | None, build_env: bool) -> tuple[Path, Path]:
    """The folder of the public code and the Python of its environment; a usage error (exit 2)
    when either is missing."""
    import os

    from mibspec.parity import PEER_PYTHON_ENV, PeerUnavailableError, find_peers
    from mibspec.parity import peer_python as find_python

    try:
        peers = find_peers(peer)
        if peer_python is not None:
            os.environ[PEER_PYTHON_ENV] = str(peer_python)
        python = find_python(build=build_env)
    except PeerUnavailableError as exc:
        usage_error(str(exc))
    return peers, python


def _profile_name(profile: str | None, report: dict[str, Any]) -> str:
    """The profile whose promises are checked: ``--profile``, else the report's; a usage error
    when it is not a known profile."""
    from mibspec.core.profiles import known_profiles

    name = profile or str(report.get("profile", "default"))
    if name not in known_profiles():
        usage_error(f"unknown profile {name!r} (known: {', '.join(known_profiles())})")
    return name


def _print_rows(
    rows: list[ParityRow], failed: list[ParityRow], name: str, peers: Path, output_format: ParityFormat
) -> None:
    """The compared values as a JSON document, or as a table and the count that agree."""
    if output_format is ParityFormat.json:
        document = {
            "profile": name,
            "peers": str(peers),
            "ok": not failed,
            "rows": [r.as_dict() for r in rows],
        }
        click.echo(json.dumps(document, indent=2, allow_nan=False, default=str))
    else:
        click.echo(_table(rows, f"profile {name}; public code at {peers}"))
        promised = sum(row.promised for row in rows)
        click.echo(f"{promised - len(failed)} of {promised} promised values agree")


def parity_causal_variable_command(
    report: Annotated[Path, Argument(help="A causal-variable report.")],
    model_root: _ModelRootOption = None,
    pyvene_python: Annotated[
        Path | None,
        Option(help="Python of an environment with pyvene; default $MIBSPEC_PYVENE_PYTHON."),
    ] = None,
    output_format: Annotated[
        ParityFormat, Option("--format", "-f", help="Output format.")
    ] = ParityFormat.text,
) -> None:
    """Print pyvene's and mibspec's intervened values side by side per unit and counterfactual
    set; exit 1 when a value differs beyond its float32 tolerance, 2 when the report does not
    verify or pyvene or its environment is missing.

    The report is verified first, without recomputation, and nothing it points to is read
    unless it verifies. Each unit with a featurizer is intervened on through pyvene (in its own
    environment) and through mibspec on the same model, rows, counterfactuals and positions,
    a joint unit at all its sites in one pass; compared are the largest difference of the
    intervened logits, the intervention's effect and the interchange-intervention accuracy.
    Units pyvene cannot address (a position only known by name, a component without a pyvene
    hook, an attention location of several heads) are listed as not compared."""
    from mibspec.parity import causal_parity, pyvene_missing
    from mibspec.parity import pyvene_python as find_pyvene

    if not report.is_file():
        usage_error(f"report {report} does not exist")
    _verified_or_exit(report)
    python = find_pyvene(pyvene_python)
    if python is None:
        usage_error(pyvene_missing(pyvene_python))
    try:
        result = causal_parity(report, model_root or [], python)
    except (ValueError, KeyError, OSError) as exc:
        usage_error(f"cannot compare {report}: {exc}")
    failed = [row for row in result.rows if not row.ok]
    _print_causal(result, failed, python, output_format)
    raise click.exceptions.Exit(EXIT_FINDINGS if failed else EXIT_OK)


def _verified_or_exit(report: Path) -> None:
    """A usage error (exit 2), listing the error-level findings, unless ``report`` and the
    documents it references verify without recomputation: only then are its artifacts known
    to lie inside its folder and to match their hashes."""
    from mibspec.verification import verify

    result = verify(report, recompute=False)
    if result.valid:
        return
    for doc in result.documents:
        for finding in doc.findings:
            if finding.severity is Severity.ERROR:
                click.echo(f"{visible(doc.path)}: {visible(str(finding))}", err=True)
        if doc.internal_error is not None:
            click.echo(f"{visible(doc.path)}: {visible(str(doc.internal_error))}", err=True)
    usage_error(f"{report} does not verify (`mibspec verify {report}`); it is not compared")


def _print_causal(
    result: CausalParity, failed: list[ParityRow], python: Path, output_format: ParityFormat
) -> None:
    """The compared values and the units not compared, as a JSON document or as a table."""
    if output_format is ParityFormat.json:
        document = {
            "pyvene": str(python),
            "ok": not failed,
            "rows": [row.as_dict() for row in result.rows],
            "not_compared": [{"unit": unit, "reason": reason} for unit, reason in result.not_compared],
        }
        click.echo(json.dumps(document, indent=2, allow_nan=False, default=str))
        return
    click.echo(_table(result.rows, f"pyvene at {python}", public="pyvene"))
    for unit, reason in result.not_compared:
        click.echo(f"not compared: {visible(unit)}: {visible(reason)}")
    click.echo(f"{len(result.rows) - len(failed)} of {len(result.rows)} values agree")
