"""Stage 2: recognise the spec version and kind, then validate against the JSON Schema."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from mibspec.core.findings import Finding
from mibspec.core.pointers import escape_pointer_token, join_pointer
from mibspec.core.spec import KINDS, KNOWN_SPEC_VERSIONS, load_spec_json

from ._catalogue import Catalogue, InternalError, make_finding
from ._ecma_regex import ecma_regex

__all__ = ["check_schema", "dispatch", "schema_for"]

#: JSON Schema keyword → catalogue code.
_KEYWORD_CODES = {
    "type": "S110",
    "required": "S111",
    "additionalProperties": "S112",
    "unevaluatedProperties": "S112",
    "enum": "S113",
    "const": "S113",
    "minimum": "S114",
    "maximum": "S114",
    "exclusiveMinimum": "S114",
    "exclusiveMaximum": "S114",
    "multipleOf": "S114",
    "pattern": "S115",
    "format": "S115",
    "minItems": "S116",
    "maxItems": "S116",
    "minLength": "S116",
    "maxLength": "S116",
    "minProperties": "S116",
    "maxProperties": "S116",
    "uniqueItems": "S116",
}

_MAX_MESSAGE = 240


def dispatch(data: dict[str, Any], cat: Catalogue) -> Iterator[Finding]:
    """Check that the document names a known spec version and kind."""
    known_versions = ", ".join(KNOWN_SPEC_VERSIONS)
    if "spec_version" not in data:
        yield make_finding(cat, None, "S101", "", known=known_versions)
    elif not isinstance(data["spec_version"], str) or data["spec_version"] not in KNOWN_SPEC_VERSIONS:
        yield make_finding(
            cat,
            None,
            "S102",
            "/spec_version",
            detail=_short(repr(data["spec_version"])),
            known=known_versions,
        )
    kind = data.get("kind")
    if kind not in KINDS:
        detail = 'missing "kind"' if "kind" not in data else f"unknown kind {_short(repr(kind))}"
        yield make_finding(
            cat,
            None,
            "S103",
            "" if "kind" not in data else "/kind",
            detail=detail,
            known=", ".join(KINDS),
        )


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    """``pattern`` as ECMA-262 reads it (``\\d`` is ASCII), not as Python's ``re`` does."""
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not ecma_regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, properties: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in properties.items():
        for key, value in instance.items():
            if ecma_regex(pattern).search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


@functools.cache
def _ecma_validator() -> Any:
    """Draft 2020-12 with ``pattern`` and ``patternProperties`` under ECMA-262's regex semantics."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import extend

    return extend(Draft202012Validator, {"pattern": _pattern, "patternProperties": _pattern_properties})


@functools.lru_cache(maxsize=16)
def schema_for(kind: str, spec_version: str) -> Any:
    """A compiled validator for ``kind`` (cached for the process); patterns are read as
    ECMA-262 reads them (:mod:`._ecma_regex`)."""
    schema = load_spec_json(spec_version, f"schemas/{kind}.schema.json")
    return _ecma_validator()(schema)


def check_schema(data: dict[str, Any], kind: str, spec_version: str, cat: Catalogue) -> Iterator[Finding]:
    """Validate ``data`` against its kind's schema; one finding per violation.

    Lazy: violations are found as the findings are consumed, so a caller that stops
    early (the findings limit) does not pay for the rest of a hostile document.
    """
    validator = schema_for(kind, spec_version)
    seen: set[tuple[str, str, str]] = set()
    for error in validator.iter_errors(data):
        for finding in _to_findings(error, cat):
            key = (finding.code, finding.pointer, finding.message)
            if key not in seen:
                seen.add(key)
                yield finding


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


def _to_findings(error: Any, cat: Catalogue) -> Iterator[Finding]:
    keyword = error.validator
    pointer = join_pointer(error.absolute_path)
    code = _KEYWORD_CODES.get(keyword)
    if code is None:  # the shipped schemas use only mapped keywords (tested)
        raise InternalError(f"schema keyword {keyword!r} has no rule code")
    if keyword == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        for key in error.instance:
            if key not in allowed:
                yield make_finding(
                    cat,
                    None,
                    code,
                    f"{pointer}/{escape_pointer_token(key)}",
                    detail=f"unexpected property {key!r}",
                    hint='documents are closed; put extra data under "extensions"',
                )
        return
    if keyword == "required":
        missing = [name for name in error.validator_value if name not in error.instance]
        for name in missing:
            yield make_finding(cat, None, code, pointer, detail=f"missing required property {name!r}")
        return
    yield make_finding(cat, None, code, pointer, detail=_short(error.message))
