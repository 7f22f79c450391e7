"""Sums of stored rows selected by 0/1 circuit membership: the slot inputs of a pass."""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from numpy.typing import NDArray

from . import _ops

__all__ = ["Mixing", "membership", "mix", "sparse_is_cheaper"]

#: How :func:`mix` forms sums: per circuit by the cost model (``auto``), or always one way.
Mixing = Literal["auto", "dense", "sparse"]


def sparse_is_cheaper(n_edges: int, k: int, s: int) -> bool:
    """Whether summing ``n_edges`` rows into ``k`` slots beats a dense ``k × s`` product.

    Both forms are bound by memory traffic over rows of ``B·T·d`` values. The sparse form
    makes one pass per edge (plus a little per slot); the dense product writes ``k`` rows,
    streams all ``s`` and multiplies ``k·s`` pairs. Fitted on the passes of GPT-2-small-
    sized EAP and random circuits on one CPU thread, in units of one sparse pass: dense
    ≈ 2·k + 2·s + k·s/12 (the sparse per-slot cost is folded in). There the rule chose
    the sparse form for 85 % of the circuits, at a total within 1 % of always choosing
    the faster form.
    """
    return n_edges < 2 * (k + s) + k * s / 12


def mix(
    w: NDArray[np.bool_],
    rows: torch.Tensor,
    out: torch.Tensor | None = None,
    mode: Mixing = "auto",
    sizes: NDArray[np.int64] | None = None,
) -> torch.Tensor:
    """``Σ_s w[c, j, s] · rows[c, s]``: for each circuit c and slot j the sum of the rows its
    edges select, ``(C, k, n)`` from 0/1 ``w`` ``(C, k, s)`` and ``rows`` ``(C, s, n)``.

    Circuits that keep a small fraction of the edges make a dense 0/1 product mostly
    multiply zeros while streaming every source row; for those circuits the rows of the
    present edges are added directly, in ascending source order. With ``mode="auto"``
    each circuit takes the cheaper form by :func:`sparse_is_cheaper` (the forced modes
    let the two forms be compared on the same circuits); both are sums of the same
    terms, so they differ by float rounding only, and each is deterministic.
    Half-precision models always take the dense product.

    ``sizes`` ``(C, 3)``, when given, are the ``(terms, k, s)`` each circuit's choice is
    made on instead of its row of ``w``: those of its own pass, so that the form a circuit
    takes does not depend on the slots and rows other circuits of its stack bring.
    """
    C, k, s = w.shape
    n = rows.shape[-1]
    if out is None:
        out = torch.empty((C, k, n), dtype=rows.dtype, device=rows.device)
    counts = w.reshape(C, -1).sum(axis=1)
    if rows.dtype not in (torch.float32, torch.float64):
        # a dense product accumulates half-precision terms in float32; chained sums would not
        sparse = np.zeros(C, dtype=np.bool_)
    elif mode == "auto" and sizes is not None:
        own = [sparse_is_cheaper(int(n), int(kc), int(sc)) for n, kc, sc in sizes]
        sparse = np.array(own, dtype=np.bool_)
    elif mode == "auto":
        sparse = np.array([sparse_is_cheaper(int(c), k, s) for c in counts], dtype=np.bool_)
    else:
        sparse = np.full(C, mode == "sparse")
    if not sparse.any():
        _ops.matmul(membership(w, rows.dtype, rows.device), rows, out=out)
        return out
    for c in range(C):
        if not sparse[c]:
            torch.mm(membership(w[c], rows.dtype, rows.device), rows[c], out=out[c])
            continue
        _add_rows(w[c], rows[c], out[c])
    return out


def _add_rows(w: NDArray[np.bool_], rows: torch.Tensor, out: torch.Tensor) -> None:
    """One circuit's sums, row by row: ``out[j] = Σ_{s: w[j, s]} rows[s]`` in ascending ``s``."""
    for j in range(w.shape[0]):
        picked = np.flatnonzero(w[j]).tolist()
        target = out[j]
        if not picked:
            target.zero_()
        elif len(picked) == 1:
            target.copy_(rows[picked[0]])
        else:
            torch.add(rows[picked[0]], rows[picked[1]], out=target)
            for i in picked[2:]:
                target.add_(rows[i])


def membership(w: NDArray[np.bool_], dtype: torch.dtype, device: torch.device | str = "cpu") -> torch.Tensor:
    """A 0/1 membership array as a tensor of ``dtype`` on ``device``."""
    if dtype in (torch.float32, torch.float64):
        np_type = np.float32 if dtype == torch.float32 else np.float64
        return torch.from_numpy(np.ascontiguousarray(w, dtype=np_type)).to(device)
    return torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32)).to(device=device, dtype=dtype)
