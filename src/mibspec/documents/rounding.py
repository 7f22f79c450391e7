"""Declared rounding (spec 1.1), and the schema fragments that keep 1.0 documents 1.0.

A report, or one of its claim objects, may say how its numbers were rounded for print:
``{"decimals": d}`` or ``{"significant_digits": s}``. The consistency and recompute
rules then read a claimed ``v`` as the interval of numbers that round to ``v``
(SPEC.md C-10).

The schema of a report accepts spec 1.0 and 1.1. What differs between them is stated
once, as paths into the report (:func:`closed_at`): for each version, the objects at
those paths are closed over that version's properties, so a 1.1 property in a 1.0
document (or a 1.0 name in a 1.1 document) is an unexpected property (S112), and a
property a version requires is missing (S111).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ConfigDict, Field, model_validator

from ._base import Closed

__all__ = ["Rounding", "closed_at", "version_branch"]


class Rounding(Closed):
    """How printed numbers were rounded: exactly one of ``decimals`` and ``significant_digits``."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1, "maxProperties": 1})

    decimals: int | None = Field(
        default=None, ge=0, le=20, description="digits after the decimal point: v stands for v ± 0.5·10^-d"
    )
    significant_digits: int | None = Field(
        default=None,
        ge=1,
        le=17,
        description="significant digits: v stands for v ± 0.5·10^(e−s+1), e the exponent of v",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> Rounding:
        if (self.decimals is None) == (self.significant_digits is None):
            raise ValueError("rounding: give exactly one of decimals and significant_digits")
        return self


def closed_at(path: tuple[str, ...], properties: list[str], required: Sequence[str] = ()) -> dict[str, Any]:
    """A schema closing the object at ``path`` over ``properties`` (``"*"`` in ``path``:
    every item of an array), requiring ``required``."""
    leaf: dict[str, Any] = {"properties": dict.fromkeys(properties, True), "additionalProperties": False}
    if required:
        leaf["required"] = list(required)
    for step in reversed(path):
        leaf = {"items": leaf} if step == "*" else {"properties": {step: leaf}}
    return leaf


def version_branch(version: str | Sequence[str], schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """``if spec_version is version (one of the versions) then every schema of schemas``."""
    test = {"const": version} if isinstance(version, str) else {"enum": list(version)}
    return {
        "if": {"properties": {"spec_version": test}, "required": ["spec_version"]},
        "then": {"allOf": schemas} if len(schemas) > 1 else schemas[0],
    }
