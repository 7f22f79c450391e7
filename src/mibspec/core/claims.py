"""The claim catalogue (``spec/v1/claims.json``, SPEC.md §5, CL-1): every number a report may carry,
declared once per track.

A row names a JSON-pointer pattern (``*`` one token, ``**`` any run of tokens), what the
number is (``label``), how it is checked (``recomputed``, ``derived`` from other claims, a
``declaration`` compared with an artifact or run with by recomputation, or ``structure``
only), its tolerance class and the kind of rounding that may apply to it (``None``: the
number is exact whatever the report declares). Rows under ``"*"`` belong to every track.

The rules, the rounding code, the recompute stage, the outputs and the tests read the
catalogue through :func:`claim_catalogue`; nothing else lists the numbers of a report.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .pointers import escape_pointer_token
from .spec import SPEC_VERSION, load_spec_json

__all__ = [
    "CHECKS",
    "TOLERANCE_CLASSES",
    "VALUE_TYPES",
    "ClaimCatalogue",
    "ClaimInstance",
    "ClaimRow",
    "claim_catalogue",
    "pointer_tokens",
]

#: How a number is checked (``claims.json`` ``checks``).
CHECKS = ("recomputed", "derived", "declaration", "structure")
#: The tolerance a comparison of the number uses.
TOLERANCE_CLASSES = ("exact", "consistency", "recompute")
#: What a row describes: a JSON number, an integer, a component set, a tensor reference.
VALUE_TYPES = ("number", "integer", "set", "tensor")

_ANY = "*"
_ANY_RUN = "**"


def pointer_tokens(pointer: str) -> tuple[str, ...]:
    """The unescaped tokens of a JSON pointer (``""`` is the root: no token).

    >>> pointer_tokens("/claims/weight_robustness/0/composites/a~1b")
    ('claims', 'weight_robustness', '0', 'composites', 'a/b')
    """
    if not pointer:
        return ()
    return tuple(token.replace("~1", "/").replace("~0", "~") for token in pointer.split("/")[1:])


@dataclass(frozen=True)
class ClaimRow:
    """One row of the catalogue.

    Attributes:
        track: the report track, or ``"*"`` for every track.
        pointer: the JSON-pointer pattern of the numbers the row describes.
        type: ``number``, ``integer``, ``set`` (component ids) or ``tensor`` (a tensor reference).
        label: what the number is, for people.
        check: ``recomputed``, ``derived``, ``declaration`` or ``structure``.
        tolerance: ``exact``, ``consistency`` or ``recompute`` (``None`` for structure).
        rounding: the kind of rounding that may apply (a key of the profiles'
            ``coarsest_rounding``), or ``None`` when the number is exact whatever is declared.
        rules: the codes that check it.
        derived_from: patterns of the claims it is derived from (consistency rules).
        compared_with: for a declaration, what it is compared with or used for.
        only_with: a pattern that must be present for a ``recomputed`` row to be recomputed
            (its ``*`` take the matched tokens of the number, left to right); without it the
            number is a declaration.
        note: more about the row.
    """

    track: str
    pointer: str
    type: str
    label: str
    check: str
    tolerance: str | None = None
    rounding: str | None = None
    rules: tuple[str, ...] = ()
    derived_from: tuple[str, ...] = ()
    compared_with: str | None = None
    only_with: str | None = None
    note: str | None = None

    @functools.cached_property
    def tokens(self) -> tuple[str, ...]:
        return tuple(self.pointer.split("/")[1:])

    @property
    def numeric(self) -> bool:
        return self.type in ("number", "integer")

    def match(self, tokens: Sequence[str]) -> tuple[str, ...] | None:
        """The tokens the pattern's wildcards matched, or ``None`` when ``tokens`` do not match.

        >>> row = ClaimRow("circuit", "/claims/curves/*/points/*/k", "number", "k", "declaration")
        >>> row.match(("claims", "curves", "1", "points", "4", "k")), row.match(("claims", "k"))
        (('1', '4'), None)
        """
        return _match(self.tokens, tuple(tokens))

    def bind(self, pattern: str, bound: Sequence[str]) -> str:
        """``pattern`` (one of ``derived_from``, ``only_with``) with its ``*`` replaced, left to
        right, by the tokens a number of this row matched; a pointer when every ``*`` is bound."""
        tokens = pattern.split("/")[1:]
        values = iter(bound)
        out = []
        for token in tokens:
            if token == _ANY:
                value = next(values, None)
                out.append(_ANY if value is None else escape_pointer_token(value))
            else:
                out.append(token)
        return "/" + "/".join(out)


def _match(pattern: tuple[str, ...], tokens: tuple[str, ...]) -> tuple[str, ...] | None:
    if not pattern:
        return () if not tokens else None
    head, rest = pattern[0], pattern[1:]
    if head == _ANY_RUN:
        for start in range(len(tokens) + 1):
            found = _match(rest, tokens[start:])
            if found is not None:
                return found
        return None
    if not tokens:
        return None
    if head == _ANY:
        found = _match(rest, tokens[1:])
        return None if found is None else (tokens[0], *found)
    return _match(rest, tokens[1:]) if head == tokens[0] else None


@dataclass(frozen=True)
class ClaimInstance:
    """A value of a document that a row describes: its pointer, the row, the value."""

    pointer: str
    row: ClaimRow
    value: Any
    #: The tokens the row's wildcards matched.
    bound: tuple[str, ...]

    @property
    def recomputed(self) -> bool:
        """Whether recomputation must compare it: its row is ``recomputed`` and what the row's
        ``only_with`` needs is present (checked by :meth:`ClaimCatalogue.instances`)."""
        return self.row.check == "recomputed"


class _Trie:
    """The rows' patterns without ``**`` as a tree of tokens, to walk a document once."""

    def __init__(self) -> None:
        self.children: dict[str, _Trie] = {}
        self.rows: list[ClaimRow] = []

    def add(self, row: ClaimRow) -> None:
        node = self
        for token in row.tokens:
            node = node.children.setdefault(token, _Trie())
        node.rows.append(row)


