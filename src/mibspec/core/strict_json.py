"""Strict JSON loading with bounded resources and source positions.

The fast path is the standard library's C parser. Problems it cannot locate
(duplicate keys, NaN/Infinity, numbers that overflow to infinity, unpaired
surrogate escapes) are found again by a small position-aware scanner, which also
maps JSON pointers to line:column for the findings of later stages. The scanner
only runs when a finding needs a position, so valid documents never pay for it.

Every limit is checked before the parser builds anything: the size before the
file is read, the nesting depth and the number of values on the text, in one pass
whose time is linear in the text's length. JSON sidecars and the rows of JSON Lines
files are parsed by the same functions (:func:`read_json_lines`).
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

from mibspec.core.pointers import escape_pointer_token

__all__ = [
    "DEFAULT_LIMITS",
    "PARSE_CODES",
    "JsonLinesError",
    "Limits",
    "ParseProblem",
    "ParsedDocument",
    "SourceMap",
    "describe_problem",
    "load_json_file",
    "parse_json_bytes",
    "read_json_lines",
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
        max_findings: most findings the parse, schema and rules stages report for one
            document; a stage that stops early says so in its status detail. The parse stage
            stops looking for more problems there, so its time is bounded too.
        max_recompute_seconds: wall-clock seconds the recompute stage may take for one
            report (default one hour; ``None`` or infinity: no limit). Parsing, schema and
            rules are bounded by the limits above; recomputation runs models, so it has its
            own bound. Work the report declares that would take longer is refused before it
            starts (R125, :mod:`mibspec.core.work`); what starts is stopped at the limit, at
            its next progress step or by a timer between two Python steps, and fails with
            R105.
        max_recompute_bytes: most memory one step of a recomputation may hold besides the
            model, as the report's declarations size it (R125, checked before the
            recomputation starts).
        max_model_bytes: most bytes a model recomputation reads (the model files together)
            and most bytes the parameters its config implies may take in the declared
            dtype; both are checked before anything is read or built (R107).
    """

    max_bytes: int = 64 * 1024 * 1024
    max_depth: int = 64
    max_string_digits: int = 4000
    max_values: int = 1_000_000
    max_findings: int = 1000
    max_recompute_seconds: float | None = 3600.0
    max_model_bytes: int = 8 * 1024**3
    max_recompute_bytes: int = 8 * 1024**3


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class ParseProblem:
    """A parse-stage problem: a catalogue symbol, a message, and a character offset."""

    symbol: str
    message: str
    offset: int | None = None
    pointer: str = ""
    hint: str | None = None


#: Parse problems (their symbols) → catalogue codes.
PARSE_CODES = {
    "invalid-json": "P101",
    "duplicate-key": "P102",
    "non-finite-number": "P103",
    "invalid-utf8": "P104",
    "byte-order-mark": "P105",
    "nesting-too-deep": "P106",
    "file-too-large": "P107",
    "unpaired-surrogate": "P109",
    "too-many-values": "P110",
}


_BLOCK = 1 << 16  # characters per block of the line index
_MAX_POINTER = 4096  # longer pointers are neither built nor indexed (only hostile inputs have them)


