"""Reading sidecar headers (safetensors, .npy) without a tensor library.

Only headers are parsed here, with hard size limits, so a hostile file cannot make
the validator allocate or execute anything. Loading the data itself is done with
numpy (``.npy``, ``allow_pickle=False``) or the safetensors library when needed.
"""

from __future__ import annotations

import ast
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_TENSOR_BYTES",
    "MAX_TENSOR_DIMS",
    "MAX_TENSOR_ELEMENTS",
    "SidecarError",
    "TensorInfo",
    "load_tensor",
    "non_finite_values",
    "read_npy_header",
    "read_safetensors",
    "read_safetensors_header",
    "safetensors_bytes",
    "safetensors_layout",
    "shape_problem",
    "tensor_infos",
    "write_safetensors",
]

#: Largest safetensors header read (the 8-byte length is checked before reading). The
#: format allows 100,000,000 bytes; a file of tens of thousands of tensors needs about 2 MiB.
MAX_SAFETENSORS_HEADER_BYTES = 16 * 1024 * 1024
#: Most characters ``[ { , : "`` in a safetensors header, counted on the raw bytes before
#: it is parsed: every object the parser makes starts at one, so this bounds its memory
#: (about 100 bytes each at most). A tensor's entry holds about 25.
MAX_SAFETENSORS_HEADER_TOKENS = 1_000_000
#: Largest ``.npy`` header read (numpy's own default ``max_header_size``).
MAX_NPY_HEADER_BYTES = 10_000
#: Most dimensions of a tensor (numpy 1.x's maximum; numpy 2 allows 64).
MAX_TENSOR_DIMS = 32
#: Most elements of a tensor: the product of its dimensions, a dimension of 0 counted as 1
#: (numpy sizes a shape so, even when it holds no element). Bounds every dimension too.
MAX_TENSOR_ELEMENTS = 2**36
#: Most bytes of a tensor: elements (counted as above) times the dtype's item size.
MAX_TENSOR_BYTES = 2**38

#: safetensors dtype names → the spec's dtype names.
_SAFETENSORS_DTYPES = {
    "BOOL": "bool",
    "U8": "uint8",
    "I32": "int32",
    "I64": "int64",
    "F16": "float16",
    "BF16": "bfloat16",
    "F32": "float32",
    "F64": "float64",
}
_SAFETENSORS_ITEMSIZE = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}
#: numpy dtype strings (little-endian or byte-order-free) → the spec's dtype names.
_NPY_DTYPES = {
    "|b1": "bool",
    "|u1": "uint8",
    "<i4": "int32",
    "<i8": "int64",
    "<f2": "float16",
    "<f4": "float32",
    "<f8": "float64",
}


class SidecarError(ValueError):
    """The file is not a well-formed sidecar of its declared type."""


@dataclass(frozen=True)
class TensorInfo:
    name: str | None
    dtype: str
    shape: tuple[int, ...]
    data_offset: int
    nbytes: int


def _dims(shape: tuple[Any, ...]) -> bool:
    """Whether every dimension is a non-negative integer (not a bool, a float or a string)."""
    return all(type(dim) is int and dim >= 0 for dim in shape)


#: Item sizes of the spec's dtype names.
ITEMSIZE = {
    "bool": 1,
    "uint8": 1,
    "int32": 4,
    "int64": 8,
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
}


