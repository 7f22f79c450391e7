"""Evaluation counts of exact Shapley values against permutation sampling on a synthetic game.

The game is near-additive (linear term, small pairwise and triple interactions), so its
exact values are known and the sampling error can be measured. For each number of
players the script prints the coalitions evaluated by the exact enumeration (2ⁿ) and by
plain and antithetic permutation sampling at a fixed budget of permutations, with the
resulting maximum absolute error and wall time. No model is needed.

Run: ``python benchmarks/bench_shapley.py [--permutations 200] [--seed 0] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from mibspec.metrics.shapley import ValueFn, shapley_exact, shapley_permutation


def make_game(n: int, seed: int) -> ValueFn:
    """A near-additive game on n players with seeded random coefficients."""
    rng = np.random.default_rng(seed)
    weights = rng.normal(size=n)
    pair = rng.normal(scale=0.2, size=(n, n))
    triple = rng.normal(scale=0.05, size=(n, n, n))

    def value_fn(coalitions: NDArray[np.bool_]) -> NDArray[np.float64]:
        x = coalitions.astype(np.float64)
        quadratic = np.einsum("bi,ij,bj->b", x, pair, x)
        cubic = np.einsum("bi,bj,bk,ijk->b", x, x, x, triple)
        return np.asarray(x @ weights + quadratic + cubic, dtype=np.float64)

    return value_fn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--permutations", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()

    columns = ("n", "exact evals", "perm evals", "ratio", "err plain", "err anti", "t exact", "t perm")
    widths = (3, 12, 11, 8, 10, 10, 8, 8)
    header = " ".join(f"{name:>{width}}" for name, width in zip(columns, widths, strict=True))
    print(header)
    rows: list[list[str]] = []
    for n in (4, 8, 10, 12, 14, 16):
        game = make_game(n, args.seed)
        start = time.perf_counter()
        exact = shapley_exact(game, n, batch_size=8192)
        t_exact = time.perf_counter() - start
        start = time.perf_counter()
        plain = shapley_permutation(
            game, n, n_permutations=args.permutations, seed=args.seed, batch_size=8192
        )
        t_perm = time.perf_counter() - start
        anti = shapley_permutation(
            game, n, n_permutations=args.permutations, seed=args.seed, antithetic=True, batch_size=8192
        )
        exact_evals = 1 << n
        print(
            f"{n:>3} {exact_evals:>12} {plain.n_evaluations:>11} {plain.n_evaluations / exact_evals:>8.3f} "
            f"{np.max(np.abs(plain.values - exact)):>10.2e} {np.max(np.abs(anti.values - exact)):>10.2e} "
            f"{t_exact:>8.3f} {t_perm:>8.3f}"
        )
        rows.append(
            [
                str(n),
                str(exact_evals),
                str(plain.n_evaluations),
                f"{plain.n_evaluations / exact_evals:.3f}",
                f"{np.max(np.abs(plain.values - exact)):.2e}",
                f"{np.max(np.abs(anti.values - exact)):.2e}",
                f"{t_exact:.3f}",
                f"{t_perm:.3f}",
            ]
        )
    if args.json:
        # the printed table as data: one row per number of players
        title = f"{args.permutations} permutations; t exact and t perm in seconds of wall clock"
        table = {"title": title, "columns": list(columns), "rows": rows}
        result = {"status": "ok", "figures": [], "tables": [table]}
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
