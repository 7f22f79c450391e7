"""Strict JSON loading with bounded resources and source positions.

The fast path is the standard library's C parser. Problems it cannot locate
(duplicate keys, NaN/Infinity, numbers that overflow to infinity) are found
again by a small position-aware scanner, which also maps JSON pointers to
line:column for the findings of later stages. The scanner only runs when a
finding needs a position, so valid documents never pay for it.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_LIMITS",
    "Limits",
    "ParseProblem",
    "ParsedDocument",
    "SourceMap",
    "escape_pointer_token",
    "load_json_file",
    "parse_json_bytes",
]


@dataclass(frozen=True)
class Limits:
    """Resource limits for one document.

    Attributes:
        max_bytes: largest file accepted (checked before reading it).
        max_depth: deepest nesting of arrays and objects.
        max_string_digits: longest integer literal (Python refuses longer ones anyway).
    """

    max_bytes: int = 64 * 1024 * 1024
    max_depth: int = 64
    max_string_digits: int = 4000


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class ParseProblem:
    """A parse-stage problem: a catalogue symbol, a message, and a character offset."""

    symbol: str
    message: str
    offset: int | None = None
    pointer: str = ""
    hint: str | None = None


def escape_pointer_token(token: str | int) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


_MAX_POINTER = 4096  # longer pointers are not indexed (they only arise from hostile inputs)


class SourceMap:
    """Maps character offsets to line:column, and JSON pointers to offsets.

    Line starts are computed on first use; the pointer index (a full scan of the
    text) only when a pointer is first looked up.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_starts: list[int] | None = None
        self._values: dict[str, int] | None = None
        self._keys: dict[str, int] = {}

    def position(self, offset: int) -> tuple[int, int]:
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        line = bisect.bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    @property
    def values(self) -> dict[str, int]:
        """Pointer → offset of the value."""
        self._index()
        assert self._values is not None
        return self._values

    @property
    def keys(self) -> dict[str, int]:
        """Pointer → offset of the member's key."""
        self._index()
        return self._keys

    def _index(self) -> None:
        if self._values is None:
            self._values = {}
            _Scanner(self.text, self).scan()

    def locate(self, pointer: str, *, prefer_key: bool = True) -> tuple[int | None, int | None]:
        """Line and column of the value at ``pointer`` (or of its key), else of its nearest parent."""
        probe = pointer
        while True:
            offset = self.keys.get(probe) if prefer_key else None
            if offset is None:
                offset = self.values.get(probe)
            if offset is not None:
                return self.position(offset)
            if not probe:
                return None, None
            probe = probe.rsplit("/", 1)[0]


@dataclass
class ParsedDocument:
    """The outcome of loading one file."""

    path: Path
    text: str | None = None
    data: Any = None
    problems: list[ParseProblem] = field(default_factory=list)
    _source_map: SourceMap | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and self.text is not None

    @property
    def source_map(self) -> SourceMap:
        if self._source_map is None:
            self._source_map = SourceMap(self.text or "")
        return self._source_map

    def locate(self, pointer: str, *, prefer_key: bool = False) -> tuple[int | None, int | None]:
        """Position of a pointer; only for documents within the depth limit (they parsed)."""
        if self.text is None or self.data is None:
            return None, None
        return self.source_map.locate(pointer, prefer_key=prefer_key)

    def position_of(self, offset: int | None) -> tuple[int | None, int | None]:
        if offset is None or self.text is None:
            return None, None
        return self.source_map.position(offset)


def load_json_file(path: str | os.PathLike[str], limits: Limits = DEFAULT_LIMITS) -> ParsedDocument:
    """Read and parse one JSON file under ``limits``. Never raises for bad content.

    Raises:
        OSError: the path cannot be read at all (a usage error, not a finding).
    """
    path = Path(path)
    size = path.stat().st_size
    if size > limits.max_bytes:
        return ParsedDocument(
            path,
            problems=[
                ParseProblem(
                    "file-too-large",
                    f"file is {size} bytes, over the limit of {limits.max_bytes} bytes",
                    hint="move large numeric payloads into sidecar files (safetensors or .npy)",
                )
            ],
        )
    with path.open("rb") as handle:
        raw = handle.read(limits.max_bytes + 1)
    return parse_json_bytes(raw, path=path, limits=limits)


def parse_json_bytes(
    raw: bytes, *, path: str | os.PathLike[str] = "<bytes>", limits: Limits = DEFAULT_LIMITS
) -> ParsedDocument:
    """Parse ``raw`` strictly: UTF-8 without BOM, no duplicate keys, finite numbers, bounded depth."""
    doc = ParsedDocument(Path(path))
    if len(raw) > limits.max_bytes:
        doc.problems.append(
            ParseProblem("file-too-large", f"input is over the limit of {limits.max_bytes} bytes")
        )
        return doc
    if raw.startswith(b"\xef\xbb\xbf"):
        doc.text = ""
        doc.problems.append(
            ParseProblem(
                "byte-order-mark",
                "the file starts with a UTF-8 byte-order mark",
                offset=0,
                hint="JSON text must not begin with a BOM (RFC 8259 §8.1); save without it",
            )
        )
        return doc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        prefix = raw[: exc.start].decode("utf-8", errors="replace")
        doc.text = prefix
        doc.problems.append(
            ParseProblem(
                "invalid-utf8",
                f"invalid UTF-8 at byte {exc.start}: {exc.reason}",
                offset=len(prefix),
            )
        )
        return doc
    doc.text = text
    depth_problem = _check_depth(text, limits.max_depth)
    if depth_problem is not None:
        doc.problems.append(depth_problem)
        return doc
    flags: list[str] = []
    try:
        doc.data = json.loads(
            text,
            object_pairs_hook=lambda pairs: _object(pairs, flags),
            parse_constant=lambda name: _constant(name, flags),
            parse_float=lambda literal: _float(literal, flags),
        )
    except json.JSONDecodeError as exc:
        doc.problems.append(ParseProblem("invalid-json", exc.msg, offset=exc.pos))
        return doc
    except (ValueError, RecursionError) as exc:
        # Integer literals longer than Python accepts, or nesting the depth
        # check let through on an exotic input: both are invalid documents.
        doc.problems.append(ParseProblem("invalid-json", f"unparseable value: {exc}"))
        return doc
    if flags:
        doc.problems.extend(_Scanner(text, doc.source_map).diagnose())
        if not doc.problems:  # the scanner must agree; keep a finding either way
            doc.problems.append(ParseProblem("invalid-json", "non-conformant JSON value"))
    return doc


