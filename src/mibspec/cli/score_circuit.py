"""``mibspec score circuit``: edge scores → circuits → faithfulness curve, CPR, CMD → report."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import click

from mibspec.cli._options import Option
from mibspec.cli._support import FollowLinksOption

from ._score_common import check_output_folder, finish, producing, require_paths, verify_written
from ._score_device import (
    MAX_MODEL_BYTES,
    DeviceOption,
    MaxModelBytesOption,
    batch_size_or_exit,
    device_or_exit,
)


class Method(str, enum.Enum):
    eap = "eap"
    eap_ig = "eap-ig"
    random = "random"


class DType(str, enum.Enum):
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"


def score_circuit_command(
    model: Annotated[
        Path,
        Option("--model", "-m", help="Local model folder (config.json, safetensors, tokenizer.json)."),
    ],
    dataset: Annotated[
        Path,
        Option("--dataset", "-d", help="Counterfactual dataset document (.json) or a dataset .meta.json."),
    ],
    counterfactual: Annotated[
        str, Option("--counterfactual", "-c", help="Counterfactual type of the dataset to patch from.")
    ],
    out_dir: Annotated[Path, Option("--output", "-o", help="Folder to write the report into.")],
    method: Annotated[Method, Option("--method", help="Attribution method.")] = Method.eap_ig,
    scores: Annotated[
        Path | None,
        Option(
            "--scores", help="Edge scores (.npy, or .safetensors with a 'scores' tensor) instead of a method."
        ),
    ] = None,
    steps: Annotated[int, Option(help="EAP-IG interpolation steps.", min=1)] = 5,
    seed: Annotated[int, Option(help="Seed of the random method.", min=0)] = 0,
    batch_size: Annotated[
        str,
        Option(
            metavar="<n|auto>",
            help="Examples per pass, or auto: chosen from free memory, halved on out-of-memory "
            "(the report declares the size used).",
        ),
    ] = "20",
    overwrite: Annotated[bool, Option(help="Replace a report already in the output folder.")] = False,
    device: DeviceOption = "cpu",
    dtype: Annotated[
        DType,
        Option(
            "--dtype",
            help="The dtype the model computes in (the report declares it; verify recomputes in it).",
        ),
    ] = DType.float32,
    max_model_bytes: MaxModelBytesOption = MAX_MODEL_BYTES,
    profile: Annotated[
        str,
        Option(
            help="Profile the report is written under; mib-2025 prepends the start token and scores "
            "edges with the public EAP-IG code's interpolation points and scale."
        ),
    ] = "default",
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Score edges, evaluate the circuits of the k-grid and write a report that verify recomputes."""
    size = batch_size_or_exit(batch_size)
    on = device_or_exit(device)
    require_paths(((model, "model folder"), (dataset, "dataset document")))
    out_dir = check_output_folder(out_dir, (model, dataset, scores), follow_output_links)
    with producing("scoring needs", "recompute") as progress:
        from mibspec.reference_impl.scoring.circuit import CircuitOptions, score_circuit

        options = CircuitOptions(
            model_dir=model,
            dataset_path=dataset,
            out_dir=out_dir,
            counterfactual_type=counterfactual,
            method="scores" if scores is not None else method.value,
            scores_path=scores,
            steps=steps,
            seed=seed,
            batch_size=size,
            overwrite=overwrite,
            device=on,
            dtype=dtype.value,
            profile=profile,
            max_model_bytes=max_model_bytes,
        )
        run = score_circuit(options, progress)
    valid = verify_written(run.report)
    click.echo(
        f"  m(N) = {run.m_full:.6g}, m(∅) = {run.m_empty:.6g}, CPR = {run.cpr:.6g}, CMD = {run.cmd:.6g}"
    )
    click.echo(f"  verify with: mibspec verify {run.report} --model-root {model.resolve().parent}")
    finish(valid)
