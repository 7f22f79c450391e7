"""Train the tiny RAVEL model (attribute retrieval) from scratch.

Usage::

    python examples/models/train_ravel.py --out examples/models

writes ``<out>/tiny-gpt2-ravel/`` (weights, config, the tokenizer files copied from
``<out>/tiny-gpt2/``, ``training.json``) and ``<out>/MODELS-ravel.md``. Accuracy is
measured on ``<datasets>/ravel/test.jsonl`` (default: the ``datasets`` folder beside
``--out``). The model learns the facts of every city of the lexicon, all splits (see
``devtools/mibspec_dev/training/ravel.py``). One torch thread, seeded local generators.
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

from mibspec_dev.training.ravel import RavelRecipe, run_ravel


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent,
        help="folder holding tiny-gpt2/ and receiving tiny-gpt2-ravel/ (default: this script's folder)",
    )
    parser.add_argument(
        "--datasets",
        type=Path,
        default=None,
        help="folder holding ravel/test.jsonl (default: <out>/../datasets)",
    )
    parser.add_argument("--seed", type=int, default=RavelRecipe().seed, help="initialisation seed")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: the recipe's)")
    args = parser.parse_args(argv)
    recipe = replace(RavelRecipe(), seed=args.seed)
    if args.steps is not None:
        recipe = replace(recipe, training=replace(recipe.training, steps=args.steps))
    datasets = args.datasets or args.out.resolve().parent / "datasets"
    _log(f"model -> {args.out / recipe.model.name}, test split <- {datasets / 'ravel'}")
    run_ravel(args.out, datasets, recipe, log=_log)
    _log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
