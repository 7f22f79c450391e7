"""The option declarations (``mibspec.cli._options``): what a declared parameter becomes on
the command line, read back through click's own parsing and help."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated, Any

import click
import pytest
from click.testing import CliRunner

from mibspec.cli._options import Argument, Option, build_command


class Colour(str, enum.Enum):
    red = "red"
    dark_blue = "dark-blue"


def _sample(
    paths: Annotated[list[Path], Argument(help="Input files.")],
    name: Annotated[str, Option("--name", "-n", help="A required name.")],
    colour: Annotated[Colour, Option(help="A colour.")] = Colour.dark_blue,
    count: Annotated[int, Option(help="How many.", min=1, max=9)] = 2,
    ratio: Annotated[float | None, Option(help="A ratio.", min=0.0)] = None,
    tag: Annotated[list[str] | None, Option("--tag", metavar="<tag>", help="Repeatable.")] = None,
    overwrite: Annotated[bool, Option(help="A flag pair.")] = False,
    quiet: Annotated[bool, Option("--quiet", help="A lone flag.")] = False,
    mode: Annotated[str, Option(choices=("fast", "exact"), help="A str from a list.")] = "exact",
) -> None:
    """Sample command.

    Its second paragraph."""
    click.echo(repr((paths, name, colour, count, ratio, tag, overwrite, quiet, mode)))


def _run(*args: str) -> Any:
    return CliRunner().invoke(build_command(_sample, "sample"), list(args))


def test_values_arrive_as_the_function_declares_them() -> None:
    done = _run(
        "a",
        "b",
        "-n",
        "x",
        "--colour",
        "red",
        "--count",
        "9",
        "--ratio",
        "0.5",
        "--tag",
        "t1",
        "--mode",
        "fast",
    )
    assert done.exit_code == 0, done.output
    expected = ([Path("a"), Path("b")], "x", Colour.red, 9, 0.5, ["t1"], False, False, "fast")
    assert done.output.strip() == repr(expected)


def test_defaults_are_the_functions_defaults() -> None:
    done = _run("a", "--name", "x", "--overwrite", "--quiet")
    assert done.exit_code == 0, done.output
    expected = ([Path("a")], "x", Colour.dark_blue, 2, None, None, True, True, "exact")
    assert done.output.strip() == repr(expected)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["a"], "Missing option '--name'"),
        (["-n", "x"], "Missing argument '<paths>...'"),
        (["a", "-n", "x", "--count", "0"], "0 is not in the range 1<=x<=9"),
        (["a", "-n", "x", "--count", "two"], "'two' is not a valid integer"),
        (["a", "-n", "x", "--ratio", "-1"], "-1.0 is not in the range x>=0.0"),
        (["a", "-n", "x", "--colour", "blue"], "'blue' is not one of 'red', 'dark-blue'"),
        (["a", "-n", "x", "--mode", "slow"], "'slow' is not one of 'fast', 'exact'"),
        (["a", "-n", "x", "--no-quiet"], "--no-quiet"),
    ],
)
def test_bad_values_are_usage_errors(args: list[str], message: str) -> None:
    done = _run(*args)
    assert done.exit_code == 2
    assert message in done.output


def test_the_help_lists_arguments_options_defaults_and_bounds() -> None:
    done = _run("--help")
    assert done.exit_code == 0
    text = " ".join(done.output.split())
    assert text.startswith("Usage: sample [OPTIONS] <paths>... Sample command. Its second paragraph.")
    assert "Arguments: <paths>... Input files. [required]" in text
    for shown in (
        "-n, --name <str> A required name. [required]",
        "--colour <red|dark-blue> A colour. [default: dark-blue]",
        "--count <int> How many. [default: 2; 1<=x<=9]",
        "--ratio <float> A ratio. [x>=0.0]",
        "--tag <tag> Repeatable.",
        "--overwrite / --no-overwrite A flag pair. [default: no-overwrite]",
        "--quiet A lone flag.",
        "--mode <fast|exact> A str from a list. [default: exact]",
    ):
        assert shown in text, shown


def test_an_undeclared_or_unsupported_parameter_is_refused_when_built() -> None:
    def bare(value: int) -> None: ...

    def mapping(value: Annotated[dict[str, int], Option()]) -> None: ...

    def either(value: Annotated[int | str, Option()]) -> None: ...

    def counted(value: Annotated[int, Option(choices=("1", "2"))] = 1) -> None: ...

    for function in (bare, mapping, either, counted):
        with pytest.raises(TypeError):
            build_command(function, "x")
