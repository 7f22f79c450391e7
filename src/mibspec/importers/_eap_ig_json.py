"""The reader of EAP-IG graph JSON, for ``mibspec import eap-ig`` only.

EAP-IG writes its graphs with Python's ``json.dump``, which spells an unscored node
(a NaN score) as the bare token ``NaN``. That token is not JSON, so documents are
never read with this reader: it exists for this one import format, and it accepts
``NaN`` (and reports ``Infinity``) where the strict document parser refuses both.
Everything else is as strict as a document: an object repeating a key is refused
(P102), malformed text is P101 with its line and column.

Graphs of large models list millions of edges (Llama-3.1-8B: 1,592,881). The edges
are not built as Python objects: one regular expression reads each entry
(``"name": {"score": x, "in_graph": b}``, keys in either order, either one alone)
and its values go straight into flat arrays, indexed by the edge's canonical index.
An edges object in any other shape (extra keys, NaN edge scores, unusual escapes) is
read again by the general parser, so only speed depends on the shape, never the
result. Memory: the text, the universe's cell index and three flat arrays.
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

__all__ = ["GraphText", "ReadProblemError", "read_graph_json"]

_WS = r"[ \t\n\r]*"
_NUM = r"(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
_BOOL = r"(true|false)"
_NAME = r'"((?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*)"'
_SCORE = f'"score"{_WS}:{_WS}'
_FLAG = f'"in_graph"{_WS}:{_WS}'
_ENTRY = re.compile(
    f"{_WS}{_NAME}{_WS}:{_WS}\\{{{_WS}"
    f"(?:{_SCORE}{_NUM}{_WS},{_WS}{_FLAG}{_BOOL}"
    f"|{_FLAG}{_BOOL}(?:{_WS},{_WS}{_SCORE}{_NUM})?"
    f"|{_SCORE}{_NUM})"
    f"{_WS}\\}}{_WS}([,}}])"
)
_SPACE = re.compile(_WS)


class ReadProblemError(Exception):
    """The file cannot be read as an EAP-IG graph: a code, a pointer and a character offset."""

    def __init__(self, code: str, pointer: str, offset: int | None, **params: Any) -> None:
        super().__init__(code)
        self.code, self.pointer, self.offset, self.params = code, pointer, offset, params


@dataclass
class GraphText:
    """What :func:`read_graph_json` read.

    ``scores`` (float64), ``in_graph`` and ``scored`` (uint8) are in canonical edge order;
    ``seen`` marks the edges the file lists. ``text`` is kept to locate later problems.
    """

    cfg: Any
    nodes: Any
    universe: Any
    scores: Any
    in_graph: Any
    scored: Any
    seen: Any
    text: str

    def locate(self, offset: int | None, pointer: str = "") -> tuple[int, int]:
        """Line and column (1-based) of a character offset, else of the last key of ``pointer``
        found in order in the text (1:1 when neither is known)."""
        if offset is None:
            offset = 0
            for token in pointer.split("/")[1:]:
                if token.isdigit():
                    continue  # an array index: its key is the one before
                key = json.dumps(token.replace("~1", "/").replace("~0", "~"))
                found = self.text.find(key, offset)
                if found < 0:
                    break
                offset = found
        line = self.text.count("\n", 0, offset) + 1
        return line, offset - (self.text.rfind("\n", 0, offset) + 1) + 1


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ReadProblemError("P102", "", None, detail=f"an object repeats the key {key!r}")
            seen.add(key)
    return result


def _constant(name: str) -> float:
    # NaN is how json.dump writes an unscored node; infinities are kept and refused
    # where they are used, with the value's pointer.
    return float(name.replace("Infinity", "inf"))


_DECODER = json.JSONDecoder(parse_constant=_constant, object_pairs_hook=_unique)


def _skip(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _value(text: str, pos: int, pointer: str) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise ReadProblemError("P101", pointer, exc.pos, detail=exc.msg) from None
    except ReadProblemError as exc:
        raise ReadProblemError(exc.code, pointer, pos, **exc.params) from None
    except RecursionError:
        raise ReadProblemError("P106", pointer, pos, detail="arrays and objects nest too deeply") from None


def _expect(text: str, pos: int, char: str, what: str) -> int:
    pos = _skip(text, pos)
    if text[pos : pos + 1] != char:
        raise ReadProblemError("P101", "", pos, detail=f"expected {what}")
    return pos + 1


def read_graph_json(source: Path, max_bytes: int, universe_of: Callable[[Any], Any]) -> GraphText:
    """Read an EAP-IG graph JSON file.

    ``universe_of(cfg)`` builds the graph universe (raising :class:`ReadProblemError`) once
    ``cfg`` is read; edges listed before ``cfg`` are read by the general parser.

    Raises:
        ReadProblemError: the file is too large, not UTF-8, not JSON (NaN aside), repeats a key,
            or its top level is not an object with ``cfg`` and ``edges``.
    """
    size = source.stat().st_size
    if size > max_bytes:
        raise ReadProblemError("P107", "", None, detail=f"{size} bytes, over the limit of {max_bytes}")
    raw = source.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        raise ReadProblemError("P105", "", 0, detail="the file starts with a UTF-8 byte-order mark")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ReadProblemError("P104", "", None, detail=f"byte {exc.start} is not UTF-8") from None
    del raw
    pos = _expect(text, 0, "{", "an object with cfg, nodes and edges")
    found: dict[str, Any] = {}
    edges_general: Any = None
    universe = None
    arrays: tuple[Any, ...] | None = None
    pos = _skip(text, pos)
    if text[pos : pos + 1] != "}":
        while True:
            pos = _skip(text, pos)
            if text[pos : pos + 1] != '"':
                raise ReadProblemError("P101", "", pos, detail="expected a key")
            try:
                key, pos = scanstring(text, pos + 1)
            except json.JSONDecodeError as exc:
                raise ReadProblemError("P101", "", exc.pos, detail=exc.msg) from None
            if key in found:
                raise ReadProblemError(
                    "P102", "", pos, detail=f"the top-level object repeats the key {key!r}"
                )
            pos = _skip(text, _expect(text, pos, ":", "':'"))
            start = pos
            if key == "edges" and universe is not None:
                arrays, pos = _edges(text, pos, universe)
                found[key] = start
            else:
                value, pos = _value(text, pos, "/" + key.replace("~", "~0").replace("/", "~1"))
                found[key] = value
                if key == "edges":
                    edges_general = (value, start)
                if key == "cfg":
                    universe = universe_of(value)
            pos = _skip(text, pos)
            char = text[pos : pos + 1]
            if char == ",":
                pos += 1
                continue
            if char == "}":
                break
            raise ReadProblemError("P101", "", pos, detail="expected ',' or '}'")
    if _skip(text, pos + 1) != len(text):
        raise ReadProblemError(
            "P101", "", _skip(text, pos + 1), detail="extra data after the top-level object"
        )
    for key in ("cfg", "edges"):
        if key not in found:
            raise ReadProblemError("I101", "", None, detail=f"the graph has no {key!r}")
    assert universe is not None
    if arrays is None:
        value, start = edges_general
        arrays = _edges_from_object(value, universe, start)
    scores, in_graph, scored, seen = arrays
    return GraphText(found["cfg"], found.get("nodes"), universe, scores, in_graph, scored, seen, text)


def _cells(universe: Any) -> tuple[dict[str, int], dict[str, int], int]:
    forward = {name: i for i, name in enumerate(universe.forward_names)}
    backward = {name: i for i, name in enumerate(universe.backward_names)}
    return forward, backward, universe.n_backward + 1


def _edges(text: str, pos: int, universe: Any) -> tuple[tuple[Any, ...], int]:
    """The edges object at ``pos`` read entry by entry (see the module docstring)."""
    if text[pos : pos + 1] != "{":
        raise ReadProblemError("I101", "/edges", pos, detail="'edges' must be an object")
    forward, backward, stride = _cells(universe)
    cells, values, flags, scored = array("q"), array("d"), bytearray(), bytearray()
    inner = _skip(text, pos + 1)
    end = None
    if text[inner : inner + 1] == "}":
        end = inner + 1
    else:
        expected = pos + 1
        for match in _ENTRY.finditer(text, pos + 1):
            if match.start() != expected:
                break
            name, s1, g1, g2, s2, s3, close = match.groups()
            if "\\" in name:
                name = json.loads(f'"{name}"')
            src, _, dst = name.partition("->")
            cells.append(forward.get(src, len(forward)) * stride + backward.get(dst, len(backward)))
            score = s1 or s2 or s3
            values.append(float(score) if score is not None else 0.0)
            scored.append(score is not None)
            flags.append((g1 or g2) == "true")
            expected = match.end()
            if close == "}":
                end = expected
                break
    if end is None:
        # Not the shape the fast path reads: the general parser reads it, or says where it fails.
        value, after = _value(text, pos, "/edges")
        return _edges_from_object(value, universe, pos), after
    return _scatter(universe, cells, values, flags, scored, lambda i: _nth_key(text, pos, i), pos), end


def _nth_key(text: str, pos: int, index: int) -> str:
    """The name of the ``index``-th entry of the edges object at ``pos`` (for a finding)."""
    value, _ = _value(text, pos, "/edges")
    return list(value)[index]


def _edges_from_object(value: Any, universe: Any, offset: int) -> tuple[Any, ...]:
    """Edges from a parsed object: every entry checked, with its pointer."""
    from mibspec.core.pointers import escape_pointer_token

    if not isinstance(value, dict):
        raise ReadProblemError("I101", "/edges", offset, detail="'edges' must be an object")
    forward, backward, stride = _cells(universe)
    cells, values, flags, scored = array("q"), array("d"), bytearray(), bytearray()
    for name, entry in value.items():
        pointer = "/edges/" + escape_pointer_token(name)
        if not isinstance(entry, dict):
            raise ReadProblemError(
                "I101", pointer, offset, detail="an edge must be an object with score and in_graph"
            )
        score, member = entry.get("score"), entry.get("in_graph", False)
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            raise ReadProblemError("I101", f"{pointer}/score", offset, detail="score must be a number")
        if (score is not None and score != score) or score in (float("inf"), float("-inf")):
            raise ReadProblemError("I105", f"{pointer}/score", offset, what="edge", value=str(score))
        if not isinstance(member, bool):
            raise ReadProblemError(
                "I101", f"{pointer}/in_graph", offset, detail="in_graph must be true or false"
            )
        src, _, dst = name.partition("->")
        cells.append(forward.get(src, len(forward)) * stride + backward.get(dst, len(backward)))
        values.append(float(score) if score is not None else 0.0)
        scored.append(score is not None)
        flags.append(member)
    names = list(value)
    return _scatter(universe, cells, values, flags, scored, names.__getitem__, offset)


def _scatter(
    universe: Any,
    cells: Any,
    values: Any,
    flags: Any,
    scored: Any,
    name_at: Callable[[int], str],
    offset: int,
) -> tuple[Any, ...]:
    """File-order arrays → canonical-order arrays; unknown names and repeats are refused."""
    import numpy as np

    from mibspec.core.pointers import escape_pointer_token

    stride = universe.n_backward + 1
    flat = np.frombuffer(cells, dtype=np.int64) if len(cells) else np.zeros(0, np.int64)
    rows, cols = np.divmod(flat, stride)
    valid = (rows < universe.n_forward) & (cols < universe.n_backward)
    ids = np.full(flat.shape, -1, dtype=np.int64)
    ids[valid] = universe.edge_index[rows[valid], cols[valid]]
    del rows, cols, valid, flat
    bad = np.flatnonzero(ids < 0)
    if bad.size:
        name = name_at(int(bad[0]))
        raise ReadProblemError(
            "I102",
            "/edges/" + escape_pointer_token(name),
            offset,
            detail=f"{name!r} is not an edge of this graph ({bad.size} such names)",
        )
    seen = np.bincount(ids, minlength=universe.n_edges)
    repeated = np.flatnonzero(seen > 1)
    if repeated.size:
        name = universe.edge_name(int(repeated[0]))
        raise ReadProblemError("P102", "/edges", offset, detail=f"the edges object repeats the key {name!r}")
    scores = np.zeros(universe.n_edges, dtype=np.float64)
    scores[ids] = np.frombuffer(values, dtype=np.float64) if len(values) else 0.0
    member = np.zeros(universe.n_edges, dtype=bool)
    member[ids] = np.frombuffer(bytes(flags), dtype=np.uint8).astype(bool) if len(flags) else False
    has_score = np.zeros(universe.n_edges, dtype=bool)
    has_score[ids] = np.frombuffer(bytes(scored), dtype=np.uint8).astype(bool) if len(scored) else False
    return scores, member, has_score, seen.astype(bool)