def shape_problem(shape: Sequence[int], itemsize: int) -> str | None:
    """Why a tensor of this shape is over the tensor limits, or None when it is within them.

    Only integers are multiplied, and the product stops as soon as it passes the limit, so
    any shape (10**20, or a million dimensions) is judged in bounded time and memory.

    >>> shape_problem([3, 4], 4) is None
    True
    >>> shape_problem([0, 10**20], 1)
    'dimension 1 is 100000000000000000000, over the limit of 68719476736 elements'
    """
    if len(shape) > MAX_TENSOR_DIMS:
        return f"{len(shape)} dimensions, over the limit of {MAX_TENSOR_DIMS}"
    elements = 1
    for axis, dim in enumerate(shape):
        if dim > MAX_TENSOR_ELEMENTS:
            return f"dimension {axis} is {dim}, over the limit of {MAX_TENSOR_ELEMENTS} elements"
        elements *= max(dim, 1)
        if elements > MAX_TENSOR_ELEMENTS:
            return (
                f"shape {_short(list(shape))} has over {MAX_TENSOR_ELEMENTS} elements "
                "(dimensions of 0 counted as 1), the limit"
            )
    if elements * itemsize > MAX_TENSOR_BYTES:
        return (
            f"shape {_short(list(shape))} takes {elements * itemsize} bytes, "
            f"over the limit of {MAX_TENSOR_BYTES}"
        )
    return None


