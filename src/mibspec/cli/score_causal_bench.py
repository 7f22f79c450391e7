"""``mibspec score causal-bench``: four localization methods → CAUSAL-BENCH study → report."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated, Any

import click

from mibspec.cli._options import Option
from mibspec.cli._support import FollowLinksOption

from ._score_common import check_output_folder, finish, producing, require_paths, usage_error, verify_written
from ._score_device import DeviceOption, device_or_exit


class BehaviourKind(str, enum.Enum):
    planted = "planted"
    transformer = "transformer"


class Ablation(str, enum.Enum):
    counterfactual = "counterfactual"
    mean = "mean"
    zero = "zero"


def score_causal_bench_command(
    out_dir: Annotated[Path, Option("--output", "-o", help="Folder to write the report into.")],
    behaviour: Annotated[
        BehaviourKind, Option("--behaviour", "-b", help="Planted-circuit model or a transformer.")
    ] = BehaviourKind.planted,
    layers: Annotated[int, Option(help="Planted model: layers L.", min=1)] = 4,
    heads: Annotated[int, Option(help="Planted model: heads per layer H.", min=1)] = 4,
    seed: Annotated[int, Option(help="Planted model: seed of contributions and noise.", min=0)] = 42,
    model: Annotated[
        Path | None,
        Option(
            "--model", "-m", help="Transformer: local model folder (config.json, safetensors, tokenizer)."
        ),
    ] = None,
    dataset: Annotated[
        Path | None,
        Option("--dataset", "-d", help="Transformer: counterfactual dataset (.json or .meta.json)."),
    ] = None,
    counterfactual: Annotated[
        str | None,
        Option("--counterfactual", "-c", help="Transformer: counterfactual type of the dataset."),
    ] = None,
    ablation: Annotated[Ablation, Option(help="Transformer: ablation of inactive components.")] = (
        Ablation.counterfactual
    ),
    examples: Annotated[
        int | None, Option(help="Transformer: use the first N rows of the dataset.", min=1)
    ] = None,
    subsample: Annotated[
        int | None, Option(help="Transformer: examples per seed run (default: half).", min=1)
    ] = None,
    runs: Annotated[int, Option(help="Seed runs K of the stability metric.", min=2)] = 10,
    permutations: Annotated[int, Option(help="Permutations B of the convergence test.", min=1)] = 1000,
    convergence_seed: Annotated[int, Option(help="Seed of the convergence test.", min=0)] = 0,
    scaling: Annotated[
        bool, Option(help="Planted model: add the scaling study over 2L/2H … 12L/12H.")
    ] = True,
    overwrite: Annotated[bool, Option(help="Replace a report already in the output folder.")] = False,
    device: DeviceOption = "cpu",
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Run activation patching, gradient attribution, ablation scanning and circuit discovery on a
    behaviour and write a CAUSAL-BENCH report (Tables 1–3) that verify recomputes."""
    on = device_or_exit(device)
    transformer = behaviour is BehaviourKind.transformer
    _check_behaviour_inputs(transformer, model, dataset, counterfactual)
    out_dir = check_output_folder(out_dir, (model, dataset), follow_output_links)
    with producing("a transformer behaviour needs", "recompute") as progress:
        from mibspec.reference_impl.scoring.causal_bench import CausalBenchOptions, score_causal_bench

        options = CausalBenchOptions(
            out_dir=out_dir,
            behaviour=behaviour.value,
            n_layers=layers,
            n_heads=heads,
            seed=seed,
            model_dir=model,
            dataset_path=dataset,
            counterfactual_type=counterfactual,
            ablation=ablation.value,
            n_examples=examples,
            subsample_size=subsample,
            n_runs=runs,
            n_permutations=permutations,
            convergence_seed=convergence_seed,
            scaling=scaling and not transformer,
            overwrite=overwrite,
            device=on,
        )
        run = score_causal_bench(options, progress)
    valid = verify_written(run.report)
    click.echo(render_claims(run.claims))
    hint = f" --model-root {model.resolve().parent}" if transformer and model is not None else ""
    click.echo(f"verify with: mibspec verify {run.report}{hint}")
    finish(valid)


