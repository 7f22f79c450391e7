"""The options of a verification, declared once (``mibspec.verification.request``): the command
line's parameters and the API's keywords are the request's fields, the device is resolved
once, and bad values are refused with the messages users know."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import mibspec
from mibspec.cli._options import build_command
from mibspec.cli.verify import verify_command
from mibspec.cli.verify_submission import verify_submission_command
from mibspec.core.strict_json import DEFAULT_LIMITS, Limits
from mibspec.reference_impl import devices
from mibspec.reference_impl.devices import DeviceError
from mibspec.verification.request import (
    RequestError,
    VerificationRequest,
    api_keywords,
    check_request,
    declared,
)

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "examples" / "circuit-ioi" / "report.json"
#: A document that is no report (a circuit): verifying it with recomputation runs no model.
CIRCUIT = REPO / "examples" / "circuit" / "circuit.json"

#: The flags of ``mibspec verify`` as users know them (its --help since 0.1.0).
VERIFY_FLAGS = {
    "--format",
    "-f",
    "--no-recompute",
    "--profile",
    "--max-bytes",
    "--max-depth",
    "--max-values",
    "--max-findings",
    "--max-recompute-seconds",
    "--max-model-bytes",
    "--max-recompute-bytes",
    "--model-root",
    "--output",
    "-o",
    "--select",
    "--ignore",
    "--error-on-warning",
    "--receipt",
    "--jobs",
    "-j",
    "--device",
    "--batch-size",
    "--executor",
    "--address",
    "--trust-hash-cache",
    "--follow-output-links",
}


def _command(function: Any, name: str) -> click.Command:
    return build_command(function, name)


def _expected_cli_names() -> list[str]:
    """The request's fields the command line takes, a record of limits as its parts."""
    names = []
    for name, (declaration, _, _) in declared().items():
        if "cli" not in declaration.where:
            continue
        if declaration.expands:
            names.extend(part for part, _ in declaration.expands)
        else:
            names.append(declaration.cli_name or name)
    return names


def test_every_field_is_declared_with_help() -> None:
    fields = dataclasses.fields(VerificationRequest)
    assert [f.name for f in fields] == list(declared())
    for name, (declaration, _, _) in declared().items():
        assert declaration.help.strip(), name
        assert declaration.where, name


#: The validator's run options that no user gives: what several reports share, and following
#: artifact references (always on for ``verify``; off only for the spec tools' own checks).
_VALIDATOR_ONLY = {"session", "follow_references"}


def test_the_validators_run_options_are_declared_request_fields() -> None:
    # VerifyOptions sits in the layer below the request and cannot import it; this keeps the two
    # in step: an option the validator takes from users must be a declared request field, with
    # the same default, and verify_checked must pass it on.
    from mibspec.validator import VerifyOptions

    request_fields = {f.name: f for f in dataclasses.fields(VerificationRequest)}
    source = inspect.getsource(__import__("mibspec.verification.api", fromlist=["x"]).verify_checked)
    for option in dataclasses.fields(VerifyOptions):
        if option.name in _VALIDATOR_ONLY:
            continue
        assert option.name in request_fields, option.name
        assert f"{option.name}=" in source, option.name
        if option.name not in {"device", "model_roots"}:  # resolved / converted by checking
            assert request_fields[option.name].default == option.default, option.name


def test_the_declared_output_formats_are_the_reporters() -> None:
    from mibspec.verification.output_formats import REPORTERS
    from mibspec.verification.request import OUTPUT_FORMATS

    assert tuple(REPORTERS) == OUTPUT_FORMATS


def test_the_verify_command_takes_exactly_the_declared_fields() -> None:
    command = _command(verify_command, "verify")
    assert [param.name for param in command.params] == _expected_cli_names()
    flags = {flag for param in command.params for flag in param.opts if flag.startswith("-")}
    assert flags == VERIFY_FLAGS


