"""What a new user reads: install instructions, the README's commands, the help, ``schema``.

Independent anchors: the README's console lines are parsed by the command tree itself
(click), the schema files are listed and hashed here from the spec folder, and the
install instructions are searched in the text of the sources.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click import ClickException, Context
from click.testing import CliRunner

from mibspec.cli import app

REPO = Path(__file__).resolve().parents[1]
SCHEMAS = REPO / "spec" / "v1" / "schemas"

CliRun = Callable[..., subprocess.CompletedProcess[str]]


# -- installing: mibspec is installed from its repository -------------------------------------

#: Install instructions that name a package index release, which does not exist.
INDEX_INSTALL = re.compile(r"pip install ['\"]?mibspec\b|install mibspec\[")


def _text_files() -> Iterator[Path]:
    yield REPO / "README.md"
    yield from (REPO / "docs").glob("*.md")
    yield from (REPO / "src" / "mibspec").rglob("*.py")
    yield from (REPO / "examples").glob("*.md")
    yield from (REPO / "conformance").glob("*.md")


def test_no_instruction_installs_from_a_package_index() -> None:
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in _text_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if INDEX_INSTALL.search(line)
    ]
    assert not found, "\n".join(found)


def test_missing_matplotlib_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    result = CliRunner().invoke(
        app, ["html", str(REPO / "examples" / "circuit" / "report.json"), "-o", str(tmp_path / "r.html")]
    )
    assert result.exit_code == 2
    assert 'pip install ".[plots]" (run in the mibspec repository)' in result.output
    assert not (tmp_path / "r.html").exists()


def test_missing_recompute_extra_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from mibspec import verify

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    result = verify(REPO / "examples" / "circuit" / "report.json")
    [finding] = [f for f in result.findings if f.code == "R101"]
    assert 'pip install ".[recompute]" (run in the mibspec repository)' in finding.message


# -- the README's commands are commands -----------------------------------------------------


def _console_commands() -> list[str]:
    """Every ``$ mibspec …`` line of the console blocks of the README and ``docs/`` (continuations
    joined)."""
    commands: list[str] = []
    current: str | None = None
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    text = "\n".join(p.read_text(encoding="utf-8") for p in pages)
    for line in text.splitlines():
        if current is not None:
            current += " " + line.strip()
        elif line.startswith("$ mibspec "):
            current = line[2:]
        else:
            continue
        code = re.sub(r"\s#.*$", "", current).rstrip()
        if code.endswith("\\"):
            current = code[:-1]
            continue
        commands.append(code)
        current = None
    return commands


def test_readme_console_lines_parse_as_commands() -> None:
    commands = _console_commands()
    assert any(c.startswith("mibspec schema show") for c in commands)
    root = app
    for line in commands:
        words = shlex.split(line)[1:]
        assert "|" not in words, line
        command: Any = root
        while hasattr(command, "commands") and words and words[0] in command.commands:
            command = command.commands[words.pop(0)]
        assert not hasattr(command, "commands"), f"{line}: names a group, not a command"
        try:
            command.make_context("mibspec", list(words))
        except ClickException as exc:
            pytest.fail(f"{line}: {exc.format_message()}")


# -- help ----------------------------------------------------------------------------------


def _commands(group: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


def test_repeatable_options_show_their_value_not_a_python_type() -> None:
    shown = {}
    for name, command in _commands(app):
        ctx = Context(command, info_name=name)
        for param in command.params:
            if param.param_type_name == "option" and param.multiple:
                record = param.get_help_record(ctx)
                assert record is not None
                shown[f"{name} {param.opts[0]}"] = record[0]
    assert shown["verify --model-root"] == "--model-root <path>"
    assert shown["html --model-root"] == "--model-root <path>"
    for option, text in shown.items():
        assert "list[" not in text, option


# -- schema list | show | export -------------------------------------------------------------


def test_schema_list_names_every_kind_file_and_id(mibspec_cli: CliRun) -> None:
    files = sorted(SCHEMAS.glob("*.schema.json"))
    listed = mibspec_cli("schema", "list")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    assert header == f"spec 1.2: {len(files)} schemas, bundle sha256 {digest.hexdigest()}"
    assert [row.split() for row in rows] == [
        [path.name.removesuffix(".schema.json"), path.name, json.loads(path.read_bytes())["$id"]]
        for path in files
    ]


def test_schema_show_prints_the_schema(mibspec_cli: CliRun) -> None:
    for kind in ("report", "report.schema.json"):
        shown = mibspec_cli("schema", "show", kind)
        assert shown.returncode == 0
        assert shown.stdout == (SCHEMAS / "report.schema.json").read_text(encoding="utf-8")
    unknown = mibspec_cli("schema", "show", "nothing")
    assert unknown.returncode == 2
    assert "counterfactual_dataset" in unknown.stderr  # the kinds that exist are named


def test_schema_export_makes_the_folder_and_writes_the_bundle(mibspec_cli: CliRun, tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    exported = mibspec_cli("schema", "export", str(target))
    assert exported.returncode == 0, exported.stderr
    files = sorted(SCHEMAS.glob("*.schema.json"))
    assert exported.stdout.splitlines() == [str(target / path.name) for path in files]
    assert {p.name: p.read_bytes() for p in target.iterdir()} == {p.name: p.read_bytes() for p in files}
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    refused = mibspec_cli("schema", "export", str(blocker))
    assert refused.returncode == 2
    assert blocker.read_text(encoding="utf-8") == "x"


def test_documentation_links_resolve() -> None:
    """Every relative Markdown link of the README and ``docs/`` names a file of the repository."""
    broken = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert not broken, broken
    assert (REPO / "docs" / "coming-from-mib.md").exists()
