"""The click groups built from :data:`mibspec.cli.table.COMMANDS`, loading commands lazily.

A group knows its commands' names and summaries from the table; the module behind a
command is imported, and its click command built (:mod:`mibspec.cli._options`), only
when that command is looked up to run or to show its own help. Listing a group
(``mibspec --help``) imports no command module.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

import click

from mibspec.cli._options import build_command
from mibspec.cli.table import COMMANDS, Command, Group

__all__ = ["LazyGroup"]


def _build_command(entry: Command) -> click.Command:
    """The click command of one table entry."""
    module, _, function = entry.target.partition(":")
    callback = getattr(importlib.import_module(module), function)
    return build_command(callback, entry.name.rsplit(" ", 1)[-1])


class _Commands(Mapping[str, Any]):
    """A group's subcommands by name, each built on first access."""

    def __init__(self, prefix: str) -> None:
        depth = len(prefix.split()) + 1 if prefix else 1
        self._entries = {
            entry.name.rsplit(" ", 1)[-1]: entry
            for entry in COMMANDS
            if len(entry.name.split()) == depth and entry.name.startswith(f"{prefix} " if prefix else "")
        }
        self._built: dict[str, Any] = {}

    def entry(self, name: str) -> Command | Group:
        return self._entries[name]

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            entry = self._entries[name]
            self._built[name] = (
                LazyGroup(name=name, prefix=entry.name, help=entry.help, no_args_is_help=True)
                if isinstance(entry, Group)
                else _build_command(entry)
            )
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


class LazyGroup(click.Group):
    """A click group whose subcommands are the table's entries below ``prefix``."""

    def __init__(self, *, prefix: str = "", **attrs: Any) -> None:
        super().__init__(**attrs)
        self.lazy_commands = _Commands(prefix)
        self.commands = self.lazy_commands  # type: ignore[assignment]  # read-only: the table is fixed

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.lazy_commands)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """List the subcommands with their summaries from the table (no module is imported)."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(map(len, names))
        rows = []
        for name in names:
            entry = self.lazy_commands.entry(name)
            summary = entry.help if isinstance(entry, Group) else entry.summary
            # the short help click would derive from the command's own help text
            rows.append((name, click.Command(name=name, help=summary).get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)
