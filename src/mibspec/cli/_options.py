"""Commands declared as annotated functions, built as click commands.

A command is a function whose parameters read ``Annotated[T, Option(...)]`` or
``Annotated[T, Argument(...)]``; its docstring is its help. :func:`build_command` turns it
into a :class:`click.Command`. The types a parameter may have are few and fixed: ``str``,
``int``, ``float``, ``bool``, ``Path``, a ``str``-valued :class:`enum.Enum`, each optionally
``| None``, and ``list[...]`` of the first five (a repeatable option, or an argument taking
several values); a ``str`` option may list the values it takes (``choices``). Anything else
is a defect here, refused when the command is built.

Values are converted by click alone: the start-up of a command is that of click, nothing
heavier (see ``benchmarks/bench_verify_startup.py``).
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import click

__all__ = ["Argument", "Option", "build_command"]


class Option:
    """An option: its names (default ``--parameter-name``; a ``bool`` without names is an
    ``--x/--no-x`` pair), help, metavar, bounds of a number, the values a ``str`` may take,
    and an eager callback taking the value (``--version``)."""

    __slots__ = ("callback", "choices", "help", "is_eager", "max", "metavar", "min", "names")

    def __init__(
        self,
        *names: str,
        help: str | None = None,
        metavar: str | None = None,
        min: float | None = None,
        max: float | None = None,
        choices: tuple[str, ...] | None = None,
        callback: Callable[[Any], Any] | None = None,
        is_eager: bool = False,
    ) -> None:
        self.names = names
        self.help = help
        self.metavar = metavar
        self.min = min
        self.max = max
        self.choices = choices
        self.callback = callback
        self.is_eager = is_eager


@dataclass(frozen=True)
class Argument:
    """A positional argument, listed with its help under "Arguments"."""

    help: str | None = None
    metavar: str | None = None


@dataclass(frozen=True)
class _Type:
    """A parameter's annotation taken apart: the value type, and whether it is ``list[...]``
    (``| None`` only allows the default ``None``)."""

    base: type
    multiple: bool


def _type_of(annotation: Any) -> _Type:
    multiple = False
    if typing.get_origin(annotation) in (Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) != 1:
            raise TypeError(f"unsupported parameter type {annotation!r}")
        annotation = members[0]
    if typing.get_origin(annotation) is list:
        (annotation,), multiple = typing.get_args(annotation), True
    if not isinstance(annotation, type) or not (
        annotation in (str, int, float, bool, Path) or issubclass(annotation, enum.Enum)
    ):
        raise TypeError(f"unsupported parameter type {annotation!r}")
    return _Type(annotation, multiple)


def _click_type(kind: _Type, marker: Option | Argument) -> click.ParamType:
    base = kind.base
    if isinstance(marker, Option) and marker.choices is not None:
        if base is not str:
            raise TypeError(f"choices need a str parameter, not {base!r}")
        return click.Choice(marker.choices)
    bounds = (marker.min, marker.max) if isinstance(marker, Option) else (None, None)
    if base is int:
        low, high = (None if bound is None else int(bound) for bound in bounds)
        return click.IntRange(low, high) if bounds != (None, None) else click.INT
    if base is float:
        return click.FloatRange(*bounds) if bounds != (None, None) else click.FLOAT
    if base is Path:
        return click.Path(path_type=Path)
    if issubclass(base, enum.Enum):
        return click.Choice([member.value for member in base])
    return click.STRING if base is str else click.BOOL


def _metavar(kind: _Type, marker: Option | Argument, name: str) -> str:
    if marker.metavar is not None:
        return marker.metavar
    if isinstance(marker, Argument):
        return f"<{name}>"
    if issubclass(kind.base, enum.Enum):
        return "<" + "|".join(member.value for member in kind.base) + ">"
    if isinstance(marker, Option) and marker.choices is not None:
        return "<" + "|".join(marker.choices) + ">"
    return f"<{kind.base.__name__.lower()}>"


class _Argument(click.Argument):
    """A positional argument with help, shown under "Arguments" in the command's help.

    The help is kept apart from click's own argument help (click 8.5 and later), so that
    every click version this runs on prints the same section."""

    def __init__(self, *args: Any, text: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.text = text

    def get_help_record(self, ctx: click.Context) -> tuple[str, str]:
        extra = "  [required]" if self.required else ""
        return self.make_metavar(ctx), f"{self.text or ''}{extra}".strip()


class _Command(click.Command):
    """A click command whose help lists its arguments, with their help, before its options."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [param.get_help_record(ctx) for param in self.get_params(ctx) if isinstance(param, _Argument)]
        if rows:
            with formatter.section("Arguments"):
                formatter.write_dl(rows)
        super().format_options(ctx, formatter)


