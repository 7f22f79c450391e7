"""Stage 2: recognise the spec version and kind, then validate against the JSON Schema."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from mibspec.core.findings import Finding
from mibspec.core.pointers import escape_pointer_token, join_pointer
from mibspec.core.spec import KINDS, KNOWN_SPEC_VERSIONS, load_spec_json

from ._catalogue import Catalogue, InternalError, make_finding

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


@functools.lru_cache(maxsize=16)
def schema_for(kind: str, spec_version: str) -> Any:
    """A compiled validator for ``kind`` (cached for the process)."""
    from jsonschema import Draft202012Validator

    schema = load_spec_json(spec_version, f"schemas/{kind}.schema.json")
    return Draft202012Validator(schema)


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