def _short(value: Any, width: int = 80) -> str:
    """``repr(value)``, cut to ``width`` characters (names and shapes from hostile headers)."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


_TOKEN_BYTES = (b"[", b"{", b",", b":", b'"')


def _header_tokens(raw: bytes) -> int:
    """How many of the characters ``[ { , : "`` ``raw`` holds (inside strings too).

    Every value and key the JSON parser makes starts at one of them (a string at its
    quote; a number, literal or container after a bracket, comma or colon), so the parser
    makes at most this many objects. ``bytes.count`` runs at C speed and copies nothing.
    """
    return sum(raw.count(token) for token in _TOKEN_BYTES)


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members as a dict; a repeated key is refused (which one would count?)."""
    members: dict[str, Any] = {}
    for key, value in pairs:
        if key in members:
            raise SidecarError(f"header repeats the key {_short(key)}")
        members[key] = value
    return members


def _no_constant(name: str) -> Any:
    raise SidecarError(f"header holds {name}, which is not JSON")


def read_safetensors_header(path: Path) -> dict[str, TensorInfo]:
    """Tensor names, dtypes, shapes and byte ranges of a safetensors file (see
    :func:`read_safetensors`)."""
    return read_safetensors(path)[0]


def read_safetensors(path: Path) -> tuple[dict[str, TensorInfo], dict[str, str]]:
    """Tensor names, dtypes, shapes and byte ranges of a safetensors file, and its
    ``__metadata__``.

    Checked as the format requires (and its reference implementation checks): the tensors'
    byte ranges, in order of their offsets, start at 0, follow one another without a gap or
    an overlap, and end exactly at the end of the file; each range holds its shape and
    dtype; ``__metadata__`` maps strings to strings. Bounded before the header is parsed:
    its length (``MAX_SAFETENSORS_HEADER_BYTES``) and the characters that start a JSON
    token (``MAX_SAFETENSORS_HEADER_TOKENS``); then every shape by the tensor limits.
    """
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(8)
        length = _header_length(head, size)
        raw = handle.read(length)
    return _parse_safetensors_header(raw, length, size)


def safetensors_layout(data: bytes | bytearray | memoryview) -> tuple[dict[str, TensorInfo], dict[str, str]]:
    """:func:`read_safetensors` of a file's bytes already in memory (checked alike)."""
    size = len(data)
    length = _header_length(bytes(data[:8]), size)
    return _parse_safetensors_header(bytes(data[8 : 8 + length]), length, size)


def _header_length(head: bytes, size: int) -> int:
    if len(head) < 8:
        raise SidecarError("truncated: no safetensors header length")
    (length,) = struct.unpack("<Q", head)
    if 8 + length > size:
        raise SidecarError(f"header length {length} does not fit in a {size}-byte file")
    if length > MAX_SAFETENSORS_HEADER_BYTES:
        raise SidecarError(
            f"header length {length} is over the limit of {MAX_SAFETENSORS_HEADER_BYTES} bytes"
        )
    return int(length)


def _parse_safetensors_header(
    raw: bytes, length: int, size: int
) -> tuple[dict[str, TensorInfo], dict[str, str]]:
    """The header ``raw`` (``length`` bytes) of a ``size``-byte safetensors file, checked."""
    if _header_tokens(raw) > MAX_SAFETENSORS_HEADER_TOKENS:
        raise SidecarError(
            f'header holds more than {MAX_SAFETENSORS_HEADER_TOKENS} of the characters [ {{ , : " '
            "(the limit); not parsed"
        )
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique, parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SidecarError(f"header is not valid JSON: {exc}") from exc
    except RecursionError:  # nesting deeper than the interpreter allows; no header nests at all
        raise SidecarError("header is not valid JSON: nested too deeply") from None
    del raw
    if not isinstance(header, dict):
        raise SidecarError("header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (
        isinstance(metadata, dict) and all(isinstance(value, str) for value in metadata.values())
    ):
        raise SidecarError('"__metadata__" is not an object of strings')
    infos: dict[str, TensorInfo] = {}
    data_size = size - 8 - length
    for name, entry in header.items():
        infos[name] = _safetensors_entry(name, entry, data_size, 8 + length)
    # The format's layout: ranges in offset order tile the data exactly (no overlap, no gap,
    # nothing after the last one).
    expected = 0
    for info in sorted(infos.values(), key=lambda i: (i.data_offset, i.data_offset + i.nbytes)):
        start = info.data_offset - 8 - length
        if start < expected:
            raise SidecarError(f"tensor {_short(info.name)}: its bytes overlap another tensor's")
        if start > expected:
            raise SidecarError(
                f"tensor {_short(info.name)}: {start - expected} byte(s) before it belong to no tensor"
            )
        expected = start + info.nbytes
    if expected != data_size:
        raise SidecarError(f"{data_size - expected} byte(s) after the last tensor belong to no tensor")
    return infos, dict(metadata or {})


def _safetensors_entry(name: str, entry: Any, data_size: int, data_start: int) -> TensorInfo:
    """One tensor of a safetensors header, checked against the limits and the data size."""
    if not isinstance(entry, dict):
        raise SidecarError(f"tensor {_short(name)}: malformed header entry")
    try:
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    except KeyError as exc:
        raise SidecarError(f"tensor {_short(name)}: malformed header entry (no {exc})") from None
    if not isinstance(dtype, str) or dtype not in _SAFETENSORS_ITEMSIZE:
        raise SidecarError(f"tensor {_short(name)}: unsupported dtype {_short(dtype)}")
    if not isinstance(shape, list) or not _dims(tuple(shape)):
        raise SidecarError(f"tensor {_short(name)}: bad shape {_short(shape)}")
    problem = shape_problem(shape, _SAFETENSORS_ITEMSIZE[dtype])
    if problem:
        raise SidecarError(f"tensor {_short(name)}: {problem}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and _dims(tuple(offsets))):
        raise SidecarError(f"tensor {_short(name)}: data_offsets {_short(offsets)} are not two sizes")
    start, end = offsets
    if not start <= end <= data_size:
        raise SidecarError(
            f"tensor {_short(name)}: data range [{start}, {end}) outside the file (truncated?)"
        )
    count = 1
    for dim in shape:
        count *= dim
    if end - start != count * _SAFETENSORS_ITEMSIZE[dtype]:
        raise SidecarError(
            f"tensor {_short(name)}: {end - start} bytes do not hold shape {_short(shape)} of {dtype}"
        )
    spec_dtype = _SAFETENSORS_DTYPES.get(dtype, dtype.lower())
    return TensorInfo(name, spec_dtype, tuple(shape), data_start + start, end - start)


#: The keys of an .npy header, all required and no other (the format's definition).
_NPY_KEYS = frozenset({"descr", "fortran_order", "shape"})


def read_npy_header(path: Path) -> TensorInfo:
    """dtype and shape of a version 1–3 ``.npy`` file (object arrays are refused).

    The header is at most ``MAX_NPY_HEADER_BYTES`` long (checked before it is read), and
    its shape is within the tensor limits.
    """
    size = path.stat().st_size
    with path.open("rb") as handle:
        magic = handle.read(8)
        if len(magic) < 8 or magic[:6] != b"\x93NUMPY":
            raise SidecarError("not an .npy file (bad magic)")
        major = magic[6]
        if major == 1:
            field = handle.read(2)
            offset = 10
        elif major in (2, 3):
            field = handle.read(4)
            offset = 12
        else:
            raise SidecarError(f"unsupported .npy version {major}")
        if len(field) < offset - 8:
            raise SidecarError("truncated .npy header")
        (length,) = struct.unpack("<H" if major == 1 else "<I", field)
        if length > MAX_NPY_HEADER_BYTES:
            raise SidecarError(f".npy header of {length} bytes is over the limit of {MAX_NPY_HEADER_BYTES}")
        if offset + length > size:
            raise SidecarError("truncated .npy header")
        text = handle.read(length).decode("latin1")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except (ValueError, SyntaxError) as exc:
        raise SidecarError(f"malformed .npy header: {_short(str(exc))}") from exc
    except (RecursionError, MemoryError):  # nesting deeper than the interpreter's parser allows
        raise SidecarError("malformed .npy header: nested too deeply") from None
    # The format's three keys, each once: a repeated key (the last one wins in Python) or an
    # extra one makes a header that readers may take differently.
    keys = [key.value if isinstance(key, ast.Constant) else None for key in getattr(tree, "keys", ())]
    if not isinstance(tree, ast.Dict) or sorted(map(repr, keys)) != sorted(map(repr, _NPY_KEYS)):
        raise SidecarError(
            f"malformed .npy header: not a dict of exactly the keys {', '.join(sorted(_NPY_KEYS))}, each once"
        )
    try:
        header = ast.literal_eval(tree)  # a dict literal; literal_eval evaluates no code
        descr, fortran, shape = header["descr"], header["fortran_order"], tuple(header["shape"])
    except (ValueError, KeyError, TypeError) as exc:
        raise SidecarError(f"malformed .npy header: {_short(str(exc))}") from exc
    except (RecursionError, MemoryError):
        raise SidecarError("malformed .npy header: nested too deeply") from None
    if not isinstance(fortran, bool):
        raise SidecarError(f"malformed .npy header: fortran_order {_short(fortran)} is not True or False")
    if not _dims(shape):
        raise SidecarError(f"malformed .npy header: shape {_short(shape)} is not a tuple of sizes")
    if not isinstance(descr, str) or descr not in _NPY_DTYPES:
        raise SidecarError(
            f"unsupported .npy dtype {_short(descr)} (object and big-endian arrays are refused)"
        )
    if fortran:
        raise SidecarError("Fortran-ordered .npy arrays are not accepted")
    itemsize = int(descr[2:]) if descr != "|b1" else 1
    problem = shape_problem(shape, itemsize)
    if problem:
        raise SidecarError(problem)
    count = 1
    for dim in shape:
        count *= dim
    data_offset = offset + length
    if size - data_offset != count * itemsize:
        raise SidecarError(
            f"data is {size - data_offset} bytes, shape {_short(list(shape))} needs {count * itemsize}"
        )
    return TensorInfo(None, _NPY_DTYPES[descr], shape, data_offset, count * itemsize)


def tensor_infos(path: Path, media_type: str) -> dict[str | None, TensorInfo]:
    """Header information of a tensor sidecar, keyed by tensor name (``None`` for .npy)."""
    if media_type == "application/x-safetensors":
        found: dict[str | None, TensorInfo] = {}
        found.update(read_safetensors_header(path))
        return found
    if media_type == "application/x-npy":
        return {None: read_npy_header(path)}
    raise SidecarError(f"{media_type} is not a tensor format")


_NUMPY_DTYPES = {
    "bool": "bool",
    "uint8": "uint8",
    "int32": "<i4",
    "int64": "<i8",
    "float16": "<f2",
    "float32": "<f4",
    "float64": "<f8",
}


def load_tensor(path: Path, info: TensorInfo) -> Any:
    """A read-only numpy view of one tensor (memory-mapped: nothing is copied or executed).

    Raises:
        SidecarError: the dtype has no numpy equivalent (bfloat16).
    """
    import numpy as np

    if info.dtype not in _NUMPY_DTYPES:
        raise SidecarError(f"dtype {info.dtype} cannot be read without a tensor library")
    problem = shape_problem(info.shape, ITEMSIZE[info.dtype])
    if problem:  # never hand numpy a shape it cannot hold
        raise SidecarError(problem)
    count = 1
    for dim in info.shape:
        count *= dim
    if count == 0:
        return np.zeros(info.shape, dtype=_NUMPY_DTYPES[info.dtype])
    return np.memmap(
        path, dtype=_NUMPY_DTYPES[info.dtype], mode="r", offset=info.data_offset, shape=info.shape
    )


_FLOAT_BITS = {"float16": ("<u2", 0x7C00), "bfloat16": ("<u2", 0x7F80), "float32": ("<u4", 0x7F800000)}
_FLOAT_BITS["float64"] = ("<u8", 0x7FF0000000000000)
_CHUNK_ELEMENTS = 1 << 22


def non_finite_values(path: Path, info: TensorInfo) -> tuple[int, int] | None:
    """(count, first flat index) of the NaN and infinite elements of a float tensor, or None.

    Reads the raw bits in chunks (a value is not finite when all its exponent bits are
    set), so bfloat16 needs no tensor library and memory stays bounded.
    """
    import numpy as np

    if info.dtype not in _FLOAT_BITS:
        return None
    bits, exponent = _FLOAT_BITS[info.dtype]
    problem = shape_problem(info.shape, ITEMSIZE[info.dtype])
    if problem:
        raise SidecarError(problem)
    count = 1
    for dim in info.shape:
        count *= dim
    if count == 0:
        return None
    raw = np.memmap(path, dtype=bits, mode="r", offset=info.data_offset, shape=(count,))
    mask = np.array(exponent, dtype=bits)
    found, first = 0, -1
    for start in range(0, count, _CHUNK_ELEMENTS):
        bad = np.flatnonzero((raw[start : start + _CHUNK_ELEMENTS] & mask) == mask)
        if bad.size and first < 0:
            first = start + int(bad[0])
        found += int(bad.size)
    del raw
    return (found, first) if found else None


_WRITE_DTYPES = {
    "bool": "BOOL",
    "uint8": "U8",
    "int32": "I32",
    "int64": "I64",
    "float16": "F16",
    "float32": "F32",
    "float64": "F64",
}


def safetensors_bytes(tensors: dict[str, Any], metadata: dict[str, str] | None = None) -> bytes:
    """numpy arrays as a safetensors file (little-endian, C order, tensors in name order).

    The layout is the format's: an 8-byte little-endian header length, a JSON header
    padded with spaces to a multiple of 8, then the tensors' bytes. Equal inputs give
    equal bytes.
    """
    import numpy as np

    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = dict(sorted(metadata.items()))
    chunks: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        dtype = _WRITE_DTYPES.get(str(array.dtype))
        if dtype is None:
            raise ValueError(f"tensors[{name!r}]: dtype {array.dtype} has no safetensors equivalent here")
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": dtype,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + b"".join(chunks)


def write_safetensors(path: Path, tensors: dict[str, Any], metadata: dict[str, str] | None = None) -> None:
    """Write :func:`safetensors_bytes` to ``path``."""
    path.write_bytes(safetensors_bytes(tensors, metadata))
