"""Strict JSON loading with bounded resources and source positions.

The fast path is the standard library's C parser. Problems it cannot locate
(duplicate keys, NaN/Infinity, numbers that overflow to infinity, unpaired
surrogate escapes) are found again by a small position-aware scanner, which also
maps JSON pointers to line:column for the findings of later stages. The scanner
only runs when a finding needs a position, so valid documents never pay for it.

Every limit is checked before the parser builds anything: the size before the
file is read, the nesting depth and the number of values on the text.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mibspec.core.pointers import escape_pointer_token

__all__ = [
    "DEFAULT_LIMITS",
    "Limits",
    "ParseProblem",
    "ParsedDocument",
    "SourceMap",
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
        max_values: most JSON values (scalars, arrays and objects, the top-level value
            included; object keys are not values) in one document, counted on the text
            before parsing.
        max_findings: most findings the schema and rules stages report for one document;
            a stage that stops early says so in its status detail.
        max_recompute_seconds: wall-clock seconds the recompute stage may take for one
            report (``None``: no limit). Parsing, schema and rules are bounded by the limits
            above; recomputation runs models, so it has its own bound. The limit is checked
            at every progress step of the recomputation; past it the stage stops and fails
            with R105.
    """

    max_bytes: int = 64 * 1024 * 1024
    max_depth: int = 64
    max_string_digits: int = 4000
    max_values: int = 1_000_000
    max_findings: int = 1000
    max_recompute_seconds: float | None = None


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class ParseProblem:
    """A parse-stage problem: a catalogue symbol, a message, and a character offset."""

    symbol: str
    message: str
    offset: int | None = None
    pointer: str = ""
    hint: str | None = None


_MAX_POINTER = 4096  # longer pointers are not indexed (they only arise from hostile inputs)


