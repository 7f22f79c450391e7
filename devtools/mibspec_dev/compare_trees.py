"""Compare generated folders across machines: equal bytes, or equal within a float tolerance.

The generators (examples, conformance cases, producers) give byte-identical output on the
same machine and library versions. Another machine may round a float differently in its
last bits (a different BLAS, a different libm), which changes a JSON number, a tensor
element and every SHA-256 that pins them. These functions say whether two folders or two
JSON values agree within a stated tolerance, naming each place where they do not.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_ABS", "DEFAULT_REL", "compare_trees", "compare_values"]

#: Relative and absolute tolerance of a cross-machine comparison: float64 arithmetic whose
#: order or fused operations differ between machines moves a result by a few units in the
#: last place (about 1e-16 relative), a chain of them by more; 1e-9 leaves room for that
#: and still separates every value the generators write on purpose.
DEFAULT_REL = 1e-9
DEFAULT_ABS = 1e-12

#: Keys whose values pin other files' bytes: the files are compared themselves instead.
_HASH_KEYS = frozenset({"sha256"})


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _close(a: float, b: float, rel: float, abs_: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= abs_ + rel * max(abs(a), abs(b))


def compare_values(
    want: Any, have: Any, *, rel: float = DEFAULT_REL, abs_: float = DEFAULT_ABS, pointer: str = ""
) -> list[str]:
    """JSON pointers where two JSON values differ beyond the tolerance (empty when they agree).

    Floats are compared within ``abs_ + rel·max(|a|, |b|)``; integers, strings, booleans and
    the shape of objects and arrays must match exactly. Values under a ``sha256`` key are not
    compared: the file they pin is compared on its own.
    """
    if _is_number(want) and _is_number(have) and (isinstance(want, float) or isinstance(have, float)):
        return [] if _close(float(want), float(have), rel, abs_) else [pointer or "/"]
    if isinstance(want, dict) and isinstance(have, dict):
        if list(want) != list(have):
            return [pointer or "/"]
        out: list[str] = []
        for key, value in want.items():
            if key in _HASH_KEYS:
                continue
            escaped = str(key).replace("~", "~0").replace("/", "~1")
            out += compare_values(value, have[key], rel=rel, abs_=abs_, pointer=f"{pointer}/{escaped}")
        return out
    if isinstance(want, list) and isinstance(have, list):
        if len(want) != len(have):
            return [pointer or "/"]
        out = []
        for index, (a, b) in enumerate(zip(want, have, strict=True)):
            out += compare_values(a, b, rel=rel, abs_=abs_, pointer=f"{pointer}/{index}")
        return out
    return [] if type(want) is type(have) and want == have else [pointer or "/"]


def _json_close(want: bytes, have: bytes, rel: float, abs_: float) -> bool:
    try:
        return not compare_values(json.loads(want), json.loads(have), rel=rel, abs_=abs_)
    except (ValueError, UnicodeDecodeError):
        return False


def _jsonl_close(want: bytes, have: bytes, rel: float, abs_: float) -> bool:
    a, b = want.splitlines(), have.splitlines()
    return len(a) == len(b) and all(_json_close(x, y, rel, abs_) for x, y in zip(a, b, strict=True))


def _tensors_close(want: Path, have: Path, media_type: str, rel: float, abs_: float) -> bool:
    import numpy as np

    from mibspec.core.sidecars import SidecarError, load_tensor, tensor_infos

    try:
        infos_a, infos_b = tensor_infos(want, media_type), tensor_infos(have, media_type)
        if list(infos_a) != list(infos_b):
            return False
        for name, info in infos_a.items():
            other = infos_b[name]
            if (info.dtype, tuple(info.shape)) != (other.dtype, tuple(other.shape)):
                return False
            a, b = np.asarray(load_tensor(want, info)), np.asarray(load_tensor(have, other))
            if a.dtype.kind in "fc":
                if not np.allclose(a, b, rtol=rel, atol=abs_, equal_nan=True):
                    return False
            elif not np.array_equal(a, b):
                return False
    except (SidecarError, OSError, ValueError):
        return False
    return True


_TENSOR_TYPES = {".safetensors": "application/x-safetensors", ".npy": "application/x-npy"}


def _files_close(want: Path, have: Path, rel: float, abs_: float) -> bool:
    a, b = want.read_bytes(), have.read_bytes()
    if a == b:
        return True
    suffix = want.suffix.lower()
    if suffix == ".json":
        return _json_close(a, b, rel, abs_)
    if suffix == ".jsonl":
        return _jsonl_close(a, b, rel, abs_)
    if suffix in _TENSOR_TYPES:
        return _tensors_close(want, have, _TENSOR_TYPES[suffix], rel, abs_)
    return False


def _entries(root: Path) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_file():
                out[rel] = ("file", "")
    return out


def compare_trees(
    want: Path, have: Path, *, rel: float = DEFAULT_REL, abs_: float = DEFAULT_ABS, exact: bool = False
) -> list[str]:
    """Relative paths under two folders that differ: missing on one side, a different link
    target, or file contents that are neither equal bytes nor (unless ``exact``) equal within
    the tolerance (JSON and JSON Lines value by value, ``.safetensors`` and ``.npy`` tensor by
    tensor). Other file types must be byte-identical."""
    a, b = _entries(want), _entries(have)
    differ = []
    for rel_path in sorted(set(a) | set(b)):
        if a.get(rel_path) != b.get(rel_path):
            differ.append(rel_path)
        elif a[rel_path][0] == "file":
            x, y = want / rel_path, have / rel_path
            same = x.read_bytes() == y.read_bytes() if exact else _files_close(x, y, rel, abs_)
            if not same:
                differ.append(rel_path)
    return differ
