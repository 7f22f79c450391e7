"""Fuzzing the validation path of ``mibspec verify`` (no recomputation).

Inputs come from two generators, both driven by a ``random.Random`` so that an input is
a pure function of its seed (and Hypothesis can drive them through ``st.randoms``):

- :class:`SchemaSampler` draws documents of every kind from the JSON Schemas in
  ``spec/v1/schemas`` (``$ref``, ``allOf`` with ``if``/``then`` discriminators, ``anyOf``,
  ``properties``, ``items``, bounds, ``enum``/``const`` and ``pattern``, the last through a
  small sampler over the regular expression's parse tree);
- :func:`mutate` takes a conformance case or an example folder and damages its document
  or one of its sidecars: byte flips, truncation, insertion of hostile tokens, key
  deletion and duplication, type swaps, huge numbers, deep nesting, hostile artifact
  paths (``..``, absolute, symbolic links out of the folder and in a loop), tampered
  safetensors, ``.npy`` and JSON Lines files (half the time with the document's size and
  hash updated to match, so that the content checks run).

:func:`check_outcome` states what must hold for every input: no exception escapes, every
document that is not conformant carries an error finding with a catalogue code, every
failed stage has an error finding of that stage and every error finding's stage failed, no
stage after one that did not pass is reported as passed, every finding is located, and the
JSON and text outputs encode as UTF-8. :class:`Fuzzer` runs inputs in a scratch copy of
the corpus with a per-input time limit. ``tests/fuzz/run.py`` is the command-line entry
point.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import random
import re
import shutil
import signal
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mibspec.core.spec import KINDS

try:  # Python 3.11+
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parent.parent.parent
CONFORMANCE = REPO / "conformance" / "v1"
EXAMPLES = REPO / "examples"
EXAMPLE_FOLDERS = ("circuit", "circuit-ioi", "saliency", "causal_bench", "causal_variable")
DOCUMENT_KINDS = KINDS  # every kind the validator accepts

# --- documents drawn from the JSON Schemas ----------------------------------------------------


def _sample_regex(pattern: str, rng: random.Random) -> str:
    """A string matching ``pattern`` (the subset of regular expressions the schemas use)."""
    out: list[str] = []
    _emit(sre_parse.parse(pattern), rng, out)
    return "".join(out)


_CATEGORIES = {
    "CATEGORY_DIGIT": "0123456789",
    "CATEGORY_WORD": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_",
    "CATEGORY_SPACE": " ",
}


def _emit(parsed: Any, rng: random.Random, out: list[str]) -> None:
    for op, arg in parsed:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "ANY":
            out.append(rng.choice("abcXYZ019_-."))
        elif name == "IN":
            choices: list[str] = []
            for item_op, item_arg in arg:
                item = str(item_op)
                if item == "LITERAL":
                    choices.append(chr(item_arg))
                elif item == "RANGE":
                    low, high = item_arg
                    choices.extend(chr(c) for c in range(low, min(high, low + 200) + 1))
                elif item == "CATEGORY":
                    choices.extend(_CATEGORIES.get(str(item_arg), "a"))
            out.append(rng.choice(choices or ["a"]))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = arg
            high = min(high, low + 6)
            for _ in range(rng.randint(low, high)):
                _emit(sub, rng, out)
        elif name == "SUBPATTERN":
            _emit(arg[-1], rng, out)
        elif name == "BRANCH":
            _emit(rng.choice(arg[1]), rng, out)
        elif name == "CATEGORY":
            out.append(rng.choice(_CATEGORIES.get(str(arg), "a")))
        # AT (anchors) and anything else emit nothing.


class SchemaSampler:
    """Draws instances of a JSON Schema (mostly valid ones) with a ``random.Random``.

    The schemas' discriminated unions (``allOf`` of ``if: {properties: {x: {const: c}}}``
    / ``then``) are followed: one branch is chosen, its constant set and its ``then``
    schema merged in. Merging is shallow, so a few drawn instances violate a nested
    constraint of a branch; callers that need validity check it.
    """

    def __init__(self, schema: dict[str, Any], rng: random.Random, *, max_depth: int = 10) -> None:
        self.root = schema
        self.rng = rng
        self.max_depth = max_depth

    def sample(self) -> Any:
        return self._value(self.root, 0)

    def _resolve(self, node: Any) -> dict[str, Any]:
        while isinstance(node, dict) and "$ref" in node:
            target: Any = self.root
            for token in node["$ref"][2:].split("/"):
                target = target[token.replace("~1", "/").replace("~0", "~")]
            rest = {k: v for k, v in node.items() if k != "$ref"}
            node = {**target, **rest}
        return node if isinstance(node, dict) else {}

    def _merge(self, base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        """Both schemas' constraints (``properties``, ``items`` and ``additionalProperties``
        merged recursively, ``required`` united, other keywords from ``extra``)."""
        base, extra = self._resolve(base), self._resolve(extra)
        nested = ("properties", "required", "items", "additionalProperties")
        merged = {**base, **{k: v for k, v in extra.items() if k not in nested}}
        properties = dict(base.get("properties", {}))
        closed = base.get("additionalProperties") is False and "properties" in base
        for key, sub in extra.get("properties", {}).items():
            if closed and key not in properties:
                continue  # a closed object keeps out what a later branch only constrains
            properties[key] = self._merge(properties.get(key, {}), sub)
        if properties:
            merged["properties"] = properties
        for key in ("items", "additionalProperties"):
            if isinstance(extra.get(key), dict):
                below = base.get(key)
                merged[key] = self._merge(below if isinstance(below, dict) else {}, extra[key])
            elif key in base:
                merged[key] = base[key]
        merged["required"] = sorted({*base.get("required", ()), *extra.get("required", ())})
        if extra.get("additionalProperties") is False:  # a closing branch: only its properties remain
            allowed = extra.get("properties", {})
            merged["properties"] = {k: v for k, v in merged.get("properties", {}).items() if k in allowed}
            merged["additionalProperties"] = False
        return merged

    def _flatten(self, node: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Merge plain ``allOf`` parts and one chosen conditional branch; return forced values."""
        node = self._resolve(node)
        forced: dict[str, Any] = {}
        base = {k: v for k, v in node.items() if k != "allOf"}
        pending = list(node.get("allOf", ()))
        # A chosen branch may bring conditionals of its own (a track's report, then its spec
        # version): rounds until none is left, bounded by the schemas' nesting.
        for _ in range(8):
            if not pending:
                break
            # key -> [(the values a branch applies to, its then)]; a branch of an ``enum`` applies
            # to several values (a spec version and the later ones)
            conditionals: dict[str, list[tuple[list[Any], dict[str, Any]]]] = {}
            for part in pending:
                if "if" in part:
                    for key, condition in part["if"].get("properties", {}).items():
                        values = [condition["const"]] if "const" in condition else condition.get("enum")
                        if values:
                            conditionals.setdefault(key, []).append((values, part.get("then", {})))
                else:
                    base = self._merge(base, {k: v for k, v in part.items() if k != "allOf"})
                    pending_parts = part.get("allOf", ())
                    conditionals.setdefault("", []).extend(([], p) for p in pending_parts)
            pending = [then for _, then in conditionals.pop("", [])]
            for key, branches in conditionals.items():
                choices = list(dict.fromkeys(v for values, _ in branches for v in values))
                value = self.rng.choice(choices) if key not in forced else forced[key]
                forced[key] = value
                for values, then in branches:
                    if value in values:
                        resolved = self._resolve(then)
                        base = self._merge(base, {k: v for k, v in resolved.items() if k != "allOf"})
                        pending += list(resolved.get("allOf", ()))
            pending += list(base.pop("allOf", ()))
        for key in ("anyOf", "oneOf"):
            if key in base:
                options = base.pop(key)
                base = self._merge(base, self.rng.choice(options))
        return base, forced

    def _value(self, node: Any, depth: int) -> Any:
        node, forced = self._flatten(node)
        if "const" in node:
            return copy.deepcopy(node["const"])
        if "enum" in node:
            return copy.deepcopy(self.rng.choice(node["enum"]))
        kind = node.get("type")
        if isinstance(kind, list):
            kind = self.rng.choice(kind)
        if kind is None:
            kind = "object" if "properties" in node else self.rng.choice(["string", "integer", "null"])
        if kind == "object":
            return self._object(node, forced, depth)
        if kind == "array":
            return self._array(node, depth)
        if kind == "string":
            return self._string(node)
        if kind in ("integer", "number"):
            return self._number(node, kind == "integer")
        if kind == "boolean":
            return self.rng.random() < 0.5
        return None

    def _object(self, node: dict[str, Any], forced: dict[str, Any], depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        required = set(node.get("required", ()))
        for key, sub in node.get("properties", {}).items():
            if key in forced:
                out[key] = copy.deepcopy(forced[key])
            elif key in required or (depth < self.max_depth and self.rng.random() < 0.5):
                out[key] = self._value(sub, depth + 1)
        most = node.get("maxProperties")
        optional = [key for key in out if key not in required and key not in forced]
        while most is not None and len(out) > most and optional:
            del out[optional.pop(self.rng.randrange(len(optional)))]
        missing = [key for key in node.get("properties", {}) if key not in out]
        while len(out) < node.get("minProperties", 0) and missing:
            key = missing.pop(self.rng.randrange(len(missing)))
            out[key] = self._value(node["properties"][key], depth + 1)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and depth < self.max_depth:
            names = self._resolve(node.get("propertyNames", {}))
            wanted = max(node.get("minProperties", 0), self.rng.randint(0, 3))
            for _ in range(wanted):
                if "enum" in names:
                    key = str(self.rng.choice(names["enum"]))
                elif "pattern" in names:
                    key = _sample_regex(names["pattern"], self.rng)
                else:
                    key = self.rng.choice(["a", "layer_0", "x-y", "ünï", "0", "k" * 40])
                out[key] = self._value(extra, depth + 1)
        return out

    def _array(self, node: dict[str, Any], depth: int) -> list[Any]:
        low = node.get("minItems", 0)
        high = node.get("maxItems", low + 4)
        if depth >= self.max_depth:
            high = low
        count = self.rng.randint(low, max(low, min(high, low + 4)))
        items = node.get("items", {})
        return [self._value(items, depth + 1) for _ in range(count)]

    def _string(self, node: dict[str, Any]) -> str:
        if "pattern" in node:
            return _sample_regex(node["pattern"], self.rng)
        low = node.get("minLength", 0)
        high = min(node.get("maxLength", low + 12), low + 12)
        alphabet = "abcdefxyz0129_-./ üé中"
        return "".join(self.rng.choice(alphabet) for _ in range(self.rng.randint(low, max(low, high))))

    def _number(self, node: dict[str, Any], integer: bool) -> int | float:
        low = node.get("minimum", node.get("exclusiveMinimum"))
        high = node.get("maximum", node.get("exclusiveMaximum"))
        candidates: list[float] = [0, 1, -1, 2, 7, 0.5, 1e-9, 123456, 2**53, -(2**31), 1e300]
        if low is not None:
            candidates += [low, low + 1, low + 0.25]
        if high is not None:
            candidates += [high, high - 1, high - 0.25]
        if low is not None and high is not None:
            candidates += [self.rng.uniform(float(low), float(high)) for _ in range(3)]
        value = self.rng.choice(candidates)
        if low is not None:
            value = max(value, low)
        if high is not None:
            value = min(value, high)
        if "exclusiveMinimum" in node and value <= node["exclusiveMinimum"]:
            value = node["exclusiveMinimum"] + 1
        if "exclusiveMaximum" in node and value >= node["exclusiveMaximum"]:
            value = node["exclusiveMaximum"] - (1 if integer else 1e-6)
        if integer:
            return int(value)
        return float(value)


def load_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of a document kind, from the repository's spec folder."""
    path = REPO / "spec" / "v1" / "schemas" / f"{kind}.schema.json"
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def sample_document(kind: str, rng: random.Random) -> dict[str, Any]:
    """A document of ``kind`` drawn from its schema (spec version and kind set)."""
    document = SchemaSampler(load_schema(kind), rng).sample()
    if not isinstance(document, dict):  # pragma: no cover - every kind's schema is an object
        document = {}
    if document.get("spec_version") not in ("1.0", "1.1", "1.2"):  # the drawn version decides the branch
        document["spec_version"] = "1.2"
    if '"joint_sites"' in json.dumps(document):  # a 1.2 property: the document is 1.2
        document["spec_version"] = "1.2"
    document["kind"] = kind
    return document


# --- the corpus: conformance cases and examples -----------------------------------------------


@dataclass
class Seed:
    """One folder to mutate: its main document and the other files beside it."""

    name: str
    folder: Path  # inside the scratch copy
    document: str
    original: bytes
    parsed: Any  # the document's JSON value, or None when it does not parse
    sidecars: list[str]


def discover_seed_folders() -> list[tuple[str, Path, str]]:
    """(name, source folder, document file name) for every conformance case and example."""
    found = []
    for expected in sorted(CONFORMANCE.glob("*/*/*/expected.json")):
        meta = json.loads(expected.read_text(encoding="utf-8"))
        relative = expected.parent.relative_to(CONFORMANCE).as_posix()
        found.append((f"conformance/{relative}", expected.parent, meta.get("document", "document.json")))
    for name in EXAMPLE_FOLDERS:
        found.append((f"examples/{name}", EXAMPLES / name, "report.json"))
    return found


class Corpus:
    """A scratch copy of the seeds (the repository's files are never written)."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.seeds: list[Seed] = []
        outside = scratch / "outside.json"
        outside.write_text('{"spec_version": "1.0", "kind": "causal_model"}\n', encoding="utf-8")
        for name, source, document in discover_seed_folders():
            target = scratch / "corpus" / name
            shutil.copytree(source, target, symlinks=True)
            raw = (target / document).read_bytes()
            try:
                parsed = json.loads(raw)
            except (ValueError, RecursionError):
                parsed = None
            sidecars = sorted(
                p.relative_to(target).as_posix()
                for p in target.rglob("*")
                if p.is_file() and not p.is_symlink() and p.name not in (document, "expected.json")
            )
            self._plant_links(target)
            self.seeds.append(Seed(name, target, document, raw, parsed, sidecars))
        self.scratch_documents: dict[str, Path] = {}
        for kind in DOCUMENT_KINDS:
            folder = scratch / "sampled" / kind
            folder.mkdir(parents=True)
            self.scratch_documents[kind] = folder / "document.json"

    def _plant_links(self, folder: Path) -> None:
        # Links a hostile document can name: out of the folder, to the system, in a loop.
        links = {
            "zz-escape.json": os.path.relpath(self.scratch / "outside.json", folder),
            "zz-root": "/",
            "zz-loop-a.json": "zz-loop-b.json",
            "zz-loop-b.json": "zz-loop-a.json",
        }
        for name, target in links.items():
            link = folder / name
            if not link.exists() and not link.is_symlink():
                os.symlink(target, link)

    def files(self) -> Iterator[Path]:
        """Every regular file of the scratch copy (for the inputs-unchanged checks)."""
        for path in sorted(self.scratch.rglob("*")):
            if path.is_file() and not path.is_symlink():
                yield path


# --- mutations -----------------------------------------------------------------------------------

HOSTILE_TOKENS: tuple[bytes, ...] = (
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b'"',
    b"\\",
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e400",
    b"-1e999",
    b'"\\ud800"',
    b'"\\udc00\\ud800"',
    b'"\\ud83d\\ude00"',
    b"\x00",
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\xef\xbb\xbf",
    b"null",
    b"true",
    b"-0",
    b"9" * 4400,
    b"9" * 300,
    b'"\\u0000"',
    b"[" * 70,
    b"{" * 70,
    b'"' + b"x" * 5000 + b'"',
    b"\t\r\n ",
    b"/* comment */",
    b"'single'",
)

HOSTILE_VALUES: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    -1,
    1,
    0.5,
    -0.0,
    1e308,
    -1e308,
    5e-324,
    2**53 + 1,
    2**63,
    2**64,
    -(2**63) - 1,
    10**30,
    10**300,
    10**4000,
    "",
    "x",
    "\u0000",
    "ünïcødé 中文 😀",
    "x" * 10_000,
    "../../etc/passwd",
    [],
    {},
    [0] * 1000,
    [[[[[]]]]],
    {"": {"": {"": None}}},
    {"extensions": {"a": 1}},
)

HOSTILE_PATHS: tuple[str, ...] = (
    "../outside.json",
    "../../../../../../etc/passwd",
    "/etc/passwd",
    "/",
    "C:/Windows/win.ini",
    "c:relative",
    "sub\\file.json",
    "a/../../b.json",
    "./",
    ".",
    "zz-escape.json",
    "zz-root/etc/hostname",
    "zz-loop-a.json",
    "zz-root",
    "a" * 300 + ".json",
    "/".join(["d"] * 200) + ".json",
    "nonexistent/deep/file.safetensors",
    "expected.json",
    "document.json",
    "x.json\x00.npy",
)


@dataclass
class FuzzInput:
    """One input: the folder, the document's bytes, and replaced sidecar bytes (restored after)."""

    seed: int
    description: str
    folder: Path
    document: str
    raw: bytes
    sidecars: dict[str, bytes] = field(default_factory=dict)


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    stack: list[tuple[tuple[Any, ...], Any]] = [(path, value)]
    while stack:
        here, node = stack.pop()
        yield here, node
        if isinstance(node, dict):
            stack.extend(((*here, k), v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend(((*here, i), v) for i, v in enumerate(node))


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for token in path:
        value = value[token]
    return value


def _set(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    _get(value, path[:-1])[path[-1]] = new
    return value


def _dump(value: Any, duplicate: tuple[Any, ...] | None = None, here: tuple[Any, ...] = ()) -> str:
    """JSON text; the object at ``duplicate`` repeats its first key (json.dumps cannot)."""
    if isinstance(value, dict):
        members = [f"{json.dumps(k)}: {_dump(v, duplicate, (*here, k))}" for k, v in value.items()]
        if here == duplicate and value:
            first = next(iter(value))
            members.append(f"{json.dumps(first)}: {json.dumps(HOSTILE_VALUES[4])}")
        return "{" + ", ".join(members) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_dump(v, duplicate, (*here, i)) for i, v in enumerate(value)) + "]"
    return json.dumps(value)


def _byte_mutation(raw: bytes, rng: random.Random) -> tuple[bytes, str]:
    data = bytearray(raw)
    choice = rng.randrange(8)
    if not data:
        return rng.choice(HOSTILE_TOKENS), "empty file plus a token"
    at = rng.randrange(len(data))
    if choice == 0:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data), "random bytes overwritten"
    if choice == 1:
        data[at] ^= 1 << rng.randrange(8)
        return bytes(data), "one bit flipped"
    if choice == 2:
        return bytes(data[:at]), f"truncated at byte {at}"
    if choice == 3:
        end = min(len(data), at + rng.randint(1, 200))
        return bytes(data[:at] + data[end:]), "a slice deleted"
    if choice == 4:
        end = min(len(data), at + rng.randint(1, 200))
        return bytes(data[:end] + data[at:end] + data[end:]), "a slice duplicated"
    if choice == 5:
        token = rng.choice(HOSTILE_TOKENS)
        return bytes(data[:at] + token + data[at:]), f"token {token[:12]!r} inserted"
    if choice == 6:
        return b"\xef\xbb\xbf" + bytes(data), "byte-order mark prepended"
    numbers = list(re.finditer(rb"-?\d+(\.\d+)?([eE][+-]?\d+)?", raw))
    if not numbers:
        return bytes(data), "unchanged (no number to replace)"
    match = rng.choice(numbers)
    huge = rng.choice([b"1e400", b"-1e400", b"9" * 4400, b"1" + b"0" * 310, b"1e-400", b"-0", b"NaN"])
    return raw[: match.start()] + huge + raw[match.end() :], f"number replaced by {huge[:10]!r}"


def _tree_mutation(value: Any, rng: random.Random, donors: list[Any]) -> tuple[str, str]:
    value = copy.deepcopy(value)
    nodes = list(_nodes(value))
    path, node = rng.choice(nodes)
    choice = rng.randrange(8)
    if choice == 0:
        objects = [(p, n) for p, n in nodes if isinstance(n, dict) and n]
        if objects:
            where, obj = rng.choice(objects)
            del obj[rng.choice(list(obj))]
            return json.dumps(value), f"key deleted at {list(where)}"
    if choice == 1:
        objects = [p for p, n in nodes if isinstance(n, dict) and n]
        if objects:
            where = rng.choice(objects)
            return _dump(value, duplicate=where), f"key duplicated at {list(where)}"
    if choice == 2:
        new = copy.deepcopy(rng.choice(HOSTILE_VALUES))
        return json.dumps(_set(value, path, new)), f"value at {list(path)} swapped for {type(new).__name__}"
    if choice == 3:
        depth = rng.choice([2, 30, 62, 63, 64, 65, 200, 5000, 100_000])
        text = json.dumps(_set(value, path, "\x01MARK\x01"))
        nested = "[" * depth + json.dumps(node) + "]" * depth
        return text.replace('"\\u0001MARK\\u0001"', nested, 1), f"value at {list(path)} nested {depth} deep"
    if choice == 4:
        numbers = [(p, n) for p, n in nodes if isinstance(n, (int, float)) and not isinstance(n, bool)]
        if numbers:
            where, _ = rng.choice(numbers)
            huge = rng.choice([10**4000, -(10**300), 2**64, 1e308, -1e308, 5e-324, 10**19])
            return json.dumps(_set(value, where, huge)), f"number at {list(where)} made extreme"
    if choice == 5:
        strings = [p for p, n in nodes if isinstance(n, str) and p and p[-1] in ("path", "artifact", "id")]
        if strings:
            where = rng.choice(strings)
            hostile = rng.choice(HOSTILE_PATHS)
            return json.dumps(_set(value, where, hostile)), f"path at {list(where)} set to {hostile[:30]!r}"
    if choice == 6 and donors:
        donor = rng.choice(donors)
        _, grafted = rng.choice(list(_nodes(donor)))
        return json.dumps(_set(value, path, copy.deepcopy(grafted))), f"subtree grafted at {list(path)}"
    if choice == 7 and len(nodes) > 2:
        (p1, n1), (p2, n2) = rng.sample(nodes[1:], 2)
        try:
            _set(value, p1, copy.deepcopy(n2))
            _set(value, p2, copy.deepcopy(n1))
        except (KeyError, IndexError, TypeError):
            pass  # one path lay inside the other
        return json.dumps(value), f"subtrees {list(p1)} and {list(p2)} swapped"
    new = copy.deepcopy(rng.choice(HOSTILE_VALUES))
    return json.dumps(_set(value, path, new)), f"value at {list(path)} replaced"


def _sidecar_mutation(raw: bytes, name: str, rng: random.Random) -> tuple[bytes, str]:
    choice = rng.randrange(6)
    if name.endswith(".safetensors") and choice < 3 and len(raw) >= 8:
        (length,) = struct.unpack("<Q", raw[:8])
        if choice == 0:
            claimed = rng.choice([2**63, 2**40, len(raw), len(raw) - 7, 100 * 1024 * 1024 + 1, 0])
            return struct.pack("<Q", claimed) + raw[8:], f"safetensors header length set to {claimed}"
        headers = [
            b'{"t": {"dtype": "F32", "shape": [1000000000000], "data_offsets": [0, 4000000000000]}}',
            b'{"t": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}',
            b'{"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}',
            b'{"t": {"dtype": "F32", "shape": [true], "data_offsets": [0, 4]}}',
            b'{"t": {"dtype": "F32", "shape": [1], "data_offsets": {"a": 0, "b": 4}}}',
            b'{"t": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}',
            b'{"t": {"dtype": "PICKLE", "shape": [1], "data_offsets": [0, 4]}}',
            b'{"t": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            b'{"t": "x"}',
            b"[]",
            b"\xff\xfe",
            b'{"__metadata__": {"a": "b"}}',
        ]
        header = rng.choice(headers)
        if choice == 2:
            header = raw[8 : 8 + length][: rng.randrange(max(1, length))]
        body = header + b" " * (-len(header) % 8)
        return struct.pack("<Q", len(body)) + body + raw[8 + length :], "safetensors header replaced"
    if name.endswith(".npy") and choice < 3:
        texts = [
            "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
            "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': ('1',), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (10**100,), }",
            "{'descr': ['<f4'], 'fortran_order': False, 'shape': (1,), }",
            "__import__('os').system('touch MARKER')",
            "(" * 5000 + ")" * 5000,
            "-" * 100_000 + "1",
            "{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }",
        ]
        npy_header = rng.choice(texts).encode("latin1")
        if len(npy_header) < 60_000:  # version 1: a 2-byte header length
            npy_header += b" " * (-(len(npy_header) + 11) % 64) + b"\n"
            prelude = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(npy_header))
        else:  # version 2: a 4-byte header length
            npy_header += b" " * (-(len(npy_header) + 13) % 64) + b"\n"
            prelude = b"\x93NUMPY\x02\x00" + struct.pack("<I", len(npy_header))
        return prelude + npy_header + raw[128:], "npy header replaced"
    if name.endswith((".jsonl", ".ndjson")) and choice < 3:
        lines = [b"[" * 100_000 + b"]" * 100_000, b"NaN", b"[1, 2]", b"\xff\xfe", b'{"a": 1', b"{}" * 3]
        return raw + rng.choice(lines) + b"\n", "JSON Lines row appended"
    mutated, what = _byte_mutation(raw, rng)
    return mutated, f"sidecar {what}"


def _update_artifact(document: Any, name: str, data: bytes) -> Any:
    """The document with the artifact entry naming ``name`` re-pinned to ``data``."""
    if isinstance(document, dict) and isinstance(document.get("artifacts"), list):
        for artifact in document["artifacts"]:
            if isinstance(artifact, dict) and artifact.get("path") == name:
                artifact["bytes"] = len(data)
                artifact["sha256"] = hashlib.sha256(data).hexdigest()
    return document


def make_input(corpus: Corpus, seed: int) -> FuzzInput:
    """The input numbered ``seed`` (a pure function of the seed and the corpus)."""
    rng = random.Random(seed)
    family = rng.random()
    if family < 0.15:
        kind = rng.choice(DOCUMENT_KINDS)
        document = sample_document(kind, rng)
        if rng.random() < 0.5:
            text, what = _tree_mutation(document, rng, [])
        else:
            text, what = json.dumps(document), "drawn from the schema"
        path = corpus.scratch_documents[kind]
        return FuzzInput(
            seed, f"{kind}: {what}", path.parent, path.name, text.encode("utf-8", "surrogatepass")
        )
    target = corpus.seeds[rng.randrange(len(corpus.seeds))]
    base = FuzzInput(seed, target.name, target.folder, target.document, target.original)
    if family < 0.4 or target.parsed is None:
        base.raw, what = _byte_mutation(target.original, rng)
    elif family < 0.8 or not target.sidecars:
        donors = [s.parsed for s in rng.sample(corpus.seeds, 3) if s.parsed is not None]
        text, what = _tree_mutation(target.parsed, rng, donors)
        base.raw = text.encode("utf-8", "surrogatepass")
    else:
        name = rng.choice(target.sidecars)
        original = (target.folder / name).read_bytes()
        mutated, what = _sidecar_mutation(original, name, rng)
        base.sidecars[name] = mutated
        if rng.random() < 0.5:
            document = _update_artifact(copy.deepcopy(target.parsed), name, mutated)
            base.raw = json.dumps(document).encode("utf-8")
            what += " (size and hash re-pinned)"
        what = f"{name}: {what}"
    base.description = f"{base.description}: {what}"
    return base


# --- running and checking ------------------------------------------------------------------------


class InputTimeoutError(Exception):
    """An input took longer than the per-input time limit."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`InputTimeoutError` in the main thread after ``seconds`` (SIGALRM)."""

    def expire(signum: int, frame: Any) -> None:
        raise InputTimeoutError(f"over {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Outcome:
    seed: int
    description: str
    seconds: float
    valid: bool | None = None
    codes: tuple[str, ...] = ()
    problems: list[str] = field(default_factory=list)


def check_outcome(result: Any, catalogue: Any, *, recompute: bool = False) -> list[str]:
    """What must hold for every verification result; the violations.

    With ``recompute`` off the recompute stage is never passed; with it on, a passed
    recompute stage has compared at least one claim and every comparison is within its
    tolerance.
    """
    from mibspec.validator import Severity, StageStatus
    from mibspec.verification.output_formats import REPORTERS

    problems: list[str] = []
    for doc in result.documents:
        for finding in doc.findings:
            if finding.code not in catalogue.by_code:
                problems.append(f"{doc.path}: code {finding.code} is not in the catalogue")
            if finding.line is None or finding.column is None or finding.line < 1 or finding.column < 1:
                problems.append(f"{doc.path}: {finding.code} at {finding.pointer!r} is not located")
        errors = [f for f in doc.findings if f.severity is Severity.ERROR]
        if not doc.valid and not errors:
            problems.append(f"{doc.path}: rejected without an error finding")
        if doc.valid and errors:
            problems.append(f"{doc.path}: conformant with error findings")
        for finding in errors:
            info = catalogue.by_code.get(finding.code)
            if info is not None and info.stage in {s.value for s in doc.stages}:
                status = next(st for s, (st, _) in doc.stages.items() if s.value == info.stage)
                if status is not StageStatus.FAILED:
                    problems.append(
                        f"{doc.path}: error {finding.code} but stage {info.stage} is {status.value}"
                    )
        stopped = False
        for stage, (status, _) in doc.stages.items():
            if stopped and status is StageStatus.PASSED:
                problems.append(f"{doc.path}: stage {stage.value} passed after an earlier stage did not")
            if status is StageStatus.FAILED:
                stage_errors = [
                    f
                    for f in errors
                    if f.code in catalogue.by_code and catalogue.by_code[f.code].stage == stage.value
                ]
                if not stage_errors:
                    problems.append(f"{doc.path}: stage {stage.value} failed without a finding of that stage")
            if status is not StageStatus.PASSED:
                stopped = True
        last = doc.stages[list(doc.stages)[-1]][0]
        if last is StageStatus.PASSED and not recompute:
            problems.append(f"{doc.path}: recompute passed although it was switched off")
        compared = bool(doc.comparisons) and all(c.within for c in doc.comparisons)
        if last is StageStatus.PASSED and recompute and not compared:
            problems.append(f"{doc.path}: recompute passed without every comparison within tolerance")
    for name in ("json", "text"):
        buffer = io.StringIO()
        REPORTERS[name](result, buffer)
        text = buffer.getvalue()
        try:
            encoded = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            problems.append(f"{name} output cannot be written as UTF-8: {exc}")
            continue
        if name == "json" and json.loads(encoded)["valid"] is not result.valid:
            problems.append("the JSON output's verdict differs from the result's")
    return problems


class Fuzzer:
    """Runs inputs through the full validation path and collects outcomes."""

    def __init__(self, scratch: Path, *, seconds_per_input: float = 10.0) -> None:
        from mibspec.validator import catalogue

        self.corpus = Corpus(scratch)
        self.catalogue = catalogue("1.0")
        self.seconds_per_input = seconds_per_input

    def run(self, item: FuzzInput) -> Outcome:
        from mibspec.verification.api import verify

        saved: dict[str, bytes] = {}
        document = item.folder / item.document
        saved_document = document.read_bytes() if document.exists() else None
        for name, data in item.sidecars.items():
            saved[name] = (item.folder / name).read_bytes()
            (item.folder / name).write_bytes(data)
        document.write_bytes(item.raw)
        outcome = Outcome(item.seed, item.description, 0.0)
        start = time.perf_counter()
        try:
            with time_limit(self.seconds_per_input):
                result = verify(document, recompute=False)
                outcome.problems.extend(check_outcome(result, self.catalogue))
            outcome.valid = result.valid
            outcome.codes = tuple(sorted({f.code for f in result.findings}))
        except InputTimeoutError as exc:
            outcome.problems.append(f"hang: {exc}")
        except Exception as exc:
            outcome.problems.append(f"uncaught {type(exc).__name__}: {exc}"[:2000])
        finally:
            outcome.seconds = time.perf_counter() - start
            if saved_document is not None:
                document.write_bytes(saved_document)
            for name, data in saved.items():
                (item.folder / name).write_bytes(data)
        return outcome

    def run_seeds(self, seeds: range, report: Callable[[Outcome], None] | None = None) -> Iterator[Outcome]:
        for seed in seeds:
            outcome = self.run(make_input(self.corpus, seed))
            if report is not None:
                report(outcome)
            yield outcome
