"""The command line's spelling of :class:`~mibspec.verification.request.VerificationRequest`.

``mibspec verify`` takes one parameter per field of the request that the command line takes
(a record of limits gives one option per limit); :func:`verify_parameters` derives them, with
their click options (:mod:`mibspec.cli._options`), from the fields' declarations, and
:func:`request_from_cli` turns the values click read back into a request. Other commands take
some of the same options (``--model-root``, ``--device``, ``--batch-size``) through
:func:`option_of`, so that each is spelled and helped in one place.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeVar

from mibspec.cli._options import Argument, Option
from mibspec.verification.request import Declared, VerificationRequest, declared

__all__ = ["option_of", "request_from_cli", "verify_parameters", "with_verify_parameters"]

_F = TypeVar("_F", bound=Callable[..., Any])

#: The recompute stage's detail under ``--no-recompute``.
SKIPPED_BECAUSE = "disabled (--no-recompute)"


def _marker(declaration: Declared) -> Option | Argument:
    if declaration.positional:
        return Argument(help=declaration.help, metavar=declaration.metavar)
    return Option(
        *declaration.flags,
        help=declaration.cli_help or declaration.help,
        metavar=declaration.metavar,
        min=declaration.min,
        choices=declaration.choices,
    )


def option_of(name: str) -> Option | Argument:
    """The click option (or argument) of the request's field ``name``, as ``verify`` takes it."""
    return _marker(declared()[name][0])


def _without_none(annotation: Any) -> Any:
    """``float | None`` → ``float`` (a limit's ``None``, no limit, is ``inf`` on the command line)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def verify_parameters() -> list[inspect.Parameter]:
    """The parameters of ``mibspec verify``, each annotated with its click option, in the
    order the request declares its fields."""
    parameters = []
    for name, (declaration, annotation, default) in declared().items():
        if "cli" not in declaration.where:
            continue
        if declaration.expands:  # a record: one option per declared field of it
            hints = typing.get_type_hints(type(default))
            for part, sub in declaration.expands:
                kind = Annotated[_without_none(hints[part]), _marker(sub)]  # type: ignore[valid-type]
                parameters.append(_keyword(part, kind, getattr(default, part)))
            continue
        kind = Annotated[declaration.cli_type or annotation, _marker(declaration)]  # type: ignore[valid-type]
        if declaration.positional:
            parameters.append(_keyword(name, kind, inspect.Parameter.empty))
        elif declaration.negated:
            parameters.append(_keyword(declaration.cli_name or name, kind, False))
        else:
            shown = None if isinstance(default, tuple) else default  # a repeatable option: none given
            parameters.append(_keyword(declaration.cli_name or name, kind, shown))
    return parameters


def _keyword(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation
    )


def with_verify_parameters(function: _F) -> _F:
    """``function(**values)`` declared with the parameters of ``mibspec verify``, for
    :func:`mibspec.cli._options.build_command`."""
    parameters = verify_parameters()
    function.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
    function.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
    return function


def request_from_cli(values: Mapping[str, Any]) -> VerificationRequest:
    """The request of the values click read for ``mibspec verify``'s parameters."""
    fields: dict[str, Any] = {}
    for name, (declaration, _, default) in declared().items():
        if "cli" not in declaration.where:
            continue
        if declaration.expands:
            fields[name] = dataclasses.replace(
                default, **{part: values[part] for part, _ in declaration.expands}
            )
            continue
        value = values[declaration.cli_name or name]
        if declaration.negated:
            value = not value
        elif isinstance(default, tuple):
            value = tuple(value or ())
        fields[name] = value
    return VerificationRequest(**fields, skipped_because=SKIPPED_BECAUSE)