class SourceMap:
    """Maps character offsets to line:column, and JSON pointers to offsets.

    Line starts are computed on first use; the pointer index (a full scan of the
    text) only when a pointer is first looked up. :meth:`prepare` indexes only the
    pointers about to be looked up, so a large document costs one scan and no
    index of all its values.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        #: Per block of ``_BLOCK`` characters: the newlines before it and the offset of the
        #: last of them (-1: none). A few integers per block, however many lines the text has.
        self._blocks: list[tuple[int, int]] | None = None
        self._values: dict[str, int] | None = None
        self._keys: dict[str, int] = {}
        #: When set, the index holds only these pointers (see :meth:`prepare`).
        self._wanted: set[str] | None = None

    def position(self, offset: int) -> tuple[int, int]:
        """Line and column (1-based, in code points) of a character offset."""
        text = self.text
        if self._blocks is None:
            self._blocks, lines, last = [], 0, -1
            for start in range(0, len(text) + 1, _BLOCK):
                self._blocks.append((lines, last))
                lines += text.count("\n", start, start + _BLOCK)
                last = max(last, text.rfind("\n", start, start + _BLOCK))
        offset = max(0, min(offset, len(text)))
        start = offset - offset % _BLOCK
        lines, last = self._blocks[start // _BLOCK]
        last = max(last, text.rfind("\n", start, offset))
        return lines + text.count("\n", start, offset) + 1, offset - last

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
    #: More problems than the findings limit were found; only that many are listed.
    more_problems: bool = False
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
        OSError: the path cannot be read at all (a usage error, not a finding), or it is not
            a regular file (a device or a FIFO, which could be endless or block).
    """
    path = Path(path)
    status = path.stat()
    if not stat.S_ISREG(status.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    size = status.st_size
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
    limit_problem = _check_limits(text, limits.max_depth, limits.max_values)
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
        keep = max(limits.max_findings, 1)  # a document that does not parse always says why
        found = _Scanner(text, None, max_problems=keep).diagnose()
        doc.problems.extend(found[:keep])
        doc.more_problems = len(found) > keep
        if not found:  # the scanner must agree; keep a finding either way
            doc.problems.append(ParseProblem("invalid-json", "non-conformant JSON value"))
    return doc


def describe_problem(doc: ParsedDocument, problem: ParseProblem, *, line_offset: int = 0) -> str:
    """``line L, column C: message (P1xx at /pointer)``: a parse problem of a sidecar, for
    the detail of the finding about it (the finding itself sits in the document that
    declares the sidecar). ``line_offset`` is added to the line (a row of a JSON Lines file)."""
    line, column = doc.position_of(problem.offset)
    where = f"line {(line or 1) + line_offset}" + (f", column {column}" if column is not None else "")
    at = f" at {problem.pointer}" if problem.pointer else ""
    return f"{where}: {problem.message} ({PARSE_CODES[problem.symbol]}{at})"


class JsonLinesError(ValueError):
    """A line of a JSON Lines file that is too long, not strict JSON, or not an object."""

    def __init__(self, number: int, detail: str) -> None:
        super().__init__(detail)
        #: The 1-based line number.
        self.number = number


_ROW_NAME = Path("<JSON Lines row>")


def read_json_lines(
    handle: BinaryIO, limits: Limits = DEFAULT_LIMITS, *, max_line: int | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, row)`` for each line of a JSON Lines file opened in binary.

    Each line is parsed as strictly as a document (:func:`parse_json_bytes` under ``limits``)
    and must hold a JSON object; an empty or blank line is refused (SPEC.md A-5, datasets.md
    DS-1), so that the rows counted are the lines of the file. Lines are split at ``\\n``
    only (the last one may lack it), and never read whole beyond ``max_line`` bytes (default:
    the size limit).

    Raises:
        JsonLinesError: at the first line that is too long, blank, not strict JSON or not an object.
    """
    cap = limits.max_bytes if max_line is None else max_line
    first_only = replace(limits, max_findings=1)  # the first problem of a line is reported
    for number, line in enumerate(iter(lambda: handle.readline(cap + 1), b""), start=1):
        if len(line) > cap:
            raise JsonLinesError(number, f"line {number} is longer than {cap} bytes")
        if not line.strip():
            raise JsonLinesError(number, f"line {number} is empty: JSON Lines holds one object on every line")
        # one name for every row: a name per row would intern a new string per line (pathlib),
        # and the interpreter's table of interned strings grows and resizes with the file
        doc = parse_json_bytes(line.removesuffix(b"\n"), path=_ROW_NAME, limits=first_only)
        if doc.problems:
            raise JsonLinesError(number, describe_problem(doc, doc.problems[0], line_offset=number - 1))
        if not isinstance(doc.data, dict):
            raise JsonLinesError(number, f"line {number} is not a JSON object")
        yield number, doc.data


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


# The pre-check's tokens. Every quantifier is possessive, so no match ever backtracks, and a
# string runs to its closing quote or, unterminated, to the end of the text (where the parser
# stops too): each character is read a bounded number of times, whatever the input.
_PLAIN = r'[^"\[\]{},]++'  # scalars, whitespace and colons: nothing the limits count
_STRING_TO_END = r'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)'
_EMPTY = r"\[[ \t\r\n]*+\]|\{[ \t\r\n]*+\}"
#: One structural event: a comma, a bracket of a non-empty container, or a run of empty
#: containers (with what lies between them), after everything the limits do not count.
_EVENT = re.compile(
    rf"(?:{_PLAIN}|{_STRING_TO_END})*+"
    rf"(?:(?P<empty>(?:{_EMPTY})(?:{_EMPTY}|{_PLAIN}|{_STRING_TO_END})*+)|(?P<mark>[\[\]{{}},]))",
    re.DOTALL,
)


def _check_limits(text: str, max_depth: int, max_values: int) -> ParseProblem | None:
    """Refuse nesting deeper than ``max_depth`` or more than ``max_values`` values, unparsed.

    One pass over the text, without recursion: outside strings, a well-formed text holds
    1 + (commas) + (non-empty containers) values, since each container holds one more
    element than it has separating commas, and an empty container nests one level deeper
    than where it stands. The pass stops at the first limit crossed, or at a closing bracket
    without an opening one (the parser reports that text, and builds nothing beyond it), so
    it handles at most about 4 × ``max_values`` events in Python; the characters between
    events are skipped by one regular-expression match each.
    """
    openers = text.count("[") + text.count("{")
    # Cheap exit (counting inside strings too only over-counts).
    if openers <= max_depth and text.count(",") + openers + 1 <= max_values:
        return None
    depth, values, pos, match_event = 0, 1, 0, _EVENT.match
    while (event := match_event(text, pos)) is not None:
        pos = event.end()
        mark = event["mark"]
        if mark is None:  # empty containers, one level below the current depth
            if depth + 1 > max_depth:
                return _too_deep(max_depth, event.start("empty"))
            continue
        if mark == ",":
            values += 1
        elif mark in "[{":
            depth += 1
            values += 1
            if depth > max_depth:
                return _too_deep(max_depth, event.start("mark"))
        else:
            depth -= 1
            if depth < 0:
                return None  # unbalanced: invalid JSON, and the parser stops before here
            continue
        if values > max_values:
            return ParseProblem(
                "too-many-values",
                f"more than {max_values} JSON values, the limit",
                hint="move large numeric payloads into sidecar files (safetensors or .npy)",
            )
    return None


def _too_deep(max_depth: int, offset: int) -> ParseProblem:
    return ParseProblem(
        "nesting-too-deep", f"nesting deeper than the limit of {max_depth} levels", offset=offset
    )


_TOKEN = re.compile(
    r"""[ \t\r\n]*+(?:
      (?P<string>"[^"\\\x00-\x1f]*+(?:\\.[^"\\\x00-\x1f]*+)*+")
    | (?P<punct>[{}\[\],:])
    | (?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
    | (?P<literal>true|false|null)
    | (?P<constant>NaN|-?Infinity)
    )""",
    re.VERBOSE,
)


def _child(frame: list[Any], token: str | int) -> tuple[str, bool]:
    """The pointer of ``token`` in a container's frame, and whether it is exact.

    Pointers longer than ``_MAX_POINTER`` are never built, so a long key costs its length
    once, not once for every value below it: what lies below is named (inexactly) by its
    nearest ancestor that fits.
    """
    parent = frame[1]
    if not frame[3]:
        return parent, False
    token = str(token)
    if len(parent) + 1 + len(token) > _MAX_POINTER:
        return parent, False
    child = f"{parent}/{escape_pointer_token(token)}"
    return (child, True) if len(child) <= _MAX_POINTER else (parent, False)


class _Scanner:
    """Walks JSON text once, recording where each pointer's key and value start.

    Iterative (no recursion) so depth is bounded only by the depth limit checked
    before. Used for positions and to pin down problems the fast parser only flags.
    The walk stops once it holds more than ``max_problems`` problems.
    """

    def __init__(self, text: str, source_map: SourceMap | None, max_problems: int | None = None) -> None:
        self.text = text
        #: Where to record positions (None: only diagnose problems).
        self.map = source_map
        self.problems: list[ParseProblem] = []
        self.max_problems = max_problems

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
        values, keys, wanted = self._recording()
        # Each stack frame: [container kind, pointer, next array index, pointer exact, seen keys]
        stack: list[list[Any]] = []
        expecting_key = False
        pending_key: tuple[str, bool] | None = None
        limit = self.max_problems
        for kind, token, offset in self._tokens():
            if kind == "error" or (limit is not None and len(self.problems) > limit):
                return
            if stack and stack[-1][0] == "object" and expecting_key:
                if kind == "string":
                    key = json.loads(token)
                    pointer, exact = _child(stack[-1], key)
                    self._check_string(key, token, offset, pointer)
                    if key in stack[-1][4]:
                        self._duplicate_key(key, offset, pointer)
                    elif exact and (wanted is None or pointer in wanted):
                        keys.setdefault(pointer, offset)
                    stack[-1][4].add(key)
                    pending_key = pointer, exact
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
                pointer, exact = "", True
            elif stack[-1][0] == "array":
                pointer, exact = _child(stack[-1], stack[-1][2])
                stack[-1][2] += 1
            else:
                pointer, exact = pending_key or (stack[-1][1], False)
            if exact and (wanted is None or pointer in wanted):
                values.setdefault(pointer, offset)
            if kind == "string":
                self._check_string(None, token, offset, pointer)
            elif kind == "constant" or (kind == "number" and not math.isfinite(float(token))):
                self._non_finite(kind, token, offset, pointer)
            if token == "{":
                stack.append(["object", pointer, 0, exact, set()])
                expecting_key = True
            elif token == "[":
                stack.append(["array", pointer, 0, exact, set()])

    def _recording(self) -> tuple[dict[str, int], dict[str, int], set[str] | None]:
        """Where ``scan`` records value and key offsets, and which pointers (``None``: all)."""
        if self.map is None:
            return {}, {}, set()  # record nothing when only diagnosing
        if self.map._values is None:
            self.map._values = {}
        return self.map._values, self.map._keys, self.map._wanted

    def _duplicate_key(self, key: str, offset: int, pointer: str) -> None:
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

    def _non_finite(self, kind: str, token: str, offset: int, pointer: str) -> None:
        """A NaN or Infinity constant, or a number that overflows to infinity."""
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
            return
        self.problems.append(
            ParseProblem(
                "non-finite-number",
                f"{token if len(token) <= 40 else token[:20] + '…'} overflows to infinity",
                offset=offset,
                pointer=pointer,
            )
        )

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
        """The problems of the text, at most ``max_problems`` + 1 (more than the limit)."""
        self.scan()
        return self.problems