def _object(pairs: list[tuple[str, Any]], flags: list[str]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        flags.append("duplicate-key")
    return result


def _constant(name: str, flags: list[str]) -> float:
    flags.append("non-finite-number")
    return math.nan


def _float(literal: str, flags: list[str]) -> float:
    value = float(literal)
    if not math.isfinite(value):
        flags.append("non-finite-number")
    return value


_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def _check_depth(text: str, max_depth: int) -> ParseProblem | None:
    # Cheap exit: a document with few brackets cannot be deep.
    if text.count("[") + text.count("{") <= max_depth:
        return None
    depth = 0
    for match in _BRACKETS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > max_depth:
                return ParseProblem(
                    "nesting-too-deep",
                    f"nesting deeper than the limit of {max_depth} levels",
                    offset=match.start(),
                )
        elif token in "]}":
            depth -= 1
    return None


_TOKEN = re.compile(
    r"""[ \t\r\n]*(?:
      (?P<string>"(?:[^"\\\x00-\x1f]|\\.)*")
    | (?P<punct>[{}\[\],:])
    | (?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
    | (?P<literal>true|false|null)
    | (?P<constant>NaN|-?Infinity)
    )""",
    re.VERBOSE,
)


class _Scanner:
    """Walks JSON text once, recording where each pointer's key and value start.

    Iterative (no recursion) so depth is bounded only by the depth limit checked
    before. Used for positions and to pin down problems the fast parser only flags.
    """

    def __init__(self, text: str, source_map: SourceMap) -> None:
        self.text = text
        self.map = source_map
        self.problems: list[ParseProblem] = []

    def _tokens(self) -> Iterator[tuple[str, str, int]]:
        pos, end = 0, len(self.text)
        while pos < end:
            match = _TOKEN.match(self.text, pos)
            if match is None or match.end() == pos:
                if self.text[pos:].strip():
                    yield "error", self.text[pos], pos
                return
            kind = match.lastgroup or "error"
            yield kind, match.group(kind), match.start(kind)
            pos = match.end()

    def scan(self) -> None:
        if self.map._values is None:
            self.map._values = {}
        values = self.map._values
        # Each stack frame: [container kind, pointer, next array index, pending key pointer, seen keys]
        stack: list[list[Any]] = []
        expecting_key = False
        pending_key: str | None = None
        for kind, token, offset in self._tokens():
            if kind == "error":
                return
            if stack and stack[-1][0] == "object" and expecting_key:
                if kind == "string":
                    key = json.loads(token)
                    pointer = f"{stack[-1][1]}/{escape_pointer_token(key)}"
                    if key in stack[-1][4]:
                        self.problems.append(
                            ParseProblem(
                                "duplicate-key",
                                f"duplicate key {key!r} in object",
                                offset=offset,
                                pointer=pointer,
                                hint="every key of a JSON object must be unique; later values "
                                "would silently replace earlier ones",
                            )
                        )
                    elif len(pointer) <= _MAX_POINTER:
                        self.map._keys.setdefault(pointer, offset)
                    stack[-1][4].add(key)
                    pending_key = pointer
                    expecting_key = False
                    continue
                if token == "}":
                    stack.pop()
                    expecting_key = False
                continue
            if token in (",", ":"):
                if token == "," and stack and stack[-1][0] == "object":
                    expecting_key = True
                continue
            if token in ("]", "}"):
                if stack:
                    stack.pop()
                continue
            # A value starts here: compute its pointer.
            if not stack:
                pointer = ""
            elif stack[-1][0] == "array":
                pointer = f"{stack[-1][1]}/{stack[-1][2]}"
                stack[-1][2] += 1
            else:
                pointer = pending_key or stack[-1][1]
            if len(pointer) <= _MAX_POINTER:
                values.setdefault(pointer, offset)
            if kind == "constant":
                self.problems.append(
                    ParseProblem(
                        "non-finite-number",
                        f"{token} is not a JSON number",
                        offset=offset,
                        pointer=pointer,
                        hint="JSON has no NaN or Infinity; report a missing value by omitting it",
                    )
                )
            elif kind == "number" and not math.isfinite(float(token)):
                self.problems.append(
                    ParseProblem(
                        "non-finite-number",
                        f"{token} overflows to infinity",
                        offset=offset,
                        pointer=pointer,
                    )
                )
            if token == "{":
                stack.append(["object", pointer, 0, None, set()])
                expecting_key = True
            elif token == "[":
                stack.append(["array", pointer, 0, None, set()])

    def diagnose(self) -> list[ParseProblem]:
        self.scan()
        return self.problems
