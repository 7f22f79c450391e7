"""Reading the ``.pt`` files a submission provides: weights only, bounded, explained.

Every ``.pt`` file an importer reads (EAP-IG graphs, causal-variable featurizers) goes
through :func:`load_pt`:

- files larger than the importer's limit are refused before they are opened;
- ``torch.load(weights_only=True)``: only tensors and plain containers are rebuilt, never a
  callable; a refusal is reported with what the file needed, never with torch's advice to
  load the file without that restriction;
- every tensor is checked before anything converts it: a dense CPU tensor whose shape is
  within the tensor limits of SPEC.md A-8 and whose elements fit in the bytes of its
  storage. torch refuses a storage larger than its record in the file, so storages are
  bounded by the file; a view whose elements share storage (a stride of 0: a few bytes
  in the file that claim gigabytes once copied) is refused here, before it is copied.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from mibspec.core.sidecars import shape_problem

__all__ = ["MAX_PT_BYTES", "PtFileError", "load_pt"]

#: Largest ``.pt`` file read (bytes): a subspace of Llama-3.1-8B's residual stream at half its
#: width takes 32 MiB in float32; an EAP-IG graph of it about 13 MiB.
MAX_PT_BYTES = 1024**3
#: Lines of torch's refusal that advise loading the file without ``weights_only`` (or
#: allowlisting what it needs), which is how a hostile file would run code: never repeated.
_ADVICE = re.compile(
    r"weights.only|re-running|trusted source|trust|safe_globals|documentation|file an issue",
    re.IGNORECASE,
)


class PtFileError(Exception):
    """A ``.pt`` file that is not read: ``kind`` says why, ``detail`` explains it."""

    def __init__(self, kind: Literal["unsafe", "unreadable", "over-limits"], detail: str) -> None:
        super().__init__(detail)
        self.kind, self.detail = kind, detail


def _cause(exc: Exception) -> tuple[bool, str]:
    """Whether torch refused a global (a callable), and its reason without its advice."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    kept = [line for line in lines if not _ADVICE.search(line)]
    text = "; ".join(kept) or type(exc).__name__
    text = text if len(text) <= 300 else text[:299] + "…"
    return any(re.search(r"\bglobal\b", line, re.IGNORECASE) for line in kept), text


def load_pt(path: Path, *, max_bytes: int = MAX_PT_BYTES) -> Any:
    """The plain data and tensors in the ``.pt`` file ``path``, every tensor checked.

    Raises:
        ImportError: torch is not installed.
        PtFileError: ``unsafe`` (the file needs a callable to be rebuilt; nothing in it ran),
            ``unreadable`` (not a ``.pt`` file of tensors and plain data), ``over-limits`` (too
            large a file, or a tensor over the limits or sharing its storage).
    """
    import torch

    size = path.stat().st_size
    if size > max_bytes:
        raise PtFileError("over-limits", f"{path.name} has {size} bytes, more than the {max_bytes} read")
    try:
        # weights_only=True: the unpickler only rebuilds tensors and plain containers, never code.
        value = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # any failure to load is a property of the input
        unsafe, reason = _cause(exc)
        if unsafe:
            raise PtFileError(
                "unsafe",
                f"{path.name} holds more than tensors and plain data ({reason}); "
                "refused, nothing in it was run",
            ) from None
        raise PtFileError(
            "unreadable",
            f"{path.name} is not a .pt file of tensors and plain data ({type(exc).__name__}: {reason})",
        ) from None
    problem = _tensor_problem(value)
    if problem is not None:
        raise PtFileError("over-limits", f"{path.name}: {problem}")
    return value


def _tensor_problem(value: Any) -> str | None:
    """Why a tensor in ``value`` (at any depth) is not read, or None."""
    import torch

    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        elif isinstance(item, torch.Tensor):
            problem = _one_tensor_problem(item)
            if problem is not None:
                return problem
    return None


def _one_tensor_problem(tensor: Any) -> str | None:
    import torch

    if tensor.layout != torch.strided or tensor.is_quantized or tensor.is_meta or tensor.is_nested:
        return f"a tensor of layout {tensor.layout} is not read (only dense tensors are)"
    shape = list(tensor.shape)
    itemsize = tensor.element_size()
    over = shape_problem(shape, itemsize)
    if over is not None:
        return f"a tensor of shape {_short(shape)} is over the tensor limits: {over}"
    needed = tensor.numel() * itemsize
    held = tensor.untyped_storage().nbytes()
    if needed > held:
        return (
            f"a tensor of shape {_short(shape)} (strides {_short(list(tensor.stride()))}) has "
            f"{needed} bytes of elements in {held} bytes of storage: its elements share storage "
            "(a stride of 0), and copying it would take memory the file does not hold"
        )
    return None


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"