def _option(name: str, kind: _Type, marker: Option, default: Any) -> click.Option:
    required = default is inspect.Parameter.empty
    shown = default.value if isinstance(default, enum.Enum) else default
    settings: dict[str, Any] = {
        "required": required,
        "help": marker.help,
        "show_default": True,
        "is_eager": marker.is_eager,
    }
    if not required:
        settings["default"] = shown
    if marker.callback is not None:
        callback = marker.callback
        settings["callback"] = lambda _ctx, _param, value: callback(value)
    names = list(marker.names)
    if kind.base is bool and not kind.multiple:
        if not names:
            flag = name.replace("_", "-")
            names = [f"--{flag}/--no-{flag}"]
        elif not any("/" in each for each in names):
            settings["is_flag"] = True
    else:
        settings["type"] = _click_type(kind, marker)
        settings["metavar"] = _metavar(kind, marker, name)
        settings["multiple"] = kind.multiple
    return click.Option([name, *(names or [f"--{name.replace('_', '-')}"])], **settings)


def _argument(name: str, kind: _Type, marker: Argument, default: Any) -> click.Argument:
    required = default is inspect.Parameter.empty
    metavar = _metavar(kind, marker, name) + ("..." if kind.multiple else "")
    return _Argument(
        [name],
        type=_click_type(kind, marker),
        metavar=metavar if required else f"[{metavar}]",
        nargs=-1 if kind.multiple else 1,
        required=required,
        default=None if required else default,
        text=marker.help,
    )


def _converter(kind: _Type, default: Any) -> Callable[[Any], Any]:
    """From click's value to the function's: an Enum member, a list (the default when none)."""

    def convert(value: Any) -> Any:
        if kind.multiple:
            return [_single(kind, item) for item in value] if value else default
        return _single(kind, value)

    return convert


def _single(kind: _Type, value: Any) -> Any:
    if value is not None and issubclass(kind.base, enum.Enum):
        return kind.base(value)
    return value


def build_command(function: Callable[..., Any], name: str) -> click.Command:
    """The click command ``name`` running ``function`` with its declared parameters; its help
    is the function's docstring."""
    hints = typing.get_type_hints(function, include_extras=True)
    params: list[click.Parameter] = []
    converters: dict[str, Callable[[Any], Any]] = {}
    for parameter in inspect.signature(function).parameters.values():
        hint = hints[parameter.name]
        annotation, *extras = (
            typing.get_args(hint) if typing.get_origin(hint) is typing.Annotated else (hint,)
        )
        markers = [extra for extra in extras if isinstance(extra, Option | Argument)]
        if len(markers) != 1:
            raise TypeError(f"{function.__qualname__}({parameter.name}): declare one Option or Argument")
        kind = _type_of(annotation)
        [marker] = markers
        if isinstance(marker, Option):
            params.append(_option(parameter.name, kind, marker, parameter.default))
        else:
            params.append(_argument(parameter.name, kind, marker, parameter.default))
        default = None if parameter.default is inspect.Parameter.empty else parameter.default
        converters[parameter.name] = _converter(kind, default)

    def callback(**values: Any) -> Any:
        return function(**{key: converters[key](value) for key, value in values.items()})

    return _Command(name, callback=callback, params=params, help=inspect.getdoc(function))