@dataclass(frozen=True)
class ClaimCatalogue:
    """The catalogue of one spec version."""

    spec_version: str
    rounding_kinds: Mapping[str, str]
    rows: tuple[ClaimRow, ...]

    def rows_for(self, track: str) -> tuple[ClaimRow, ...]:
        """The rows of a track's reports: the track's own, then the common ones."""
        return self._by_track.get(track, ()) + self._by_track.get(_ANY, ())

    @functools.cached_property
    def _by_track(self) -> dict[str, tuple[ClaimRow, ...]]:
        grouped: dict[str, list[ClaimRow]] = {}
        for row in self.rows:
            grouped.setdefault(row.track, []).append(row)
        return {track: tuple(rows) for track, rows in grouped.items()}

    @functools.cached_property
    def _tries(self) -> dict[str, tuple[_Trie, tuple[ClaimRow, ...]]]:
        built = {}
        for track in self._by_track:
            if track == _ANY:
                continue
            trie = _Trie()
            runs = []
            for row in self.rows_for(track):
                if _ANY_RUN in row.tokens:
                    runs.append(row)
                else:
                    trie.add(row)
            built[track] = (trie, tuple(runs))
        return built

    def row(self, track: Any, pointer: str) -> ClaimRow | None:
        """The row describing the value at ``pointer`` of a ``track`` report (``None``: none)."""
        found = self.match(track, pointer)
        return None if found is None else found[0]

    def match(self, track: Any, pointer: str) -> tuple[ClaimRow, tuple[str, ...]] | None:
        """The row describing ``pointer`` and the tokens its wildcards matched."""
        if not isinstance(track, str):
            return None
        tokens = pointer_tokens(pointer)
        for row in self.rows_for(track):
            bound = row.match(tokens)
            if bound is not None:
                return row, bound
        return None

    def instances(self, document: Mapping[str, Any]) -> Iterator[ClaimInstance]:
        """Every value of a report that a row describes, in document order: numbers (booleans
        are not numbers), and the component sets and tensor references of ``set`` and
        ``tensor`` rows. A ``recomputed`` row whose ``only_with`` is absent yields its values
        as declarations. Values of no row are skipped (the tests hold every number the schema
        allows to a row)."""
        entry = self._tries.get(str(document.get("track")))
        if entry is None:
            return
        trie, runs = entry
        yield from self._walk(document, (), [trie], runs, document)

    def _walk(
        self,
        node: Any,
        path: tuple[str, ...],
        states: list[_Trie],
        runs: tuple[ClaimRow, ...],
        document: Mapping[str, Any],
    ) -> Iterator[ClaimInstance]:
        for state in states:
            for row in state.rows:
                if _fits(row, node):
                    yield self._instance(row, path, node, document)
        if isinstance(node, Mapping):
            for row in runs:
                # ``**/x/y``: the rows' tails are checked where they start, at every object.
                tail = row.tokens[1:]
                value = _get(node, tail)
                if value is not _MISSING and _fits(row, value):
                    yield self._instance(row, path + tail, value, document)
            children: Any = node.items()
        elif isinstance(node, list):
            children = ((str(i), item) for i, item in enumerate(node))
        else:
            return
        for key, child in children:
            following = [nxt for state in states for nxt in _next(state, key)]
            if following:
                yield from self._walk(child, (*path, key), following, runs, document)

    def _instance(
        self, row: ClaimRow, path: tuple[str, ...], value: Any, document: Mapping[str, Any]
    ) -> ClaimInstance:
        bound = row.match(path) or ()
        if row.check == "recomputed" and row.only_with is not None:
            needed = pointer_tokens(row.bind(row.only_with, bound))
            if _get(document, needed) is _MISSING:
                row = _as_declaration(row)
        pointer = "".join("/" + escape_pointer_token(token) for token in path)
        return ClaimInstance(pointer, row, value, bound)


