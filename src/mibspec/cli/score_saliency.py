"""``mibspec score saliency``: saliency maps + Shapley ground truth on a shortcut dataset → report."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import click

from mibspec.cli._options import Option
from mibspec.cli._support import FollowLinksOption

from ._score_common import check_output_folder, finish, producing, require_paths, verify_written
from ._score_device import DeviceOption, device_or_exit


class Sampler(str, enum.Enum):
    exact = "exact"
    permutation = "permutation"
    antithetic = "antithetic"
    rotated_antithetic = "rotated_antithetic"


class CurveScore(str, enum.Enum):
    probability = "probability"
    accuracy = "accuracy"


def score_saliency_command(
    weights: Annotated[
        Path, Option("--weights", "-w", help="Weights of a registry architecture (.safetensors).")
    ],
    dataset: Annotated[Path, Option("--dataset", "-d", help="Shortcut dataset document (.json).")],
    out_dir: Annotated[Path, Option("--output", "-o", help="Folder to write the report into.")],
    architecture: Annotated[
        str | None,
        Option(help="Registry architecture (default: the weights file's `architecture` metadata)."),
    ] = None,
    method: Annotated[
        list[str] | None,
        Option(
            "--method",
            metavar="<method>",
            help="Attribution method (repeatable; default: all): gradient, input_x_gradient, "
            "integrated_gradients, gradient_shap, occlusion, deeplift, guided_backprop.",
        ),
    ] = None,
    sampler: Annotated[Sampler, Option(help="Shapley estimator of the ground truth.")] = Sampler.permutation,
    trials: Annotated[int, Option(help="Sampling trials averaged (the paper: 5).", min=1)] = 5,
    permutations: Annotated[int, Option(help="Permutations per trial.", min=2)] = 20,
    seed: Annotated[int, Option(help="Root seed of the Shapley permutations.", min=0)] = 0,
    maps_seed: Annotated[int, Option(help="Seed of gradient_shap's draws.", min=0)] = 1,
    curve_steps: Annotated[
        int | None, Option(help="Deletion/addition steps (default: the patch's pixel count).", min=1)
    ] = None,
    curve_score: Annotated[
        CurveScore, Option(help="Deletion/addition curve value.")
    ] = CurveScore.probability,
    threshold: Annotated[float, Option(help="Dominance threshold T.", min=0.0, max=0.999999)] = 0.9,
    task_name: Annotated[str, Option("--task-name", help="The report's task name.")] = "shortcut",
    overwrite: Annotated[bool, Option(help="Replace a report already in the output folder.")] = False,
    device: DeviceOption = "cpu",
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Compute saliency maps and the Shapley ground truth, score them, write a report verify recomputes."""
    on = device_or_exit(device)
    require_paths(((weights, "weights file"), (dataset, "dataset document")), files=True)
    out_dir = check_output_folder(out_dir, (weights, dataset), follow_output_links)
    with producing("scoring needs", "recompute,saliency") as progress:
        from mibspec.reference_impl.scoring.saliency import SaliencyOptions, score_saliency

        options = SaliencyOptions(
            architecture=architecture,
            methods=method or None,
            sampler=sampler.value,
            n_trials=trials,
            n_permutations=permutations,
            shapley_seed=seed,
            maps_seed=maps_seed,
            curve_steps=curve_steps,
            curve_score=curve_score.value,
            threshold=threshold,
            task_name=task_name,
            overwrite=overwrite,
            device=on,
        )
        run = score_saliency(weights, dataset, out_dir, options, progress=progress)
    valid = verify_written(run.report)
    click.echo(
        f"  {run.n_dominant}/{run.n_images} dominant images; accuracy clean {run.clean_accuracy:.4g}, "
        f"perturbed {run.perturbed_accuracy:.4g}"
    )
    for name, row in run.methods.items():
        click.echo(
            f"  {name}: HA {row['hit_accuracy']:.4g}, WIoU {row['wiou']:.4g}, "
            f"deletion AUC {row['deletion_auc']:.4g}, addition AUC {row['addition_auc']:.4g}"
        )
    click.echo(f"  verify with: mibspec verify {run.report}")
    finish(valid)
