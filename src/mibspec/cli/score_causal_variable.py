"""``mibspec score causal-variable``: featurizers per unit → interchange interventions → IIA/MSE → report."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import click
from click.core import ParameterSource

from mibspec.cli._options import Option
from mibspec.cli._support import FollowLinksOption

from ._score_common import check_output_folder, finish, producing, require_paths, verify_written
from ._score_device import MAX_MODEL_BYTES, DeviceOption, MaxModelBytesOption, device_or_exit

if TYPE_CHECKING:
    from mibspec.reference_impl.scoring.causal_variable import CausalVariableRun


class Method(str, enum.Enum):
    full_vector = "full_vector"
    das = "das"
    dbm = "dbm"
    pca = "pca"
    sae = "sae"


class Component(str, enum.Enum):
    residual_post = "residual_post"
    residual_pre = "residual_pre"
    mlp_output = "mlp_output"
    attention_heads = "attention_heads"


_ModelOption = Annotated[
    Path, Option("--model", "-m", help="Local model folder (config.json, safetensors, tokenizer.json).")
]
_DatasetOption = Annotated[
    Path,
    Option("--dataset", "-d", help="Counterfactual dataset document (.json) or a dataset .meta.json."),
]
_VariableOption = Annotated[
    list[str] | None,
    Option("--variable", metavar="<name>", help="Causal variable to localise (repeatable; default all)."),
]
_LayerOption = Annotated[
    list[int] | None, Option("--layer", metavar="<int>", help="Layer to try (repeatable; default all).")
]
_PositionOption = Annotated[
    list[str] | None,
    Option(
        "--position",
        metavar="<position>",
        help="Token position (repeatable): last, index:N, first:TEXT, lastocc:TEXT, slot:NAME[:K], "
        "value:NAME[:K], all (every token; trained methods learn from every token of each pair). "
        "Default: per task.",
    ),
]
_HeadOption = Annotated[
    list[int] | None, Option("--head", metavar="<int>", help="Head for attention_heads (repeatable).")
]
_JointHeadOption = Annotated[
    list[str] | None,
    Option(
        "--joint-head",
        metavar="<layer:head>",
        help="An attention head of one joint unit (repeatable, at least two; e.g. --joint-head 7:3 "
        "--joint-head 8:6): the heads are written in one forward pass, each through its own "
        "featurizer, one unit per position and variable, counted under the lowest head's layer; "
        "instead of --layer and --head. Trained methods train the heads' featurizers together, "
        "through that one pass (MIB's IOI --heads_list).",
    ),
]
_CounterfactualOption = Annotated[
    list[str] | None,
    Option(
        "--counterfactual",
        "-c",
        metavar="<name>",
        help="Counterfactual set to score on (repeatable; default all).",
    ),
]
_PcaCentringOption = Annotated[
    str, Option(choices=("centred", "uncentred"), help="PCA centring; uncentred is the public MIB code's.")
]
_ProfileOption = Annotated[str, Option(help="The report's profile (its answer checker is used).")]


def score_causal_variable_command(
    model: _ModelOption,
    dataset: _DatasetOption,
    out_dir: Annotated[Path, Option("--output", "-o", help="Folder to write the report into.")],
    method: Annotated[Method, Option("--method", help="Featurizer method.")] = Method.das,
    variable: _VariableOption = None,
    layer: _LayerOption = None,
    position: _PositionOption = None,
    component: Annotated[Component, Option(help="Site at each layer.")] = Component.residual_post,
    head: _HeadOption = None,
    joint_head: _JointHeadOption = None,
    counterfactual: _CounterfactualOption = None,
    n_features: Annotated[int, Option(help="DAS subspace dimension.", min=1)] = 4,
    steps: Annotated[int, Option(help="Training steps (DAS, masks, SAE).", min=1)] = 150,
    learning_rate: Annotated[float, Option(help="Adam learning rate.")] = 0.02,
    pca_centring: _PcaCentringOption = "centred",
    train_rows: Annotated[int, Option(help="Generated train-split rows.", min=1)] = 320,
    seed: Annotated[int, Option(help="Seed of the train split and of every trainer.", min=0)] = 0,
    batch_size: Annotated[int, Option(help="Pairs per pass.", min=1)] = 64,
    ioi_fit: Annotated[
        str,
        Option(
            choices=("paper", "rescaled"),
            help="IOI coefficients: MIB's (paper), or their ratios scaled to the model's mean "
            "logit difference on the train split (rescaled).",
        ),
    ] = "rescaled",
    profile: _ProfileOption = "default",
    overwrite: Annotated[bool, Option(help="Replace a report already in the output folder.")] = False,
    device: DeviceOption = "cpu",
    max_model_bytes: MaxModelBytesOption = MAX_MODEL_BYTES,
    follow_output_links: FollowLinksOption = False,
) -> None:
    """Learn featurizers, score them by interchange interventions, write a report verify recomputes."""
    on = device_or_exit(device)
    require_paths(((model, "model folder"), (dataset, "dataset document")))
    out_dir = check_output_folder(out_dir, (model, dataset), follow_output_links)
    if (
        joint_head
        and click.get_current_context().get_parameter_source("component") is ParameterSource.DEFAULT
    ):
        component = Component.attention_heads  # the sites of a joint unit are heads
    with producing("scoring needs", "recompute") as progress:
        from mibspec.reference_impl.scoring.causal_variable import (
            CausalVariableOptions,
            parse_joint_head,
            run_causal_variable,
        )

        options = CausalVariableOptions(
            model,
            dataset,
            out_dir,
            method=method.value,
            variables=variable or None,
            layers=layer or None,
            positions=position or None,
            component=component.value,
            heads=head or None,
            joint_heads=[parse_joint_head(text) for text in joint_head] if joint_head else None,
            counterfactuals=counterfactual or None,
            n_features=n_features,
            steps=steps,
            learning_rate=learning_rate,
            pca_centring=pca_centring,
            train_rows=train_rows,
            seed=seed,
            batch_size=batch_size,
            ioi_fit=ioi_fit,
            profile=profile,
            overwrite=overwrite,
            device=on,
            max_model_bytes=max_model_bytes,
        )
        run = run_causal_variable(options, progress)
    valid = verify_written(run.report)
    _print_scores(run, model)
    finish(valid)


def _print_scores(run: CausalVariableRun, model: Path) -> None:
    """Each variable's Average and Best, and the command that verifies the report."""
    for name in run.averages:
        click.echo(f"  {name}: Average = {run.averages[name]:.6g}, Best = {run.best[name]:.6g}")
    click.echo(f"  verify with: mibspec verify {run.report} --model-root {model.resolve().parent}")