def test_the_verify_command_shows_the_declared_defaults_and_help() -> None:
    command = _command(verify_command, "verify")
    params = {param.name: param for param in command.params}
    fields = declared()
    for name, (declaration, _, default) in fields.items():
        if "cli" not in declaration.where or declaration.positional:
            continue
        parts = declaration.expands or ((declaration.cli_name or name, declaration),)
        for part, sub in parts:
            param = params[part]
            assert param.help == (sub.cli_help or sub.help), part
            if declaration.expands:
                assert param.default == getattr(default, part), part
    assert params["max_recompute_seconds"].default == DEFAULT_LIMITS.max_recompute_seconds == 3600.0
    assert params["no_recompute"].default is False
    assert params["device"].default == fields["device"][2] == "cpu"


def test_the_api_takes_exactly_the_declared_keywords() -> None:
    signature = inspect.signature(mibspec.verify)
    [paths, *keywords] = signature.parameters.values()
    assert paths.kind is inspect.Parameter.VAR_POSITIONAL
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in keywords)
    fields = declared()
    assert [p.name for p in keywords] == api_keywords()
    assert {name for name, (d, _, _) in fields.items() if "api" in d.where} == {"paths", *api_keywords()}
    for p in keywords:
        assert p.default == fields[p.name][2], p.name
    # the keywords users passed before the declaration, still taken
    assert set(api_keywords()) == {
        "recompute",
        "skipped_because",
        "profile",
        "limits",
        "model_roots",
        "progress",
        "select",
        "ignore",
        "jobs",
        "device",
        "batch_size",
        "executor",
        "address",
        "trust_hash_cache",
    }
    for name in api_keywords():  # each documented, from its declaration
        assert f"{name}: " in (mibspec.verify.__doc__ or ""), name


def test_an_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'devcie'"):
        mibspec.verify(REPORT, devcie="cpu")


def test_the_options_verify_submission_shares_are_those_of_verify() -> None:
    verify = {param.name: param for param in _command(verify_command, "verify").params}
    submission = {p.name: p for p in _command(verify_submission_command, "verify-submission").params}
    for name in ("model_root", "device", "batch_size"):
        ours, theirs = submission[name], verify[name]
        assert (ours.opts, ours.help, ours.metavar, ours.multiple, ours.default) == (  # type: ignore[attr-defined]
            theirs.opts,
            theirs.help,  # type: ignore[attr-defined]
            theirs.metavar,
            theirs.multiple,
            theirs.default,
        ), name
    hints = typing.get_type_hints(verify_submission_command)
    assert hints["batch_size"] == declared()["batch_size"][0].cli_type
    assert hints["model_root"] == declared()["model_roots"][0].cli_type


# --- the device, resolved once ---------------------------------------------------------------


