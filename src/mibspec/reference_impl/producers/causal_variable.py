"""Causal-variable producer: featurizers per unit → interchange interventions → IIA / MSE → report.

What ``mibspec score causal-variable`` runs. Methods (MIB §4, App. G):

* ``full_vector``: the identity featurizer, every dimension interchanged;
* ``das``: distributed alignment search, an ``n_features``-dimensional subspace with
  orthonormal rows trained on interchange interventions;
* ``dbm``: differential binary masking over the dimensions (identity features);
* ``pca``: DBM over the principal components of standardised activations (``pca_centring``
  declared: ``centred`` by default, ``uncentred`` as in the public MIB code);
* ``sae``: DBM over the latents of a small ReLU sparse autoencoder trained on the site.

Featurizers are trained on the task's train split (generated with the reference generator
and the declared seed, filtered to equal token lengths under the model's tokenizer) and
scored on the given dataset. The written folder holds ``report.json``, ``dataset.json`` +
``dataset.jsonl``, ``causal_model.json`` and one featurizer document + safetensors file
per unit; the numbers come from the evaluator the recompute stage uses, run on the stored
float32 weights, so that ``mibspec verify`` reproduces them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mibspec.core.outputs import input_files
from mibspec.core.progress import Progress, start_task
from mibspec.core.spec import SPEC_VERSION

from ..causal_models import TASK_MECHANISMS, causal_model_document, check_causal_model, ioi_logit_names
from ..metrics.causal_variable import Better, CellKey, aggregate_scores
from ..recompute import ModelSource
from ..recompute.causal_variable import Evaluator, TextCodec, build_featurizer
from ..threads import one_thread
from ._featurizer_training import (
    collect_activations,
    fit_pca,
    fit_sae,
    train_das,
    train_mask,
    training_pairs,
)
from .circuit import _dataset_input, _model_ref, _provenance, _strict_rows
from .folder import OutputFolder, created_timestamp

__all__ = ["DEFAULT_POSITIONS", "METHODS", "CausalVariableRun", "parse_position", "score_causal_variable"]

METHODS: dict[str, dict[str, Any]] = {
    "full_vector": {
        "name": "Full vector",
        "description": "Identity featurizer: the whole hidden vector at the unit is interchanged.",
    },
    "das": {
        "name": "DAS",
        "description": "Distributed alignment search: a low-dimensional subspace with orthonormal rows, "
        "trained by interchange interventions, is interchanged.",
        "citation": {
            "text": "Geiger, Wu, Potts, Icard and Goodman (2024). Finding Alignments Between Interpretable "
            "Causal Variables and Distributed Neural Representations.",
            "url": "https://arxiv.org/abs/2303.02536",
        },
    },
    "dbm": {
        "name": "DBM",
        "description": "Differential binary masking: a mask over the hidden vector's dimensions, trained by "
        "interchange interventions through a sigmoid relaxation.",
    },
    "pca": {
        "name": "DBM+PCA",
        "description": "Differential binary masking over the principal components of standardised "
        "activations at the unit.",
    },
    "sae": {
        "name": "DBM+SAE",
        "description": "Differential binary masking over the latents of a ReLU sparse autoencoder trained on "
        "activations at the unit.",
    },
}

#: Token positions tried by default, per task (``parse_position`` syntax).
DEFAULT_POSITIONS: dict[str, tuple[str, ...]] = {
    "ioi": ("last", "slot:name_c"),
    "arithmetic": ("last", "slot:operand_2"),
    "mcqa": ("last", "slot:label_{answer_pointer}"),
    "ravel": ("last", "slot:city"),
}

_COMPONENT_NAMES = {
    "residual_post": "ResidualStream",
    "residual_pre": "ResidualStreamPre",
    "mlp_output": "MLP",
    "attention_heads": "AttentionHeads",
}


@dataclass(frozen=True)
class CausalVariableRun:
    """What :func:`score_causal_variable` wrote and computed."""

    report: Path
    averages: dict[str, float]
    highest: dict[str, float]


def parse_position(spec: str) -> dict[str, Any]:
    """A ``TokenPosition`` object from a short text form.

    ``last``; ``index:N``; ``first:TEXT`` / ``lastocc:TEXT`` (first / last occurrence of
    TEXT's tokens); ``slot:NAME[:OCCURRENCE]`` (a template placeholder) and
    ``value:NAME[:OCCURRENCE]`` (a mention of the slot's value).

    Raises:
        ValueError: an unknown form (naming it).
    """
    kind, _, rest = spec.partition(":")
    if kind == "last" and not rest:
        return {"rule": "last"}
    if kind == "index":
        try:
            return {"rule": "index", "index": int(rest)}
        except ValueError:
            pass
    if kind in ("first", "lastocc") and rest:
        return {"rule": "first_occurrence" if kind == "first" else "last_occurrence", "token": rest}
    if kind in ("slot", "value") and rest:
        name, occurrence = rest, None
        head, sep, tail = rest.rpartition(":")
        if sep and tail.lstrip("-").isdigit():
            name, occurrence = head, int(tail)
        out: dict[str, Any] = {"rule": "slot", "slot": name}
        if occurrence is not None:
            out["occurrence"] = occurrence
        if kind == "value":
            out["match"] = "value"
        return out
    raise ValueError(
        "position: expected last, index:N, first:TEXT, lastocc:TEXT, slot:NAME[:K] or value:NAME[:K]; "
        f"got {spec!r}"
    )


def _unit_id(location: dict[str, Any], spec: str) -> str:
    heads = location.get("heads")
    head_text = f",Heads-{'+'.join(str(h) for h in heads)}" if heads else ""
    return f"{_COMPONENT_NAMES[location['component']]}(Layer-{location['layer']}{head_text},Token-{spec})"


def _train_rows(task: str, n_rows: int, seed: int, codec: TextCodec, tokenizer: str) -> list[dict[str, Any]]:
    from ..datasets import equal_token_length_filter, generate

    dataset = generate(task, "train", n_rows, seed=seed)
    return [dict(row) for row in equal_token_length_filter(dataset, codec.encode, tokenizer).rows]


def _rescaled_ioi_fit(evaluator: Evaluator) -> dict[str, float]:
    """The MIB fit scaled so that its unintervened prediction b + c_tok + c_pos equals the model's
    mean logit difference logit(IO) − logit(S) on the training base prompts it answers correctly."""
    import torch

    from ..engine import forward_sites

    rows = [r for r in range(len(evaluator.rows)) if evaluator.correct(r, "base")]
    diffs = []
    for start in range(0, len(rows), evaluator.batch_size):
        chunk = rows[start : start + evaluator.batch_size]
        ids, mask = evaluator._batch([(r, "base") for r in chunk])
        with torch.no_grad():
            logits, _ = forward_sites(evaluator.model, ids, mask)
        for r, row_logits in zip(chunk, logits.double(), strict=True):
            io, s = ioi_logit_names(evaluator.prompt(r, "base"))
            diffs.append(
                float(row_logits[evaluator.answer_ids(io, r)[0]] - row_logits[evaluator.answer_ids(s, r)[0]])
            )
    paper = {"bias": 0.069, "token_coeff": 0.687, "position_coeff": 2.018}
    scale = float(np.mean(diffs)) / sum(paper.values())
    return {key: round(value * scale, 4) for key, value in paper.items()}


def score_causal_variable(
    model_dir: Path,
    dataset_path: Path,
    out_dir: Path,
    *,
    method: str = "das",
    variables: Sequence[str] | None = None,
    layers: Sequence[int] | None = None,
    positions: Sequence[str] | None = None,
    component: str = "residual_post",
    heads: Sequence[int] | None = None,
    counterfactuals: Sequence[str] | None = None,
    n_features: int = 4,
    steps: int = 150,
    learning_rate: float = 0.02,
    sparsity: float = 0.02,
    pca_centring: str = "centred",
    sae_latents: int | None = None,
    train_rows: int = 320,
    seed: int = 0,
    batch_size: int = 64,
    ioi_fit: str = "rescaled",
    profile: str = "default",
    overwrite: bool = False,
    progress: Progress | None = None,
) -> CausalVariableRun:
    """Learn a featurizer per unit, score it by interchange interventions and write a report folder.

    Args:
        model_dir: a local model folder (config.json, model.safetensors, tokenizer.json); the
            report names it by its folder name, to be found with ``--model-root``.
        dataset_path: the test dataset: a counterfactual dataset document, or a ``.meta.json``.
        out_dir: the folder to write (must not hold a report unless ``overwrite``).
        method: one of :data:`METHODS`.
        variables: causal variables to localise (default: every variable of the dataset).
        layers: layers to try (default: all).
        positions: token positions (``parse_position`` forms; default per task).
        component, heads: the site at each layer.
        counterfactuals: counterfactual sets to score on (default: every set with a kept pair).
        n_features: DAS subspace dimension.
        steps, learning_rate, sparsity: training of DAS and DBM masks (and the SAE's steps).
        pca_centring: ``centred`` or ``uncentred`` (how the PCA featurizer is applied).
        sae_latents: SAE width (default 4·d).
        train_rows: rows of the generated train split (before the token-length filter).
        seed: seed of the train split and of every trainer's generator.
        batch_size: pairs per forward pass.
        ioi_fit: ``paper`` (MIB's coefficients) or ``rescaled`` (their ratios, scaled to the
            model's mean logit difference on the train split).
        profile: the report's profile; its checker is the report's.
        progress: where to report progress (``None``: nowhere).

    Raises:
        ValueError: unusable arguments or inputs, naming them.
        FileExistsError: ``out_dir`` holds a report and ``overwrite`` is false.
    """
    arguments = dict(locals())
    from ..recompute import UnusableInputError

    try:
        with one_thread():
            return _score(**arguments)
    except UnusableInputError as exc:  # a row or a position the method cannot use
        raise ValueError(f"dataset_path: {exc.detail}") from exc


def _score(
    model_dir: Path,
    dataset_path: Path,
    out_dir: Path,
    *,
    method: str,
    variables: Sequence[str] | None,
    layers: Sequence[int] | None,
    positions: Sequence[str] | None,
    component: str,
    heads: Sequence[int] | None,
    counterfactuals: Sequence[str] | None,
    n_features: int,
    steps: int,
    learning_rate: float,
    sparsity: float,
    pca_centring: str,
    sae_latents: int | None,
    train_rows: int,
    seed: int,
    batch_size: int,
    ioi_fit: str,
    profile: str,
    overwrite: bool,
    progress: Progress | None,
) -> CausalVariableRun:
    import torch

    from mibspec.core.profiles import load_profile
    from mibspec.reference_impl.engine import load_model

    from ..engine import Site, check_site, site_dim
    from ..recompute import UnusableInputError

    if method not in METHODS:
        raise ValueError(f"method: expected one of {sorted(METHODS)}, got {method!r}")
    if pca_centring not in ("centred", "uncentred"):
        raise ValueError(f"pca_centring: expected centred or uncentred, got {pca_centring!r}")
    if ioi_fit not in ("paper", "rescaled"):
        raise ValueError(f"ioi_fit: expected paper or rescaled, got {ioi_fit!r}")
    try:
        checker = load_profile(profile)["checker"]
    except KeyError as exc:
        raise ValueError(f"profile: unknown profile {profile!r}") from exc
    model_dir = Path(model_dir)
    model = load_model(model_dir)
    codec = TextCodec(ModelSource(str(model_dir), None, local=True))
    dataset, rows_bytes = _dataset_input(Path(dataset_path))
    task = str(dataset.get("task"))
    if task not in TASK_MECHANISMS:
        raise ValueError(f"dataset_path: the task {task!r} has no built-in causal model")
    rows = _strict_rows(rows_bytes)
    chosen_variables = list(variables or dataset.get("variables", []))
    for name in chosen_variables:
        if name not in dataset.get("variables", []):
            raise ValueError(
                f"variables: {name!r} is not a variable of the dataset {dataset.get('variables')}"
            )
    chosen_layers = list(range(model.n_layers)) if layers is None else list(layers)
    position_specs = list(positions or DEFAULT_POSITIONS.get(task, ("last",)))
    parsed_positions = [(spec, parse_position(spec)) for spec in position_specs]
    locations = []
    for layer in chosen_layers:
        for spec, position in parsed_positions:
            location: dict[str, Any] = {"layer": layer, "component": component, "position": position}
            if component == "attention_heads":
                location["heads"] = list(heads or [])
            site = Site.from_location(location)
            check_site(model, site)
            locations.append((spec, location, site))
    cf_candidates = list(counterfactuals or dataset.get("counterfactual_types", []))
    for cf in cf_candidates:
        if cf not in dataset.get("counterfactual_types", []):
            raise ValueError(f"counterfactuals: {cf!r} is not a counterfactual type of the dataset")

    tokenizer_name = model_dir.name
    train = _train_rows(task, train_rows, seed, codec, tokenizer_name)
    batch = int(batch_size)
    train_eval = Evaluator(model, codec, train, None, checker=checker, batch_size=batch)
    parameters = None
    if task == "ioi":
        parameters = _rescaled_ioi_fit(train_eval) if ioi_fit == "rescaled" else None
    causal_doc = causal_model_document(task, parameters)
    if task == "ioi" and ioi_fit == "rescaled":
        causal_doc["description"] += (
            " Coefficients: the MIB fit (0.069, 0.687, 2.018) scaled so that the unintervened prediction "
            "equals the model's mean logit difference on the correctly answered prompts of the train split."
        )
    assert not check_causal_model(causal_doc)
    train_eval.causal_model = causal_doc
    test_eval = Evaluator(model, codec, rows, causal_doc, checker=checker, batch_size=batch)
    metric = "mse" if TASK_MECHANISMS[task] == "ioi_linear" else "iia"
    for evaluator in (train_eval, test_eval):
        evaluator.register_sites([site for _, _, site in locations])
        evaluator.prefilter(cf_candidates)

    # counterfactual sets with at least one kept pair, per variable (same for every unit)
    probe = {"rule": "last"}
    sets: dict[str, list[str]] = {}
    for name in chosen_variables:
        sets[name] = [cf for cf in cf_candidates if test_eval.pairs(name, metric, cf, probe, "probe")]
        if not sets[name]:
            raise ValueError(f"variables: no counterfactual set keeps a pair for {name!r}")

    folder = OutputFolder(Path(out_dir), overwrite=overwrite, inputs=input_files([model_dir, dataset_path]))
    created = created_timestamp()
    provenance = _provenance(created)
    provenance["command"] = "mibspec score causal-variable"
    n_units = len(chosen_variables) * len(locations)
    done = start_task(progress, f"{METHODS[method]['name']}: training and scoring {n_units} units", n_units)
    artifacts: list[dict[str, Any]] = []
    claims = []
    finished = 0
    for v_index, name in enumerate(chosen_variables):
        units: list[dict[str, Any]] = []
        for l_index, (spec, location, site) in enumerate(locations):
            unit_seed = seed * 1_000_003 + v_index * 10_007 + l_index
            generator = torch.Generator().manual_seed(unit_seed)
            d = site_dim(model, site)
            stem = f"{method}_{name}_l{location['layer']}_{_slug(spec)}".lower()
            doc, tensors = _featurizer(
                method,
                d,
                location,
                train_eval,
                name,
                metric,
                sets[name],
                model,
                site,
                generator,
                n_features=n_features,
                steps=steps,
                learning_rate=learning_rate,
                sparsity=sparsity,
                pca_centring=pca_centring,
                sae_latents=sae_latents,
                batch_size=min(batch, 32),
            )
            doc["description"] = (
                f"{METHODS[method]['name']} featurizer for {name} at {_unit_id(location, spec)} "
                f"on {model_dir.name}."
            )
            if tensors:
                folder.safetensors(f"{stem}.safetensors", tensors)
                doc["weights"] = {
                    key: {
                        "artifact": "weights",
                        "tensor": key,
                        "shape": list(value.shape),
                        "dtype": "float32",
                    }
                    for key, value in sorted(tensors.items())
                }
                doc["artifacts"] = [
                    folder.artifact("weights", "weights", f"{stem}.safetensors", "application/x-safetensors")
                ]
            doc["provenance"] = provenance
            folder.json(f"{stem}.json", doc)
            ident = stem.replace("_", "-")
            artifacts.append(
                folder.artifact(ident, "featurizer", f"{stem}.json", "application/json", kind="featurizer")
            )
            try:
                featurizer = build_featurizer(model, doc, tensors, "featurizer")
                result = test_eval.score_unit(name, metric, location, featurizer, sets[name], "unit")
            except UnusableInputError as exc:
                raise ValueError(f"dataset_path: {exc.detail}") from exc
            units.append(
                {
                    "id": _unit_id(location, spec),
                    "location": location,
                    "featurizer": ident,
                    "scores": result.scores,
                    "n_examples": result.n_examples,
                }
            )
            finished += 1
            done(finished)
        better: Better = "lower" if metric == "mse" else "higher"
        table: dict[CellKey, float] = {
            (cf, unit["location"]["layer"], unit["id"]): value
            for unit in units
            for cf, value in unit["scores"].items()
        }
        aggregate = aggregate_scores(table, better=better)
        claims.append(
            {
                "name": name,
                "metric": metric,
                "better": better,
                "units": units,
                "per_layer": {str(layer): value for layer, value in aggregate.per_layer.items()},
                "average": aggregate.average,
                "highest": aggregate.highest,
            }
        )

    folder.json("causal_model.json", {**causal_doc, "provenance": provenance})
    causal_entry = folder.artifact(
        "causal-model", "causal_model", "causal_model.json", "application/json", kind="causal_model"
    )
    folder.write("dataset.jsonl", rows_bytes)
    dataset_copy = dict(dataset)
    dataset_copy["causal_model"] = "causal-model"
    dataset_copy["artifacts"] = [
        folder.artifact(dataset["examples"], "dataset", "dataset.jsonl", "application/jsonl", rows=len(rows)),
        causal_entry,
    ]
    dataset_copy.setdefault("provenance", provenance)
    folder.json("dataset.json", dataset_copy)
    info = METHODS[method]
    hyper: dict[str, Any] = {
        "layers": chosen_layers,
        "positions": position_specs,
        "component": component,
        "train_split_rows": len(train),
    }
    if component == "attention_heads":
        hyper["heads"] = list(heads or [])
    if method == "das":
        hyper |= {"n_features": n_features, "steps": steps, "learning_rate": learning_rate}
    if method in ("dbm", "pca", "sae"):
        hyper |= {"mask_steps": steps, "learning_rate": learning_rate, "sparsity": sparsity}
    if method == "pca":
        hyper["pca_centring"] = pca_centring
    if method == "sae":
        hyper |= {"sae_latents": sae_latents or 4 * model.d_model, "sae_steps": steps}
    method_block: dict[str, Any] = {
        "name": info["name"],
        "version": "1.0",
        "description": info["description"],
        "hyperparameters": hyper,
    }
    if "citation" in info:
        method_block["citation"] = info["citation"]
    mse_note = (
        " IOI is scored by the mean squared error of the logit difference against the causal model's target: "
        "lower is better, so per layer and Highest take the minimum."
        if metric == "mse"
        else ""
    )
    report = {
        "spec_version": SPEC_VERSION,
        "kind": "report",
        "track": "causal_variable",
        "profile": profile,
        "title": f"{info['name']} featurizers for the {task} variables of {model_dir.name}",
        "description": f"Featurizers trained on {len(train)} generated train rows (seed {seed}), scored by "
        f"interchange interventions on the {dataset.get('split')} rows." + mse_note,
        "method": method_block,
        "task": {
            "name": task,
            "dataset": "dataset",
            **({"split": dataset["split"]} if dataset.get("split") else {}),
            "n_examples": len(rows),
        },
        "seeds": [
            {"purpose": "train split generation", "value": seed},
            {
                "purpose": "featurizer initialisation and batch order "
                "(per unit: seed·1000003 + variable·10007 + unit)",
                "value": seed,
            },
        ],
        "model": _model_ref(model_dir, model),
        "settings": {
            "intervention": "interchange",
            "checker": checker,
            "example_filter": "model_correct_on_base_and_counterfactuals",
            "batch_size": batch,
            "causal_model": "causal-model",
        },
        "claims": {"variables": claims},
        "artifacts": [
            folder.artifact(
                "dataset", "dataset", "dataset.json", "application/json", kind="counterfactual_dataset"
            ),
            causal_entry,
            *artifacts,
        ],
        "provenance": provenance,
    }
    folder.json("report.json", report)
    return CausalVariableRun(
        folder.root / "report.json",
        {c["name"]: c["average"] for c in claims},
        {c["name"]: c["highest"] for c in claims},
    )


def _slug(spec: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in spec).strip("-")


def _featurizer(
    method: str,
    d: int,
    location: dict[str, Any],
    evaluator: Evaluator,
    variable: str,
    metric: str,
    cf_sets: Sequence[str],
    model: Any,
    site: Any,
    generator: Any,
    *,
    n_features: int,
    steps: int,
    learning_rate: float,
    sparsity: float,
    pca_centring: str,
    sae_latents: int | None,
    batch_size: int,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """One featurizer document (without description, artifacts, provenance) and its tensors."""
    from ..engine import TorchFeaturizer

    doc: dict[str, Any] = {
        "spec_version": SPEC_VERSION,
        "kind": "featurizer",
        "location": location,
        "input_dim": d,
    }
    if method == "full_vector":
        doc |= {"type": "identity", "n_features": d, "error": "add_base_error"}
        return doc, {}
    data = training_pairs(evaluator, variable, metric, location, cf_sets)
    common = {
        "steps": steps,
        "learning_rate": learning_rate,
        "batch_size": batch_size,
        "generator": generator,
    }
    if method == "das":
        rotation = train_das(model, site, data, n_features=n_features, **common)
        doc |= {
            "type": "subspace",
            "n_features": n_features,
            "feature_indices": list(range(n_features)),
            "error": "add_base_error",
        }
        return doc, {"rotation": rotation}
    tensors: dict[str, np.ndarray] = {}
    if method == "dbm":
        doc |= {"type": "identity", "n_features": d, "error": "add_base_error"}
    else:
        prompts = [(r, "base") for r in range(len(evaluator.rows))]
        activations = collect_activations(evaluator, location, prompts)
        if method == "pca":
            tensors = fit_pca(activations, d)
            doc |= {"type": "pca", "n_features": d, "pca_centring": pca_centring, "error": "add_base_error"}
        else:
            latents = sae_latents or 4 * d
            tensors = fit_sae(
                activations, latents, steps=steps, learning_rate=learning_rate, l1=1e-3, generator=generator
            )
            doc |= {"type": "sae", "n_features": latents, "sae_activation": "relu", "error": "add_base_error"}
    featurizer = TorchFeaturizer(doc, tensors)
    indices = train_mask(model, site, data, featurizer, sparsity=sparsity, **common)
    doc["feature_indices"] = indices
    return doc, tensors
