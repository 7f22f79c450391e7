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


def iter_annotations(
    validator: Any, instance: Any, keyword: str, within: set[int] | None = None
) -> Iterator[tuple[str, Any, Any]]:
    """(pointer, annotation value, instance) for each place the schema annotates with ``keyword``.

    ``validator`` is a compiled ``jsonschema`` validator for the document's schema;
    the instance must already be valid against it. With ``within`` (ids of objects and
    arrays), the walk enters only those objects and arrays: the places inside others are
    left out.
    """
    root = validator.schema
    if _reaches(root, root, keyword):
        yield from _walk(validator, root, root, instance, "", keyword, within)


#: Whether a schema node can lead to a keyword, by (id of the root, id of the node, keyword).
#: The schemas are loaded once per process and never change, so their ids are stable keys;
#: the root is kept alive with the entry so that an id is never reused for another schema.
_REACHES: dict[tuple[int, int, str], tuple[bool, Any]] = {}
_MAX_REACHES = 200_000


def _reaches(root: dict[str, Any], schema: Any, keyword: str) -> bool:
    """Whether ``keyword`` occurs in ``schema`` or anything it refers to or nests.

    The walk skips a subschema that cannot lead to the keyword, with the part of the
    instance it describes (an array of a thousand curve points under an unannotated
    ``items``, a branch's ``if`` condition that would otherwise be validated again).
    """
    key = (id(root), id(schema), keyword)
    if key in _REACHES:
        return _REACHES[key][0]
    if len(_REACHES) > _MAX_REACHES:  # schemas built on the fly (a library caller's): start again
        _REACHES.clear()
    _REACHES[key] = (True, root)  # on a cycle of references, assume it does
    found = False
    if isinstance(schema, dict):
        children: list[Any] = []
        if "$ref" in schema:
            children.append(_resolve(root, schema["$ref"]))
        for name in ("allOf", "anyOf", "oneOf"):
            children.extend(schema.get(name, ()))
        children.extend(schema.get(name) for name in ("then", "else", "additionalProperties", "items"))
        children.extend(schema.get("properties", {}).values())
        found = keyword in schema or any(_reaches(root, child, keyword) for child in children)
    _REACHES[key] = (found, root)
    return found


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"only local references are used by mibspec schemas, got {ref!r}")
    node: Any = root
    for token in ref[2:].split("/"):
        node = node[token.replace("~1", "/").replace("~0", "~")]
    return node  # type: ignore[no-any-return]


def _walk(
    validator: Any,
    root: dict[str, Any],
    schema: Any,
    instance: Any,
    pointer: str,
    keyword: str,
    within: set[int] | None,
) -> Iterator[tuple[str, Any, Any]]:
    if not isinstance(schema, dict) or not _reaches(root, schema, keyword):
        return
    if within is not None and isinstance(instance, dict | list) and id(instance) not in within:
        return
    if keyword in schema:
        yield pointer, schema[keyword], instance
    if "$ref" in schema:
        yield from _walk(validator, root, _resolve(root, schema["$ref"]), instance, pointer, keyword, within)
    for sub in schema.get("allOf", ()):
        yield from _walk(validator, root, sub, instance, pointer, keyword, within)
    for key in ("anyOf", "oneOf"):
        for sub in schema.get(key, ()):
            if validator.evolve(schema={**sub, "$defs": root.get("$defs", {})}).is_valid(instance):
                yield from _walk(validator, root, sub, instance, pointer, keyword, within)
                break
    if "if" in schema and any(_reaches(root, schema.get(b), keyword) for b in ("then", "else")):
        condition = {**schema["if"], "$defs": root.get("$defs", {})}
        branch = "then" if validator.evolve(schema=condition).is_valid(instance) else "else"
        if branch in schema:
            yield from _walk(validator, root, schema[branch], instance, pointer, keyword, within)
    if isinstance(instance, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, value in instance.items():
            child = f"{pointer}/{escape_pointer_token(key)}"
            if key in properties:
                yield from _walk(validator, root, properties[key], value, child, keyword, within)
            elif isinstance(extra, dict):
                yield from _walk(validator, root, extra, value, child, keyword, within)
    elif isinstance(instance, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for index, value in enumerate(instance):
                yield from _walk(validator, root, items, value, f"{pointer}/{index}", keyword, within)


#: Integers this large or larger make numpy build object arrays; as ``number``s they become floats.
_INT64_LIMIT = 2**63


def _holding_candidates(instance: Any) -> set[int]:
    """The ids of the objects and arrays that hold, at any depth, an integral float or an
    integer outside int64 (empty when the document has none)."""
    holding: set[int] = set()

    def candidate(node: Any) -> bool:
        if isinstance(node, float):
            return node.is_integer()
        return isinstance(node, int) and not isinstance(node, bool) and abs(node) >= _INT64_LIMIT

    # iterative post-order: a container holds candidates when a child is one or holds some
    stack: list[tuple[Any, bool]] = [(instance, False)]
    while stack:
        node, children_done = stack.pop()
        if isinstance(node, dict | list):
            values = node.values() if isinstance(node, dict) else node
            if not children_done:
                stack.append((node, True))
                stack.extend((value, False) for value in values if isinstance(value, dict | list))
            elif any(candidate(v) or (isinstance(v, dict | list) and id(v) in holding) for v in values):
                holding.add(id(node))
    return holding


def normalize_numbers(validator: Any, instance: Any) -> None:
    """Give numbers the Python type their schema position implies, in place.

    JSON Schema counts ``1.0`` as an integer, so a schema-valid document may hold an
    integral float where an index or a count is expected; it becomes an ``int``. An
    integer outside the int64 range where the schema says ``number`` becomes a ``float``
    (finite: the parser refuses integers beyond binary64). Values are equal before and
    after; rules and recomputation can then index and build numeric arrays with them.
    The instance must already be valid against the schema.
    """
    holding = _holding_candidates(instance)
    if not holding:
        return
    changes: list[tuple[str, Any]] = []
    for pointer, declared, value in iter_annotations(validator, instance, "type", within=holding):
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
