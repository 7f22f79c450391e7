"""Reading sidecar headers (safetensors, .npy) without a tensor library.

Only headers are parsed here, with hard size limits, so a hostile file cannot make
the validator allocate or execute anything. Loading the data itself is done with
numpy (``.npy``, ``allow_pickle=False``) or the safetensors library when needed.
"""

from __future__ import annotations

import ast
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "SidecarError",
    "TensorInfo",
    "load_tensor",
    "non_finite_values",
    "read_npy_header",
    "read_safetensors_header",
    "safetensors_bytes",
    "tensor_infos",
    "write_safetensors",
]

MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors format's own limit

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


def read_safetensors_header(path: Path) -> dict[str, TensorInfo]:
    """Tensor names, dtypes, shapes and byte ranges of a safetensors file (checked against its size)."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise SidecarError("truncated: no safetensors header length")
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER_BYTES or 8 + length > size:
            raise SidecarError(f"header length {length} does not fit in a {size}-byte file")
        raw = handle.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SidecarError(f"header is not valid JSON: {exc}") from exc
    except RecursionError:  # nesting deeper than the interpreter allows; no header nests at all
        raise SidecarError("header is not valid JSON: nested too deeply") from None
    if not isinstance(header, dict):
        raise SidecarError("header is not a JSON object")
    infos: dict[str, TensorInfo] = {}
    data_size = size - 8 - length
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (start, end) = entry["dtype"], tuple(entry["shape"]), entry["data_offsets"]
        except (KeyError, TypeError, ValueError) as exc:
            raise SidecarError(f"tensor {name!r}: malformed header entry") from exc
        if not isinstance(dtype, str) or dtype not in _SAFETENSORS_ITEMSIZE or not _dims(shape):
            raise SidecarError(f"tensor {name!r}: unsupported dtype {dtype!r} or bad shape {shape!r}")
        count = 1
        for dim in shape:
            count *= dim
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= data_size):
            raise SidecarError(f"tensor {name!r}: data range [{start}, {end}) outside the file (truncated?)")
        if end - start != count * _SAFETENSORS_ITEMSIZE[dtype]:
            raise SidecarError(
                f"tensor {name!r}: {end - start} bytes do not hold shape {list(shape)} of {dtype}"
            )
        infos[name] = TensorInfo(
            name, _SAFETENSORS_DTYPES.get(dtype, dtype.lower()), shape, 8 + length + start, end - start
        )
    return infos


def read_npy_header(path: Path) -> TensorInfo:
    """dtype and shape of a version 1–3 ``.npy`` file (object arrays are refused)."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        magic = handle.read(8)
        if len(magic) < 8 or magic[:6] != b"\x93NUMPY":
            raise SidecarError("not an .npy file (bad magic)")
        major = magic[6]
        if major == 1:
            (length,) = struct.unpack("<H", handle.read(2))
            offset = 10
        elif major in (2, 3):
            (length,) = struct.unpack("<I", handle.read(4))
            offset = 12
        else:
            raise SidecarError(f"unsupported .npy version {major}")
        if length > 1024 * 1024 or offset + length > size:
            raise SidecarError("truncated .npy header")
        text = handle.read(length).decode("latin1")
    try:
        header = ast.literal_eval(text)  # a dict literal; literal_eval evaluates no code
        descr, fortran, shape = header["descr"], header["fortran_order"], tuple(header["shape"])
    except (ValueError, SyntaxError, KeyError, TypeError) as exc:
        raise SidecarError(f"malformed .npy header: {exc}") from exc
    except (RecursionError, MemoryError):  # nesting deeper than the interpreter's parser allows
        raise SidecarError("malformed .npy header: nested too deeply") from None
    if not _dims(shape):
        raise SidecarError(f"malformed .npy header: shape {shape!r} is not a tuple of sizes")
    if not isinstance(descr, str) or descr not in _NPY_DTYPES:
        raise SidecarError(f"unsupported .npy dtype {descr!r} (object and big-endian arrays are refused)")
    if fortran:
        raise SidecarError("Fortran-ordered .npy arrays are not accepted")
    itemsize = int(descr[2:]) if descr != "|b1" else 1
    count = 1
    for dim in shape:
        count *= dim
    data_offset = offset + length
    if size - data_offset != count * itemsize:
        raise SidecarError(
            f"data is {size - data_offset} bytes, shape {list(shape)} needs {count * itemsize}"
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
