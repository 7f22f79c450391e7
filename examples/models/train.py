"""Regenerate the shipped datasets, the tokenizer and both tiny models from scratch.

Usage::

    python examples/models/train.py --out examples/models

writes ``<out>/tiny-gpt2/``, ``<out>/tiny-llama/`` (weights, config, tokenizer files,
``training.json``), ``<out>/MODELS.md`` and the test splits in ``<datasets-out>/<task>/``
(default: the ``datasets`` folder beside ``--out``). Datasets and tokenizer are
reproduced byte for byte; the training loop is deterministic within a run environment,
but a full rerun has been seen to end at different weights (MODELS.md says by how much).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

# Nothing here may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "devtools"))  # mibspec_dev: not shipped

from mibspec_dev.training.recipe import Recipe, run


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent,
        help="folder for the model folders and MODELS.md (default: this script's folder)",
    )
    parser.add_argument(
        "--datasets-out",
        type=Path,
        default=None,
        help="folder for the shipped datasets (default: <out>/../datasets)",
    )
    parser.add_argument("--seed", type=int, default=Recipe().seed, help="dataset and initialisation seed")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: the recipe's)")
    args = parser.parse_args(argv)
    recipe = replace(Recipe(), seed=args.seed)
    if args.steps is not None:
        recipe = replace(recipe, training=replace(recipe.training, steps=args.steps))
    datasets_out = args.datasets_out or args.out.resolve().parent / "datasets"
    _log(f"models -> {args.out}, datasets -> {datasets_out}")
    run(args.out, datasets_out, recipe, log=_log)
    _log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
