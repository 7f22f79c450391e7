"""``mibspec schema list|show|export``: the JSON Schemas of the spec version."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import click

from mibspec.cli._options import Argument
from mibspec.cli._support import FollowLinksOption, check_outputs_or_exit, usage_error

__all__ = ["schema_export_command", "schema_list_command", "schema_show_command"]


def _schema_files() -> list[Path]:
    """The schema files of the current spec version, by name."""
    from mibspec.core.spec import spec_dir

    return sorted((spec_dir() / "schemas").glob("*.schema.json"))


def schema_list_command() -> None:
    """List the schemas of the spec version: kind (what `schema show` takes), file and $id."""
    from mibspec.core.spec import load_spec_json
    from mibspec.verification.api import SPEC_VERSION, schema_bundle_hash

    files = _schema_files()
    click.echo(f"spec {SPEC_VERSION}: {len(files)} schemas, bundle sha256 {schema_bundle_hash(SPEC_VERSION)}")
    for path in files:
        schema = load_spec_json(SPEC_VERSION, f"schemas/{path.name}")
        click.echo(f"{path.name.removesuffix('.schema.json'):<26} {path.name:<38} {schema['$id']}")


def schema_show_command(kind: Annotated[str, Argument(help="Document kind or schema name.")]) -> None:
    """Print one schema as JSON: `mibspec schema show report`."""
    by_kind = {path.name.removesuffix(".schema.json"): path for path in _schema_files()}
    path = by_kind.get(kind.removesuffix(".schema.json"))
    if path is None:
        usage_error(f"no schema {kind!r}; the kinds are {', '.join(by_kind)}")
        return
    click.echo(path.read_text(encoding="utf-8"), nl=False)


def schema_export_command(
    directory: Annotated[Path, Argument(help="Folder to write the schemas into (made if missing).")],
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Write the spec version's schema bundle into a folder (for editors and offline hooks)."""
    from mibspec.core.outputs import write_atomic

    files = _schema_files()
    # The bundle's own folder is an input: exporting into it would overwrite the spec.
    check_outputs_or_exit(
        [(directory / path.name, "DIR") for path in files],
        [files[0].parent] if files else [],
        folders=[(directory, "DIR")],
        follow_links=follow_output_links,
    )
    for path in files:
        write_atomic(directory / path.name, path.read_bytes(), follow_links=follow_output_links)
        click.echo(str(directory / path.name))
