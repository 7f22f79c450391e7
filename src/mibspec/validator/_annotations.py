"""Collecting mibspec's schema annotations from a schema-valid document.

The schemas mark fields that reference artifacts (``x-mibspec-artifact``) and
objects that declare tensors (``x-mibspec-tensor``). This walker follows the
instance through the schema — ``$ref``, ``properties``, ``items``,
``additionalProperties``, ``allOf`` and ``if``/``then``/``else`` — and yields
every annotated location, so rules need no per-kind list of where references live.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mibspec.core.pointers import escape_pointer_token

__all__ = ["iter_annotations", "normalize_numbers"]


def iter_annotations(validator: Any, instance: Any, keyword: str) -> Iterator[tuple[str, Any, Any]]:
    """(pointer, annotation value, instance) for each place the schema annotates with ``keyword``.

    ``validator`` is a compiled ``jsonschema`` validator for the document's schema;
    the instance must already be valid against it.
    """
    root = validator.schema
    yield from _walk(validator, root, root, instance, "", keyword)


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"only local references are used by mibspec schemas, got {ref!r}")
    node: Any = root
    for token in ref[2:].split("/"):
        node = node[token.replace("~1", "/").replace("~0", "~")]
    return node  # type: ignore[no-any-return]


def _walk(
    validator: Any, root: dict[str, Any], schema: Any, instance: Any, pointer: str, keyword: str
) -> Iterator[tuple[str, Any, Any]]:
    if not isinstance(schema, dict):
        return
    if keyword in schema:
        yield pointer, schema[keyword], instance
    if "$ref" in schema:
        yield from _walk(validator, root, _resolve(root, schema["$ref"]), instance, pointer, keyword)
    for sub in schema.get("allOf", ()):
        yield from _walk(validator, root, sub, instance, pointer, keyword)
    for key in ("anyOf", "oneOf"):
        for sub in schema.get(key, ()):
            if validator.evolve(schema={**sub, "$defs": root.get("$defs", {})}).is_valid(instance):
                yield from _walk(validator, root, sub, instance, pointer, keyword)
                break
    if "if" in schema:
        condition = {**schema["if"], "$defs": root.get("$defs", {})}
        branch = "then" if validator.evolve(schema=condition).is_valid(instance) else "else"
        if branch in schema:
            yield from _walk(validator, root, schema[branch], instance, pointer, keyword)
    if isinstance(instance, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, value in instance.items():
            child = f"{pointer}/{escape_pointer_token(key)}"
            if key in properties:
                yield from _walk(validator, root, properties[key], value, child, keyword)
            elif isinstance(extra, dict):
                yield from _walk(validator, root, extra, value, child, keyword)
    elif isinstance(instance, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for index, value in enumerate(instance):
                yield from _walk(validator, root, items, value, f"{pointer}/{index}", keyword)


#: Integers this large or larger make numpy build object arrays; as ``number``s they become floats.
_INT64_LIMIT = 2**63


def _has_candidates(instance: Any) -> bool:
    """Whether any number is an integral float or an integer outside int64 (iterative walk)."""
    stack = [instance]
    while stack:
        node = stack.pop()
        if isinstance(node, float):
            if node.is_integer():
                return True
        elif isinstance(node, int) and not isinstance(node, bool):
            if abs(node) >= _INT64_LIMIT:
                return True
        elif isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def normalize_numbers(validator: Any, instance: Any) -> None:
    """Give numbers the Python type their schema position implies, in place.

    JSON Schema counts ``1.0`` as an integer, so a schema-valid document may hold an
    integral float where an index or a count is expected; it becomes an ``int``. An
    integer outside the int64 range where the schema says ``number`` becomes a ``float``
    (finite: the parser refuses integers beyond binary64). Values are equal before and
    after; rules and recomputation can then index and build numeric arrays with them.
    The instance must already be valid against the schema.
    """
    if not _has_candidates(instance):
        return
    changes: list[tuple[str, Any]] = []
    for pointer, declared, value in iter_annotations(validator, instance, "type"):
        types = declared if isinstance(declared, list) else [declared]
        if isinstance(value, float) and value.is_integer() and "integer" in types:
            changes.append((pointer, int(value)))
        elif (
            isinstance(value, int)
            and not isinstance(value, bool)
            and abs(value) >= _INT64_LIMIT
            and "number" in types
            and "integer" not in types
        ):
            changes.append((pointer, float(value)))
    for pointer, new in changes:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]
        if not tokens:
            continue  # the root is an object, never a number
        parent = instance
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        if isinstance(parent, list):
            parent[int(last)] = new
        else:
            parent[last] = new