_MISSING = object()


@functools.lru_cache(maxsize=256)
def _as_declaration(row: ClaimRow) -> ClaimRow:
    return ClaimRow(
        row.track,
        row.pointer,
        row.type,
        row.label,
        "declaration",
        row.tolerance,
        row.rounding,
        row.rules,
        row.derived_from,
        f"declared: recomputed only with {row.only_with}",
        None,
        row.note,
    )


def _next(state: _Trie, key: str) -> list[_Trie]:
    found = []
    if key in state.children:
        found.append(state.children[key])
    if _ANY in state.children:
        found.append(state.children[_ANY])
    return found


def _get(node: Any, tokens: Sequence[str]) -> Any:
    for token in tokens:
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return _MISSING
    return node


def _fits(row: ClaimRow, value: Any) -> bool:
    """Whether ``value`` is of the kind the row describes (a schema-valid document's always is)."""
    if row.numeric:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if row.type == "set":
        return isinstance(value, list)
    return isinstance(value, Mapping)


_ROW_KEYS = frozenset(
    {"pointer", "type", "label", "check", "tolerance", "rounding", "rules", "derived_from"}
    | {"compared_with", "only_with", "note"}
)


def _row(track: str, raw: Mapping[str, Any], kinds: Mapping[str, str]) -> ClaimRow:
    unknown = set(raw) - _ROW_KEYS
    if unknown:
        raise ValueError(f"claims.json: row {raw.get('pointer')!r} has unknown keys {sorted(unknown)}")
    row = ClaimRow(
        track=track,
        pointer=str(raw["pointer"]),
        type=str(raw["type"]),
        label=str(raw["label"]),
        check=str(raw["check"]),
        tolerance=raw.get("tolerance"),
        rounding=raw.get("rounding"),
        rules=tuple(raw.get("rules", ())),
        derived_from=tuple(raw.get("derived_from", ())),
        compared_with=raw.get("compared_with"),
        only_with=raw.get("only_with"),
        note=raw.get("note"),
    )
    problems = [
        f"type {row.type!r}" if row.type not in VALUE_TYPES else "",
        f"check {row.check!r}" if row.check not in CHECKS else "",
        f"tolerance {row.tolerance!r}"
        if (row.tolerance is None) != (row.check == "structure")
        or (row.tolerance is not None and row.tolerance not in TOLERANCE_CLASSES)
        else "",
        f"rounding {row.rounding!r}" if row.rounding is not None and row.rounding not in kinds else "",
        "a pattern that is not a JSON pointer" if not row.pointer.startswith("/") else "",
    ]
    problems = [p for p in problems if p]
    if problems:
        raise ValueError(f"claims.json: row {row.pointer!r} of {track}: {', '.join(problems)}")
    return row


@functools.lru_cache(maxsize=4)
def claim_catalogue(spec_version: str = SPEC_VERSION) -> ClaimCatalogue:
    """The claim catalogue of a spec version (``claims.json`` of its folder).

    Raises:
        ValueError: the file is malformed (a defect of the spec files, never of a document).
    """
    raw = load_spec_json(spec_version, "claims.json")
    kinds = dict(raw["rounding_kinds"])
    rows = tuple(_row(track, entry, kinds) for track, entries in raw["tracks"].items() for entry in entries)
    return ClaimCatalogue(str(raw["spec_version"]), kinds, rows)
