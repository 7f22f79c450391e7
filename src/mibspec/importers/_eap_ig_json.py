"""The reader of EAP-IG graph JSON, for ``mibspec import eap-ig`` only.

EAP-IG writes its graphs with Python's ``json.dump``, which spells an unscored node
(a NaN score) as the bare token ``NaN``. That token is not JSON, so documents are
never read with this reader: it exists for this one import format, and it accepts
``NaN`` (and reports ``Infinity``) where the strict document parser refuses both.
Everything else is as strict as a document: an object repeating a key is refused
(P102), malformed text is P101 with its line and column.

Graphs of large models list millions of edges (Llama-3.1-8B: 1,592,881). The edges
are not built as Python objects. An edges object exactly as ``json.dump`` writes it
(default separators, ``score`` before ``in_graph``, names without escapes) is read in
blocks of entries, each block by one ``findall`` whose matches must cover it without a
gap. Otherwise one regular expression reads each entry (``"name": {"score": x,
"in_graph": b}``, keys in either order, either one alone). Either way the values go
straight into flat arrays, indexed by the edge's canonical index. An edges object in
any other shape (extra keys, NaN edge scores, unusual escapes) is read again by the
general parser, so only speed depends on the shape, never the result. Memory: the
text, the universe's cell index, three flat arrays and one block of entries.
"""

from __future__ import annotations

import gc
import itertools
import json
import re
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

__all__ = ["F32_MAX", "GraphText", "ReadProblemError", "read_graph_json", "score_problem"]

#: The largest float32 (the circuit sidecar stores scores as float32): a larger finite score
#: would be stored as infinity.
F32_MAX = 3.4028234663852886e38

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
#: An entry as ``json.dump`` writes it with its default separators (the fast path).
_DUMPED = re.compile(r'"([^"\\\x00-\x1f]*)": \{"score": ' + _NUM + r', "in_graph": ' + _BOOL + r"\}(, |\})")
#: The characters of a dumped entry besides its name, score, flag and closing separator.
_DUMPED_FIXED = len('"": {"score": , "in_graph": }')
#: Characters of edges text matched per block by the fast path (about 3,500 entries), and
#: the entries taken at a time after the last block: bounded memory either way.
_BLOCK = 1 << 18
_TAIL = 4096


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


def score_problem(what: str, value: float) -> dict[str, str]:
    """The parameters of I105 for a ``what`` score of ``value`` that cannot be imported."""
    if value != value:
        why = "only node and neuron scores may be NaN (unscored)"
    elif abs(value) == float("inf"):
        why = "a score is a finite number"
    else:
        why = f"the circuit sidecar stores float32, whose largest value is {F32_MAX:.8g}"
    text = str(value)  # an integer literal has at most 4,000 digits (the parse limits)
    shown = text if len(text) <= 24 else f"{text[:8]}… ({len(text)} characters)"
    return {"what": what, "value": shown, "why": why}


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
    except ValueError:  # int() refuses a literal of more than 4,300 digits (as documents do, P101)
        detail = "an integer literal has too many digits"
        raise ReadProblemError("P101", pointer, pos, detail=detail) from None
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
    inner = _skip(text, pos + 1)
    if text[inner : inner + 1] != "}" and (dumped := _dumped_edges(text, pos, universe)) is not None:
        return dumped
    forward, backward, stride = _cells(universe)
    cells, values, flags, scored = array("q"), array("d"), bytearray(), bytearray()
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


def _dumped_edges(text: str, pos: int, universe: Any) -> tuple[tuple[Any, ...], int] | None:
    """The edges object at ``pos`` if every entry is as ``json.dump`` writes it, else ``None``.

    Blocks of about :data:`_BLOCK` characters end just before an entry (after ``}, ``);
    a block is read by one ``findall`` and accepted only when its matches, all closed by
    ``, ``, add up to its length. The entries after the last full block are matched one
    by one, each where the previous ended, up to the one closed by ``}``.
    """
    import numpy as np

    forward, backward, stride = _cells(universe)
    cells: list[Any] = []
    values, flags = array("d"), bytearray()

    def take(entries: list[tuple[str, ...]], length: int | None) -> bool:
        """Add the entries; with a ``length``, only if they are dumped entries, all closed
        by ``, ``, that cover exactly that many characters."""
        names, scores, members, closes = zip(*entries, strict=True)
        if length is not None:
            covered = _DUMPED_FIXED * len(entries) + sum(map(len, names)) + sum(map(len, scores))
            covered += sum(map(len, members)) + 2 * len(entries)
            if covered != length or closes.count(", ") != len(closes):
                return False
        sources, _, targets = zip(*map(str.partition, names, itertools.repeat("->")), strict=True)
        rows = np.fromiter(map(forward.get, sources, itertools.repeat(len(forward))), np.int64, len(names))
        columns = map(backward.get, targets, itertools.repeat(len(backward)))
        cells.append(rows * stride + np.fromiter(columns, np.int64, len(names)))
        values.extend(map(float, scores))
        flags.extend(map("true".__eq__, members))
        return True

    collecting = gc.isenabled()
    gc.disable()  # millions of short-lived tuples and no cycle among them
    try:
        start = pos + 1
        while (cut := text.find('}, "', start + _BLOCK)) >= 0:
            stop = cut + 3
            block = _DUMPED.findall(text, start, stop)
            if not block or not take(block, stop - start):
                break  # not a run of dumped entries (or the object ends inside): one by one
            start = stop
        tail: list[tuple[str, ...]] = []
        for match in _DUMPED.finditer(text, start):
            if match.start() != start:
                return None
            tail.append(match.groups())
            start = match.end()
            if match.group(4) == "}":
                take(tail, None)
                name_at = lambda i: _nth_key(text, pos, i)  # noqa: E731  (only for a finding)
                every = np.concatenate(cells)
                return _scatter(universe, every, values, flags, b"\x01" * len(every), name_at, pos), start
            if len(tail) == _TAIL:
                take(tail, None)
                tail.clear()
        return None
    finally:
        if collecting:
            gc.enable()


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
        # NaN is checked on the whole graph: NaN on every edge is the binary form (no scores)
        if score is not None and score == score and not abs(score) <= F32_MAX:
            raise ReadProblemError("I105", f"{pointer}/score", offset, **score_problem("edge", score))
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