def _check_behaviour_inputs(
    transformer: bool, model: Path | None, dataset: Path | None, counterfactual: str | None
) -> None:
    """A transformer behaviour needs its model, dataset and counterfactual type (the files
    present); the planted model takes none of them. Usage errors otherwise."""
    if transformer:
        for value, flag in ((model, "--model"), (dataset, "--dataset"), (counterfactual, "--counterfactual")):
            if value is None:
                usage_error(f"a transformer behaviour needs {flag}")
        assert model is not None
        assert dataset is not None
        require_paths(((model, "model folder"), (dataset, "dataset document")))
    elif model is not None or dataset is not None or counterfactual is not None:
        usage_error("--model, --dataset and --counterfactual need --behaviour transformer")


def _cell(value: Any) -> str:
    return "—" if value is None else f"{value:.3f}"


def render_claims(claims: dict[str, Any]) -> str:
    """The claims as the paper's tables: metrics per method, convergence, sets, studies."""
    lines: list[str] = []
    keys = ("F", "C", "M", "S", "COS", "composite", "precision", "recall", "f1")
    header = ("method", "|S|", "F", "C", "M", "Stab.", "COS", "Comp.", "P", "R", "F1")
    rows = []
    for method in claims["methods"]:
        metrics = method["metrics"]
        rows.append(
            (method["name"], str(len(method["components"])), *(_cell(metrics.get(key)) for key in keys))
        )
    lines.extend(_table(header, rows))
    conv = claims.get("convergence")
    if conv:
        z = f"{conv['z']:.2f}" if "z" in conv else "undefined"
        lines.append(
            f"convergence: J_obs = {conv['j_obs']:.3f}, null mean = {conv['null_mean']:.3f}, z = {z}, "
            f"p = {conv['p']:.4f} (B = {conv['n_permutations']}, seed {conv['seed']})"
        )
    for key in ("consensus", "majority"):
        if claims.get(key) is not None:
            lines.append(f"{key}: {', '.join(claims[key]) or '∅'}")
    sensitivity = claims.get("threshold_sensitivity")
    if sensitivity:
        lines.append(f"threshold sensitivity of {sensitivity['method']}:")
        rows = [
            (
                f"{point['threshold']:g}",
                str(len(point["components"])),
                *(_cell(point["metrics"].get(key)) for key in keys),
            )
            for point in sensitivity["points"]
        ]
        lines.extend(_table(("τ", *header[1:]), rows))
    scenarios = claims.get("weight_robustness") or []
    if scenarios:
        names = [m["name"] for m in claims["methods"]]
        lines.append("composite under weight configurations:")
        rows = [(s["name"], *(_cell(s["composites"].get(name)) for name in names)) for s in scenarios]
        lines.extend(_table(("weights", *names), rows))
    scaling = claims.get("scaling") or []
    if scaling:
        names = [entry["name"] for entry in scaling[0]["methods"]]
        lines.append("F1 across planted model sizes:")
        rows = []
        for config in scaling:
            f1 = {entry["name"]: entry["f1"] for entry in config["methods"]}
            conv = config.get("convergence") or {}
            n = config["n_layers"] * config["n_heads"] + config["n_layers"]
            rows.append(
                (
                    f"{config['n_layers']}L/{config['n_heads']}H",
                    str(n),
                    *(_cell(f1.get(name)) for name in names),
                    f"{conv['z']:.2f}" if "z" in conv else "—",
                )
            )
        lines.extend(_table(("config", "N", *names, "z"), rows))
    return "\n".join(lines)


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    out = ["  " + "  ".join(str(cell).ljust(width) for cell, width in zip(header, widths, strict=True))]
    out.extend(
        "  " + "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    )
    return out