@pytest.fixture
def resolutions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every call of the device resolver, by the name it was given."""
    pytest.importorskip("torch")
    calls: list[str] = []
    resolve = devices.resolve_device

    def counted(name: object) -> str:
        calls.append(str(name))
        return resolve(name)

    monkeypatch.setattr(devices, "resolve_device", counted)
    return calls


def test_the_command_line_resolves_the_device_once(resolutions: list[str]) -> None:
    done = CliRunner().invoke(_command(verify_command, "verify"), [str(CIRCUIT), "--device", "auto"])
    assert done.exit_code == 0, done.output
    assert resolutions == ["auto"]


def test_the_api_resolves_the_device_once(resolutions: list[str]) -> None:
    assert mibspec.verify(CIRCUIT, device="auto").valid
    assert resolutions == ["auto"]


def test_without_recomputation_the_device_is_not_looked_for(resolutions: list[str]) -> None:
    assert mibspec.verify(CIRCUIT, recompute=False, device="cuda:3").valid
    assert resolutions == []


def test_a_checked_request_holds_what_checking_resolved() -> None:
    checked = check_request(
        VerificationRequest(
            paths=(REPO / "examples" / "circuit",), select=("K1,unpinned-model",), batch_size="8"
        )
    )
    from mibspec.validator import catalogue

    assert checked.batch_size == 8
    assert checked.select == ("K1", catalogue(mibspec.SPEC_VERSION).by_symbol["unpinned-model"].code)
    assert checked.files
    assert all(Path(file).name.endswith("report.json") for file in checked.files)
    assert checked.device == "cpu"


# --- bad values: the same messages --------------------------------------------------------------


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"jobs": 0}, "jobs: expected an integer >= 1, got 0"),
        ({"executor": "dask"}, "executor: expected one of process, ray, got 'dask'"),
        ({"address": "127.0.0.1:6379"}, "address: only the ray executor joins a cluster"),
        ({"batch_size": "some"}, "batch_size: expected a positive integer or 'auto', got 'some'"),
        ({"batch_size": 0}, "batch_size: expected a positive integer or 'auto', got 0"),
        ({"device": "meta"}, "device: expected cpu, cuda, cuda:N, mps or auto, got 'meta'"),
        (
            {"select": ["Z9"]},
            "select: expected a rule code, code prefix or symbol from `mibspec rules`, got 'Z9'",
        ),
        (
            {"ignore": "A103,Q"},
            "ignore: expected a rule code, code prefix or symbol from `mibspec rules`, got 'Q'",
        ),
    ],
)
def test_the_api_refuses_a_bad_option(keywords: dict[str, Any], message: str) -> None:
    with pytest.raises(RequestError) as refused:
        mibspec.verify(REPORT, recompute=False, **keywords)
    assert str(refused.value) == message
    assert isinstance(refused.value, ValueError)


def test_a_bad_device_is_also_a_device_error() -> None:
    with pytest.raises(DeviceError, match="expected cpu, cuda, cuda:N, mps or auto"):
        mibspec.verify(REPORT, recompute=False, device="gpu")


def test_a_missing_path_is_a_file_not_found_error() -> None:
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        mibspec.verify(REPO / "no-such-report.json", recompute=False)


def test_an_unknown_profile_is_a_finding_for_the_api_and_a_usage_error_for_the_command_line() -> None:
    result = mibspec.verify(REPORT, recompute=False, profile="nope")
    assert "S104" in {f.code for f in result.findings}
    with pytest.raises(RequestError, match="unknown profile 'nope'; known profiles: "):
        check_request(VerificationRequest(paths=(REPORT,), profile="nope"), surface="cli")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--device", "meta"],
            "mibspec: error: --device: expected cpu, cuda, cuda:N, mps or auto, got 'meta'",
        ),
        (["--batch-size", "0"], "mibspec: error: --batch-size: expected a positive integer or 'auto', got 0"),
        (["--address", "127.0.0.1:6379"], "mibspec: error: --address: only the ray executor joins a cluster"),
        (["--select", "Z9"], "mibspec: error: --select: expected a rule code, code prefix or symbol"),
        (["--profile", "nope"], "mibspec: error: unknown profile 'nope'; known profiles: "),
    ],
)
def test_the_command_line_refuses_a_bad_option(args: list[str], message: str) -> None:
    done = CliRunner().invoke(_command(verify_command, "verify"), [str(REPORT), "--no-recompute", *args])
    assert done.exit_code == 2, done.output
    assert done.output.startswith(message), done.output
    assert "Traceback" not in done.output


def test_limits_given_on_the_command_line_reach_the_request() -> None:
    from mibspec.cli._request import request_from_cli

    values = {param.name: param.default for param in _command(verify_command, "verify").params}
    values.update(paths=[REPORT], max_depth=7, no_recompute=True, model_root=[REPO])
    request = request_from_cli(values)
    assert request.limits == dataclasses.replace(Limits(), max_depth=7)
    assert request.recompute is False
    assert request.model_roots == (REPO,)
    assert request.select == ()
    assert request.skipped_because == "disabled (--no-recompute)"