class SourceMap:
    """Maps character offsets to line:column, and JSON pointers to offsets.

    Line starts are computed on first use; the pointer index (a full scan of the
    text) only when a pointer is first looked up. :meth:`prepare` indexes only the
    pointers about to be looked up, so a large document costs one scan and no
    index of all its values.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_starts: list[int] | None = None
        self._values: dict[str, int] | None = None
        self._keys: dict[str, int] = {}
        #: When set, the index holds only these pointers (see :meth:`prepare`).
        self._wanted: set[str] | None = None

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

    def prepare(self, pointers: Iterable[str]) -> None:
        """Index only ``pointers`` and their parents, in one scan (unless indexed already)."""
        if self._values is not None:
            return
        wanted: set[str] = set()
        for pointer in pointers:
            while pointer not in wanted:
                wanted.add(pointer)
                pointer = pointer.rsplit("/", 1)[0] if pointer else ""
        self._wanted = wanted
        self._index()

    def locate(self, pointer: str, *, prefer_key: bool = True) -> tuple[int | None, int | None]:
        """Line and column of the value at ``pointer`` (or of its key), else of its nearest parent."""
        if self._wanted is not None and pointer not in self._wanted:
            self._values, self._keys, self._wanted = None, {}, None  # index everything instead
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
        # At most one byte more than stat() reported (a file growing meanwhile is caught),
        # never a buffer of the full limit.
        raw = handle.read(min(size, limits.max_bytes) + 1)
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
    # Values first: the count bounds the work of the depth check's slow path.
    limit_problem = _check_values(text, limits.max_values) or _check_depth(text, limits.max_depth)
    if limit_problem is not None:
        doc.problems.append(limit_problem)
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
    surrogates, long_digits = bool(_SURROGATE_ESCAPE.search(text)), bool(_LONG_DIGITS.search(text))
    if surrogates or long_digits:
        flags.extend(_walk_for_problems(doc.data, surrogates=surrogates, huge_integers=long_digits))
    if flags:
        doc.problems.extend(_Scanner(text, None).diagnose())
        if not doc.problems:  # the scanner must agree; keep a finding either way
            doc.problems.append(ParseProblem("invalid-json", "non-conformant JSON value"))
    return doc


# Cheap pre-filters on the text: a \uD800-\uDFFF escape (possibly after an escaped
# backslash), and a run of digits long enough for an integer beyond binary64 (>= 2^1024).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_LONG_DIGITS = re.compile(r"(?<![0-9])[0-9]{309}")  # tried at the start of a run only: linear
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _walk_for_problems(data: Any, *, surrogates: bool, huge_integers: bool) -> list[str]:
    """Flags for keys or strings holding a surrogate, and integers that overflow binary64."""
    flags: set[str] = set()
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if surrogates and _LONE_SURROGATE.search(node):
                flags.add("unpaired-surrogate")
        elif isinstance(node, int) and huge_integers and not isinstance(node, bool):
            try:
                float(node)  # correctly rounded, as float() rounds the literal's text
            except OverflowError:
                flags.add("non-finite-number")
        elif isinstance(node, dict):
            stack.extend(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return sorted(flags)


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


_BRACKETS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")


def _check_depth(text: str, max_depth: int) -> ParseProblem | None:
    """Refuse nesting deeper than ``max_depth`` (no recursion, regular expressions in C).

    With strings blanked and everything but brackets dropped, each pass that deletes the
    innermost ``[]`` and ``{}`` pairs peels one level: a text that is not empty after
    ``max_depth`` passes that still find pairs is deeper than the limit. Only then is the
    text walked bracket by bracket, to report where the limit is crossed.
    """
    # Cheap exit: a document with few brackets cannot be deep.
    if text.count("[") + text.count("{") <= max_depth:
        return None
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    for _ in range(max_depth):
        brackets, removed = _INNERMOST.subn("", brackets)
        if not brackets or not removed:
            return None  # within the limit, or unbalanced (the parser reports that)
    if not _INNERMOST.search(brackets):
        return None
    del brackets
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


# A JSON string literal (unrolled: no backtracking), and JSON's insignificant whitespace.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NO_WHITESPACE = str.maketrans("", "", " \t\r\n")


def _check_values(text: str, max_values: int) -> ParseProblem | None:
    """Refuse text holding more than ``max_values`` JSON values, without parsing it.

    Outside strings, a well-formed text holds 1 + (commas) + (non-empty containers)
    values: each container holds one more element than it has separating commas.
    """
    # Cheap exit: counting inside strings too only over-counts.
    if text.count(",") + text.count("[") + text.count("{") + 1 <= max_values:
        return None
    # Strings emptied and whitespace dropped (both in C): an empty container is "[]" or "{}".
    bare = _STRING.sub('""', text).translate(_NO_WHITESPACE)
    commas, containers = bare.count(","), bare.count("[") + bare.count("{")
    empty = bare.count("[]") + bare.count("{}")
    del bare
    count = 1 + commas + containers - empty
    if count <= max_values:
        return None
    return ParseProblem(
        "too-many-values",
        f"{count} JSON values, over the limit of {max_values}",
        hint="move large numeric payloads into sidecar files (safetensors or .npy)",
    )


_TOKEN = re.compile(
    r"""[ \t\r\n]*(?:
      (?P<string>"[^"\\\x00-\x1f]*(?:\\.[^"\\\x00-\x1f]*)*")
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

    def __init__(self, text: str, source_map: SourceMap | None) -> None:
        self.text = text
        #: Where to record positions (None: only diagnose problems).
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
        values: dict[str, int] = {}
        keys: dict[str, int] = {}
        wanted: set[str] | None = set()  # record nothing when only diagnosing
        if self.map is not None:
            if self.map._values is None:
                self.map._values = {}
            values, keys, wanted = self.map._values, self.map._keys, self.map._wanted
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
                    self._check_string(key, token, offset, pointer)
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
                    elif len(pointer) <= _MAX_POINTER and (wanted is None or pointer in wanted):
                        keys.setdefault(pointer, offset)
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
            if len(pointer) <= _MAX_POINTER and (wanted is None or pointer in wanted):
                values.setdefault(pointer, offset)
            if kind == "string":
                self._check_string(None, token, offset, pointer)
            elif kind == "constant":
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
                        f"{token if len(token) <= 40 else token[:20] + '…'} overflows to infinity",
                        offset=offset,
                        pointer=pointer,
                    )
                )
            if token == "{":
                stack.append(["object", pointer, 0, None, set()])
                expecting_key = True
            elif token == "[":
                stack.append(["array", pointer, 0, None, set()])

    def _check_string(self, value: str | None, token: str, offset: int, pointer: str) -> None:
        if "\\u" not in token:
            return
        if value is None:
            value = json.loads(token)
        if _LONE_SURROGATE.search(value):
            self.problems.append(
                ParseProblem(
                    "unpaired-surrogate",
                    "a string escapes half of a UTF-16 surrogate pair; it is not Unicode text",
                    offset=offset,
                    # The pointer names the string by its escape: a lone surrogate cannot be printed.
                    pointer=_LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", pointer),
                    hint="escape characters outside the Basic Multilingual Plane as a full pair "
                    "(\\ud83d\\ude00) or write them as UTF-8",
                )
            )

    def diagnose(self) -> list[ParseProblem]:
        self.scan()
        return self.problems
