"""The forced mixing modes reach every sum of a patched pass.

The dense/sparse comparisons in test_evaluate.py set ``_evaluate._MIXING``; they
compare the two forms only if the setting decides how each slot input is summed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mibspec.reference_impl.engine import (
    _evaluate,
    _mixing,
    evaluate_circuits,
    graph_universe,
    load_model,
    random_model,
)

pytestmark = [pytest.mark.recompute, pytest.mark.slow]


@pytest.mark.parametrize("family", ["gpt2", "gemma2"])
def test_forced_mixing_mode_decides_every_sum(
    tmp_path: Path, family: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = load_model(random_model(family, tmp_path, seed=41), dtype="float64")
    universe = graph_universe(weights)
    rng = np.random.default_rng(42)
    ids = rng.integers(0, weights.vocab_size, (3, 5))
    cids = rng.integers(0, weights.vocab_size, (3, 5))
    answers = rng.integers(0, weights.vocab_size, (2, 3))
    circuits = rng.random((4, universe.n_edges)) < np.array([0.1, 0.3, 0.6, 0.9])[:, None]
    row_sums: list[int] = []
    add_rows = _mixing._add_rows

    def counted(*args: Any) -> None:
        row_sums.append(1)
        add_rows(*args)

    monkeypatch.setattr(_mixing, "_add_rows", counted)
    for mode in ("dense", "sparse"):
        monkeypatch.setattr(_evaluate, "_MIXING", mode)
        row_sums.clear()
        evaluate_circuits(weights, ids, cids, None, answers[0], answers[1], circuits)
        assert (len(row_sums) > 0) == (mode == "sparse"), mode
