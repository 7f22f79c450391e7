"""Where recomputation runs, and how many examples it passes at once.

* :func:`parse_device` checks a device name (``cpu``, ``cuda``, ``cuda:N``, ``mps`` or
  ``auto``) without importing torch; :func:`resolve_device` also checks that the device is
  present and returns its canonical name (``auto``: CUDA if present, else MPS, else the CPU).
* :func:`parse_batch_size` reads ``auto`` or a positive integer; :func:`auto_batch_size`
  chooses a batch from the device's free memory (CUDA: ``torch.cuda.mem_get_info``; the
  CPU: ``MemAvailable`` of ``/proc/meminfo``), using :data:`MEMORY_FRACTION` of it;
  :func:`with_oom_backoff` halves the batch and runs again when the device runs out of
  memory. A halved batch gives exactly what that batch size gives when fixed; batch sizes
  change results by reassociation inside matrix products at most (engine.md ME-10), far
  inside every recomputation tolerance.

torch is imported only by the functions that need it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from mibspec.core.integers import parse_int

__all__ = [
    "AUTO",
    "DEVICES",
    "MEMORY_FRACTION",
    "BatchSize",
    "DeviceError",
    "auto_batch_size",
    "example_bytes",
    "free_memory",
    "is_out_of_memory",
    "parse_batch_size",
    "parse_device",
    "plan_batch",
    "resolve_device",
    "wide",
    "wide_device",
    "with_oom_backoff",
]

AUTO: Literal["auto"] = "auto"
DEVICES = "cpu, cuda, cuda:N, mps or auto"
"""The device names accepted, for messages."""

MEMORY_FRACTION = 0.5
"""Share of the free memory an automatic batch size plans to use: the rest is left to the
model's weights' temporaries, the allocator's rounding and other processes."""

#: A batch size: a positive number of examples, or ``"auto"``.
BatchSize = int | Literal["auto"]

_DEVICE = re.compile(r"cpu|mps|auto|cuda(?::(0|[1-9][0-9]{0,3}))?")
_T = TypeVar("_T")


class DeviceError(ValueError):
    """A device name that is malformed or names a device this machine does not have."""


def parse_device(name: object) -> str:
    """``name`` lower-cased, checked against :data:`DEVICES` (not against the machine).

    Raises:
        DeviceError: any other name (``meta``, ``cuda:x``, ``gpu``, ...).
    """
    text = name.strip().lower() if isinstance(name, str) else None
    if text is None or not _DEVICE.fullmatch(text):
        raise DeviceError(f"device: expected {DEVICES}, got {name!r}")
    return text


def resolve_device(name: object) -> str:
    """The canonical name of a device present on this machine: ``cpu``, ``cuda:N`` or ``mps``.

    ``auto`` picks the current CUDA device if there is one, else MPS if present, else the CPU.

    Raises:
        DeviceError: a malformed name, or a device this machine (or this torch) lacks.
    """
    text = parse_device(name)
    if text == "cpu":
        return "cpu"
    import torch

    cuda = torch.cuda.is_available()
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    if text == AUTO:
        return f"cuda:{torch.cuda.current_device()}" if cuda else "mps" if mps else "cpu"
    if text == "mps":
        if not mps:
            raise DeviceError("device: mps was asked for, but this machine or torch build has no MPS device")
        return "mps"
    if not cuda:
        raise DeviceError(f"device: {text} was asked for, but torch finds no CUDA device on this machine")
    index = int(text.partition(":")[2] or torch.cuda.current_device())
    count = torch.cuda.device_count()
    if index >= count:
        raise DeviceError(f"device: {text} was asked for, but this machine has {count} CUDA device(s)")
    return f"cuda:{index}"


def parse_batch_size(value: object) -> BatchSize:
    """``"auto"`` or a positive integer (also given as text, as on the command line).

    Raises:
        ValueError: anything else.
    """
    if isinstance(value, str):
        text = value.strip().lower()
        if text == AUTO:
            return AUTO
        number = parse_int(text)
        if number is not None:
            value = number
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"batch_size: expected a positive integer or 'auto', got {value!r}")
    return value


def free_memory(device: str) -> int:
    """Bytes free on ``device``: CUDA's own count; for the CPU (and MPS, which shares the
    machine's memory) ``MemAvailable`` of ``/proc/meminfo``, else the physical memory."""
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 1 << 30  # nothing to go by: 1 GiB, and out-of-memory halving does the rest


def auto_batch_size(device: str, bytes_per_example: int, n_examples: int, *, free: int | None = None) -> int:
    """The largest batch whose estimated memory fits :data:`MEMORY_FRACTION` of the free memory,
    between 1 and ``n_examples``.

    Args:
        device: a name from :func:`resolve_device`.
        bytes_per_example: the recomputation's estimate of one example's working memory.
        n_examples: the examples to pass (no batch is larger).
        free: bytes free (default: :func:`free_memory` of ``device``).
    """
    available = free_memory(device) if free is None else free
    fits = int(available * MEMORY_FRACTION) // max(1, int(bytes_per_example))
    return max(1, min(max(1, int(n_examples)), fits))


def example_bytes(model: Any, width: int) -> int:
    """An estimate of one example's working memory in a forward pass that keeps every node's
    output (the circuit engine's reference run; an interchange pass keeps less): per token,
    each source node's output, q/k/v and the attention weights of every layer, and the
    float32 logits of one position."""
    itemsize = model.dtype.itemsize
    per_token = model.d_model * (2 * model.n_forward + 4 * model.n_layers) + 2 * model.n_heads * width
    return int(itemsize * width * per_token + 8 * model.vocab_size)


def plan_batch(
    requested: BatchSize | None,
    device: str,
    default: int,
    per_example: int | Callable[[], int],
    n_examples: int,
) -> tuple[int, bool]:
    """The batch size a computation starts with, and whether it halves it on out-of-memory.

    ``requested``: ``None`` gives ``default``, an integer itself, ``"auto"`` the choice of
    :func:`auto_batch_size` from the estimate ``per_example`` (bytes, or a function
    computing them, called only then); only ``"auto"`` halves.
    """
    if requested is None:
        return int(default), False
    if requested == AUTO:
        estimate = per_example() if callable(per_example) else per_example
        return auto_batch_size(device, estimate, n_examples), True
    return int(requested), False


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is a device (or host) running out of memory."""
    import torch

    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def with_oom_backoff(
    run: Callable[[int], _T],
    batch_size: int,
    *,
    retry: bool = True,
    on_retry: Callable[[int], Any] | None = None,
) -> tuple[_T, int]:
    """``run(batch_size)``; on out-of-memory (and ``retry``) the batch is halved and ``run``
    called again, down to one example, whose failure is raised.

    Returns:
        ``run``'s result and the batch size it succeeded with.
    """
    size = max(1, int(batch_size))
    while True:
        try:
            return run(size), size
        except (RuntimeError, MemoryError) as exc:
            if not retry or size == 1 or not is_out_of_memory(exc):
                raise
            _release_cached_memory()
            size //= 2
            if on_retry is not None:
                on_retry(size)


def _release_cached_memory() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def wide_device(device: Any) -> Any:
    """Where float64 work for a computation on ``device`` is done: there, except on MPS, which
    has no float64 (the CPU then)."""
    import torch

    device = torch.device(device)
    return torch.device("cpu") if device.type == "mps" else device


def wide(x: Any) -> Any:
    """``x`` as float64, on :func:`wide_device` of its device."""
    import torch

    return x.to(device=wide_device(x.device), dtype=torch.float64)
