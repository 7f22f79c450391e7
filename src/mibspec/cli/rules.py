"""``mibspec rules``: the rule catalogue, one rule explained, or the spec's requirement coverage."""

from __future__ import annotations

import json
from typing import Annotated

import click

from mibspec.cli._options import Argument, Option
from mibspec.cli._support import EXIT_FINDINGS, EXIT_OK, OutputFormat, usage_error
from mibspec.core.display import visible

__all__ = ["rules_command"]


def rules_command(
    code: Annotated[str | None, Argument(help="A rule code or symbol to explain.")] = None,
    output_format: Annotated[
        OutputFormat, Option("--format", "-f", help="Output format.")
    ] = OutputFormat.text,
    coverage: Annotated[
        bool,
        Option(
            "--coverage",
            help="Print each MUST of the spec with the rules, schema constraints or stated reason "
            "covering it.",
        ),
    ] = False,
    check: Annotated[
        bool,
        Option(
            "--check",
            help="With --coverage: exit 1 when a MUST is not covered or SPEC.md's coverage section "
            "is out of date.",
        ),
    ] = False,
    update_spec: Annotated[
        bool, Option("--update-spec", help="With --coverage: rewrite SPEC.md's coverage section.")
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
            click.echo(json.dumps(info.__dict__ | {"severity": info.severity.value}, indent=2))
            return
        click.echo(f"{info.code} {info.symbol} ({info.severity.value}, {info.stage} stage)")
        click.echo(f"  {info.summary}")
        click.echo(f"  family: {cat.families[info.code[0]]}")
        click.echo(f"  requirement: {info.requirement} in spec/v1/SPEC.md")
        if info.enforces:
            click.echo(f"  also checks: {', '.join(info.enforces)} (see `mibspec rules --coverage`)")
        click.echo(f"  message: {info.message}")
        return
    if output_format is OutputFormat.json:
        click.echo(json.dumps([r.__dict__ | {"severity": r.severity.value} for r in cat.rules], indent=2))
        return
    for info in cat.rules:
        click.echo(f"{info.code}  {info.symbol:<30} {info.severity.value:<8} {info.summary}")


def _rules_coverage(output_format: OutputFormat, *, check: bool, update_spec: bool) -> None:
    from mibspec.spec_tools.coverage import (
        coverage,
        coverage_problems,
        markdown_table,
        spec_path,
        spec_with_section,
    )

    rows = coverage()
    if output_format is OutputFormat.json:
        click.echo(json.dumps([row.to_json() for row in rows], indent=2, ensure_ascii=False))
    else:
        click.echo(markdown_table(rows), nl=False)
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
        click.echo(f"error: {visible(problem)}", err=True)
    raise click.exceptions.Exit(EXIT_FINDINGS if problems else EXIT_OK)
