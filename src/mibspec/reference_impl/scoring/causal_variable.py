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
scored on the given dataset. At position ``all`` (MIB's IOI ``Token:all``) a training pair
writes every base token, each from the counterfactual's same token, in one pass, as scoring
does; PCA and the SAE are fitted on every token's activation. A joint unit
(``joint_heads``, MV-10) writes several attention heads in one forward pass, each head with
its own featurizer, as MIB's IOI baselines score their ``--heads_list``; the trained methods
train the heads' featurizers together through that pass (one DAS rotation, or one mask, per
head; PCA and the SAE fitted per head). The written folder holds ``report.json``,
``dataset.json`` + ``dataset.jsonl``, ``causal_model.json`` and one featurizer document +
safetensors file per unit (per site of a joint unit); the numbers come from the evaluator
the recompute stage uses, run on the stored float32 weights, so that ``mibspec verify``
reproduces them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np

from mibspec.core.integers import parse_int
from mibspec.core.outputs import input_files
from mibspec.core.progress import Progress, start_task
from mibspec.core.strict_json import DEFAULT_LIMITS
from mibspec.documents import CausalVariableReport, document_bytes, dump
from mibspec.documents.common import Artifact, Citation, Method, Provenance, Seed, model_ref
from mibspec.documents.kinds import CounterfactualDataset, Featurizer, Location, TensorRef
from mibspec.documents.report import (
    CausalVariableClaims,
    CausalVariableSettings,
    JointSite,
    TaskRef,
    VariableClaims,
)
from mibspec.metrics.causal_models import (
    TASK_MECHANISMS,
    causal_model_document,
    check_causal_model,
    ioi_logit_names,
)
from mibspec.metrics.causal_variable import Better

from ..recompute import ModelSource
from ..recompute.causal_variable import Evaluator, TextCodec, aggregate_units, build_featurizer
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

Checker = Literal["exact_token", "substring"]

__all__ = [
    "DEFAULT_POSITIONS",
    "METHODS",
    "CausalVariableOptions",
    "CausalVariableResult",
    "CausalVariableRun",
    "CausalVariableSetup",
    "TrainedFeaturizer",
    "build_report",
    "compute_causal_variable",
    "parse_joint_head",
    "parse_position",
    "prepare_causal_variable",
    "run_causal_variable",
    "score_causal_variable",
]

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
    best: dict[str, float]


def parse_position(spec: str) -> dict[str, Any]:
    """A ``TokenPosition`` object from a short text form.

    ``last``; ``index:N``; ``first:TEXT`` / ``lastocc:TEXT`` (first / last occurrence of
    TEXT's tokens); ``slot:NAME[:OCCURRENCE]`` (a template placeholder) and
    ``value:NAME[:OCCURRENCE]`` (a mention of the slot's value); ``all`` (every token, MIB's
    IOI ``Token:all``).

    Raises:
        ValueError: an unknown form (naming it).
    """
    kind, _, rest = spec.partition(":")
    if kind in ("last", "all") and not rest:
        return {"rule": kind}
    if kind == "index" and (index := parse_int(rest, signed=True)) is not None:
        return {"rule": "index", "index": index}
    if kind in ("first", "lastocc") and rest:
        return {"rule": "first_occurrence" if kind == "first" else "last_occurrence", "token": rest}
    if kind in ("slot", "value") and rest:
        name, occurrence = rest, None
        head, sep, tail = rest.rpartition(":")
        if sep and (number := parse_int(tail, signed=True)) is not None:
            name, occurrence = head, number
        out: dict[str, Any] = {"rule": "slot", "slot": name}
        if occurrence is not None:
            out["occurrence"] = occurrence
        if kind == "value":
            out["match"] = "value"
        return out
    raise ValueError(
        "position: expected last, all, index:N, first:TEXT, lastocc:TEXT, slot:NAME[:K] or value:NAME[:K]; "
        f"got {spec!r}"
    )


def parse_joint_head(spec: str) -> tuple[int, int]:
    """A ``(layer, head)`` site of a joint unit from ``LAYER:HEAD`` (``7:3``).

    Raises:
        ValueError: another form (naming it).
    """
    layer_text, sep, head_text = spec.partition(":")
    layer, head = parse_int(layer_text), parse_int(head_text)
    if not sep or layer is None or head is None:
        raise ValueError(f"joint_heads: expected LAYER:HEAD with two non-negative integers, got {spec!r}")
    return layer, head


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


@dataclass(frozen=True)
class CausalVariableOptions:
    """What a causal-variable run is asked to do (the command line's options).

    Attributes:
        model_dir: a local model folder (config.json, model.safetensors, tokenizer.json); the
            report names it by its folder name, to be found with ``--model-root``.
        dataset_path: the test dataset: a counterfactual dataset document, or a ``.meta.json``.
        out_dir: the folder to write (must not hold a report unless ``overwrite``).
        method: one of :data:`METHODS`.
        variables: causal variables to localise (default: every variable of the dataset).
        layers: layers to try (default: all).
        positions: token positions (``parse_position`` forms; default per task).
        component, heads: the site at each layer.
        joint_heads: ``(layer, head)`` pairs scored together as one joint unit per position
            and variable (MV-10), each head a site with its own featurizer, the sites'
            featurizers trained together; instead of ``layers`` and ``heads``, with
            ``component`` ``attention_heads``.
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
        overwrite: replace a report already in ``out_dir``.
        device: where the model computes and featurizers train (``cpu``, ``cuda:N``, ``mps``).
        max_model_bytes: the largest model loaded, its float32 parameters (as ``verify
            --max-model-bytes`` bounds the recomputation).
    """

    model_dir: Path
    dataset_path: Path
    out_dir: Path
    method: str = "das"
    variables: Sequence[str] | None = None
    layers: Sequence[int] | None = None
    positions: Sequence[str] | None = None
    component: str = "residual_post"
    heads: Sequence[int] | None = None
    joint_heads: Sequence[tuple[int, int]] | None = None
    counterfactuals: Sequence[str] | None = None
    n_features: int = 4
    steps: int = 150
    learning_rate: float = 0.02
    sparsity: float = 0.02
    pca_centring: str = "centred"
    sae_latents: int | None = None
    train_rows: int = 320
    seed: int = 0
    batch_size: int = 64
    ioi_fit: str = "rescaled"
    profile: str = "default"
    overwrite: bool = False
    device: str = "cpu"
    max_model_bytes: int = DEFAULT_LIMITS.max_model_bytes

    def checker(self) -> str:
        """The answer checker of the options' profile, after checking the choices.

        Raises:
            ValueError: an unknown method, PCA centring, IOI fit or profile (naming it), or
                joint heads the run cannot score.
        """
        from mibspec.core.profiles import load_profile

        if self.method not in METHODS:
            raise ValueError(f"method: expected one of {sorted(METHODS)}, got {self.method!r}")
        if self.pca_centring not in ("centred", "uncentred"):
            raise ValueError(f"pca_centring: expected centred or uncentred, got {self.pca_centring!r}")
        if self.ioi_fit not in ("paper", "rescaled"):
            raise ValueError(f"ioi_fit: expected paper or rescaled, got {self.ioi_fit!r}")
        if self.joint_heads is not None:
            self._check_joint_heads()
        try:
            return str(load_profile(self.profile)["checker"])
        except KeyError as exc:
            raise ValueError(f"profile: unknown profile {self.profile!r}") from exc

    def _check_joint_heads(self) -> None:
        """Refuse a joint unit the run cannot score, before anything is loaded."""
        pairs = list(self.joint_heads or ())
        if self.component != "attention_heads":
            raise ValueError(
                f"joint_heads: the sites of a joint unit are attention heads; component is {self.component!r}"
            )
        if self.layers is not None or self.heads is not None:
            raise ValueError(
                "joint_heads: each pair gives its site's layer and head; leave out layers and heads"
            )
        if len(set(pairs)) != len(pairs) or len(pairs) < 2:
            raise ValueError(
                f"joint_heads: a joint unit needs at least two distinct (layer, head) pairs, got {pairs}"
            )


@dataclass(frozen=True)
class _Unit:
    """A site to train a featurizer at: its position text, its location and its engine site;
    for a joint unit, its further sites at the same position (MV-10)."""

    spec: str
    location: dict[str, Any]
    site: Any
    joint: tuple[_Unit, ...] = ()


@dataclass
class CausalVariableSetup:
    """The loaded and checked inputs of a run: model, rows, units, evaluators, causal model."""

    model: Any
    dataset: CounterfactualDataset  # its artifact list left out
    rows_bytes: bytes
    rows: list[Any]
    task: str
    checker: str
    variables: list[str]
    layers: list[int]
    position_specs: list[str]
    units: list[_Unit]
    counterfactuals: list[str]
    train: list[dict[str, Any]] = field(default_factory=list)
    train_eval: Any = None
    test_eval: Any = None
    causal_doc: dict[str, Any] = field(default_factory=dict)
    metric: str = "iia"
    sets: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainedFeaturizer:
    """One unit's featurizer: the file stem, the artifact id, the document (without description,
    weights, artifacts and provenance) and its tensors."""

    variable: str
    unit: _Unit
    stem: str
    ident: str
    document: Featurizer
    tensors: dict[str, np.ndarray]


@dataclass(frozen=True)
class CausalVariableResult:
    """What the compute step found: one claim per variable (units, per layer, Average, best)."""

    claims: list[dict[str, Any]]


def score_causal_variable(
    model_dir: Path,
    dataset_path: Path,
    out_dir: Path,
    *,
    progress: Progress | None = None,
    **settings: Any,
) -> CausalVariableRun:
    """Learn a featurizer per unit, score it by interchange interventions and write a report folder.

    ``settings`` are the fields of :class:`CausalVariableOptions` after the three paths.

    Raises:
        ValueError: unusable arguments or inputs, naming them.
        FileExistsError: ``out_dir`` holds a report and ``overwrite`` is false.
    """
    options = CausalVariableOptions(Path(model_dir), Path(dataset_path), Path(out_dir), **settings)
    return run_causal_variable(options, progress)


def run_causal_variable(
    options: CausalVariableOptions, progress: Progress | None = None
) -> CausalVariableRun:
    """:func:`score_causal_variable` for an options object: compute, build the documents, write.

    Raises:
        ValueError: unusable arguments or inputs, naming them.
        FileExistsError: ``out_dir`` holds a report and ``overwrite`` is false.
    """
    from ..recompute import UnusableInputError

    try:
        with one_thread():
            setup = prepare_causal_variable(options)
            folder = OutputFolder(
                options.out_dir,
                overwrite=options.overwrite,
                inputs=input_files([options.model_dir, options.dataset_path]),
            )
            provenance = _provenance(created_timestamp())
            provenance["command"] = "mibspec score causal-variable"

            artifacts: list[dict[str, Any]] = []

            def write(trained: TrainedFeaturizer) -> None:
                artifacts.append(_write_featurizer(folder, options, trained, provenance))

            result = compute_causal_variable(options, setup, write, progress)
            return _write_report(folder, options, setup, result, artifacts, provenance)
    except UnusableInputError as exc:  # a row or a position the method cannot use
        raise ValueError(f"dataset_path: {exc.detail}") from exc


# --------------------------------------------------------------------------- inputs


def prepare_causal_variable(options: CausalVariableOptions) -> CausalVariableSetup:
    """Load the model and the dataset, check the options against them, build the evaluators.

    Raises:
        ValueError: unusable arguments or inputs, naming them.
    """
    from mibspec.reference_impl.engine import load_model

    checker = options.checker()
    model = load_model(options.model_dir, device=options.device, max_bytes=options.max_model_bytes)
    codec = TextCodec(ModelSource(str(options.model_dir), None, local=True))
    dataset, rows_bytes = _dataset_input(options.dataset_path)
    task = dataset.task
    if task not in TASK_MECHANISMS:
        raise ValueError(f"dataset_path: the task {task!r} has no built-in causal model")
    rows = _strict_rows(rows_bytes)
    variables = _chosen(options.variables, dataset.variables, "variables", "a variable")
    if options.joint_heads is not None:
        layers = sorted({layer for layer, _ in options.joint_heads})
    else:
        layers = list(range(model.n_layers)) if options.layers is None else list(options.layers)
    position_specs = list(options.positions or DEFAULT_POSITIONS.get(task, ("last",)))
    units = _units(options, model, layers, position_specs)
    counterfactuals = list(options.counterfactuals or dataset.counterfactual_types)
    for cf in counterfactuals:
        if cf not in dataset.counterfactual_types:
            raise ValueError(f"counterfactuals: {cf!r} is not a counterfactual type of the dataset")
    setup = CausalVariableSetup(
        model,
        dataset,
        rows_bytes,
        rows,
        task,
        checker,
        variables,
        layers,
        position_specs,
        units,
        counterfactuals,
    )
    _evaluators(options, setup, codec)
    return setup


def _chosen(asked: Sequence[str] | None, known: Sequence[str], option: str, what: str) -> list[str]:
    chosen = list(asked or known)
    for name in chosen:
        if name not in known:
            raise ValueError(f"{option}: {name!r} is not {what} of the dataset {known}")
    return chosen


def _units(
    options: CausalVariableOptions, model: Any, layers: Sequence[int], position_specs: Sequence[str]
) -> list[_Unit]:
    from ..engine import Site, check_site

    parsed_positions = [(spec, parse_position(spec)) for spec in position_specs]
    if options.joint_heads is not None:
        return [
            _joint_unit(model, options.joint_heads, spec, position) for spec, position in parsed_positions
        ]
    units = []
    for layer in layers:
        for spec, position in parsed_positions:
            location: dict[str, Any] = {"layer": layer, "component": options.component, "position": position}
            if options.component == "attention_heads":
                location["heads"] = list(options.heads or [])
            site = Site.from_location(location)
            check_site(model, site)
            units.append(_Unit(spec, location, site))
    return units


def _joint_unit(model: Any, pairs: Sequence[tuple[int, int]], spec: str, position: dict[str, Any]) -> _Unit:
    """One joint unit of attention heads at a position: the site of lowest (layer, head) is its
    location (the layer it counts under, MV-10), the others its further sites."""
    from ..engine import Site, check_site

    sites = []
    for layer, head in sorted(pairs):
        location = {"layer": layer, "component": "attention_heads", "position": position, "heads": [head]}
        site = Site.from_location(location)
        try:
            check_site(model, site)
        except ValueError as exc:
            raise ValueError(f"joint_heads: ({layer}, {head}): {exc}") from exc
        sites.append(_Unit(spec, location, site))
    first, *further = sites
    return _Unit(spec, first.location, first.site, tuple(further))


def _evaluators(options: CausalVariableOptions, setup: CausalVariableSetup, codec: TextCodec) -> None:
    """The train and test evaluators, the causal model, the metric and the counterfactual sets
    with at least one kept pair per variable (the same for every unit)."""
    task, batch = setup.task, int(options.batch_size)
    setup.train = _train_rows(task, options.train_rows, options.seed, codec, options.model_dir.name)
    train_eval = Evaluator(setup.model, codec, setup.train, None, checker=setup.checker, batch_size=batch)
    parameters = None
    if task == "ioi":
        parameters = _rescaled_ioi_fit(train_eval) if options.ioi_fit == "rescaled" else None
    causal_doc = causal_model_document(task, parameters)
    if task == "ioi" and options.ioi_fit == "rescaled":
        causal_doc["description"] += (
            " Coefficients: the MIB fit (0.069, 0.687, 2.018) scaled so that the unintervened prediction "
            "equals the model's mean logit difference on the correctly answered prompts of the train split."
        )
    assert not check_causal_model(causal_doc)
    train_eval.causal_model = causal_doc
    test_eval = Evaluator(setup.model, codec, setup.rows, causal_doc, checker=setup.checker, batch_size=batch)
    setup.metric = "mse" if TASK_MECHANISMS[task] == "ioi_linear" else "iia"
    for evaluator in (train_eval, test_eval):
        evaluator.register_sites([site.site for unit in setup.units for site in (unit, *unit.joint)])
        evaluator.prefilter(setup.counterfactuals)
    setup.train_eval, setup.test_eval, setup.causal_doc = train_eval, test_eval, causal_doc
    probe = {"rule": "last"}
    for name in setup.variables:
        setup.sets[name] = [
            cf for cf in setup.counterfactuals if test_eval.pairs(name, setup.metric, cf, probe, "probe")
        ]
        if not setup.sets[name]:
            raise ValueError(f"variables: no counterfactual set keeps a pair for {name!r}")


# --------------------------------------------------------------------------- compute


def compute_causal_variable(
    options: CausalVariableOptions,
    setup: CausalVariableSetup,
    on_featurizer: Callable[[TrainedFeaturizer], None],
    progress: Progress | None = None,
) -> CausalVariableResult:
    """Train a featurizer per (variable, unit), hand it to ``on_featurizer`` (which writes it, so
    that only one unit's tensors are held at a time), score it and aggregate each variable."""
    import torch

    n_units = len(setup.variables) * len(setup.units)
    done = start_task(
        progress, f"{METHODS[options.method]['name']}: training and scoring {n_units} units", n_units
    )
    claims = []
    finished = 0
    better: Better = "lower" if setup.metric == "mse" else "higher"
    for v_index, name in enumerate(setup.variables):
        units: list[dict[str, Any]] = []
        for l_index, unit in enumerate(setup.units):
            unit_seed = options.seed * 1_000_003 + v_index * 10_007 + l_index
            generator = torch.Generator().manual_seed(unit_seed)
            # a joint unit: one featurizer per site, each named by its head, trained together
            trained = _train_unit(options, setup, name, unit, generator)
            for each in trained:
                on_featurizer(each)
            units.append(_score_unit(setup, trained[0], trained[1:]))
            finished += 1
            done(finished)
        aggregate = aggregate_units(((u["id"], u["location"]["layer"], u["scores"]) for u in units), better)
        claims.append(
            {
                "name": name,
                "metric": setup.metric,
                "better": better,
                "units": units,
                "per_layer": {str(layer): value for layer, value in aggregate.per_layer.items()},
                "average": aggregate.average,
                "best": aggregate.best,
            }
        )
    return CausalVariableResult(claims)


def _train_unit(
    options: CausalVariableOptions,
    setup: CausalVariableSetup,
    variable: str,
    unit: _Unit,
    generator: Any,
) -> list[TrainedFeaturizer]:
    """A unit's featurizer, or for a joint unit one per site (its location's first), each
    file named by its head."""
    sites = (unit, *unit.joint)
    out = []
    featurizers = _featurizers(options, setup, variable, unit, generator)
    for site, (doc, tensors) in zip(sites, featurizers, strict=True):
        where = f"l{site.location['layer']}" + (f"_h{site.location['heads'][0]}" if unit.joint else "")
        stem = f"{options.method}_{variable}_{where}_{_slug(site.spec)}".lower()
        out.append(TrainedFeaturizer(variable, site, stem, stem.replace("_", "-"), doc, tensors))
    return out


def _score_unit(
    setup: CausalVariableSetup, trained: TrainedFeaturizer, further: Sequence[TrainedFeaturizer] = ()
) -> dict[str, Any]:
    """The claim's entry for a trained unit, scored on the test rows; ``further``: the
    featurizers of a joint unit's further sites, written in the same pass (MV-10)."""
    from ..recompute import UnusableInputError

    name, location = trained.variable, trained.unit.location
    sites = [
        JointSite(
            layer=each.unit.location["layer"],
            component=each.unit.location["component"],
            heads=each.unit.location.get("heads"),
            featurizer=each.ident,
        )
        for each in further
    ]

    def torch_featurizer(each: TrainedFeaturizer) -> Any:
        return build_featurizer(setup.model, dump(each.document), each.tensors, "featurizer")

    try:
        joint = [(dump(site), torch_featurizer(each)) for site, each in zip(sites, further, strict=True)]
        result = setup.test_eval.score_unit(
            name, setup.metric, location, torch_featurizer(trained), setup.sets[name], "unit", joint=joint
        )
    except UnusableInputError as exc:
        raise ValueError(f"dataset_path: {exc.detail}") from exc
    entry: dict[str, Any] = {
        "id": "+".join(_unit_id(each.unit.location, each.unit.spec) for each in (trained, *further)),
        "location": location,
        "featurizer": trained.ident,
        "scores": result.scores,
        "n_examples": result.n_examples,
    }
    if sites:
        entry["joint_sites"] = sites
    return entry


# --------------------------------------------------------------------------- documents and writing


def _write_featurizer(
    folder: OutputFolder,
    options: CausalVariableOptions,
    trained: TrainedFeaturizer,
    provenance: dict[str, Any],
) -> dict[str, Any]:
    """Write the featurizer document of a unit (and its safetensors file, if it has tensors);
    return the report's artifact entry for it."""
    stem, tensors = trained.stem, trained.tensors
    fields: dict[str, Any] = {
        "description": f"{METHODS[options.method]['name']} featurizer for {trained.variable} at "
        f"{_unit_id(trained.unit.location, trained.unit.spec)} on {options.model_dir.name}.",
        "provenance": Provenance.model_validate(provenance),
    }
    if tensors:
        folder.safetensors(f"{stem}.safetensors", tensors)
        fields["weights"] = {
            key: TensorRef(artifact="weights", tensor=key, shape=list(value.shape), dtype="float32")
            for key, value in sorted(tensors.items())
        }
        weights = folder.artifact("weights", "weights", f"{stem}.safetensors", "application/x-safetensors")
        fields["artifacts"] = [Artifact.model_validate(weights)]
    folder.write(f"{stem}.json", document_bytes(trained.document.model_copy(update=fields)))
    return folder.artifact(trained.ident, "featurizer", f"{stem}.json", "application/json", kind="featurizer")


def _write_report(
    folder: OutputFolder,
    options: CausalVariableOptions,
    setup: CausalVariableSetup,
    result: CausalVariableResult,
    featurizers: list[dict[str, Any]],
    provenance: dict[str, Any],
) -> CausalVariableRun:
    """Write the causal model, the dataset and the report; the featurizers are written already."""
    folder.json("causal_model.json", {**setup.causal_doc, "provenance": provenance})
    causal_entry = folder.artifact(
        "causal-model", "causal_model", "causal_model.json", "application/json", kind="causal_model"
    )
    folder.write("dataset.jsonl", setup.rows_bytes)
    folder.write("dataset.json", document_bytes(_dataset_document(folder, setup, causal_entry, provenance)))
    artifacts = [
        folder.artifact(
            "dataset", "dataset", "dataset.json", "application/json", kind="counterfactual_dataset"
        ),
        causal_entry,
        *featurizers,
    ]
    report = build_report(options, setup, result, artifacts, provenance)
    folder.write("report.json", document_bytes(report))
    claims = result.claims
    return CausalVariableRun(
        folder.root / "report.json",
        {c["name"]: c["average"] for c in claims},
        {c["name"]: c["best"] for c in claims},
    )


def _dataset_document(
    folder: OutputFolder, setup: CausalVariableSetup, causal_entry: dict[str, Any], provenance: dict[str, Any]
) -> CounterfactualDataset:
    """The dataset document written beside the report (``dataset.jsonl`` is written already)."""
    dataset = setup.dataset
    rows = folder.artifact(
        dataset.examples, "dataset", "dataset.jsonl", "application/jsonl", rows=len(setup.rows)
    )
    return dataset.model_copy(
        update={
            "causal_model": "causal-model",
            "artifacts": [Artifact.model_validate(rows), Artifact.model_validate(causal_entry)],
            "provenance": dataset.provenance or Provenance.model_validate(provenance),
        }
    )


def _method_block(options: CausalVariableOptions, setup: CausalVariableSetup) -> Method:
    """The report's ``method``: name, description, citation and the hyperparameters that apply."""
    method, steps, learning_rate = options.method, options.steps, options.learning_rate
    hyper: dict[str, Any] = {
        "layers": setup.layers,
        "positions": setup.position_specs,
        "component": options.component,
        "train_split_rows": len(setup.train),
    }
    if options.joint_heads is not None:
        hyper["joint_heads"] = [[layer, head] for layer, head in sorted(options.joint_heads)]
    elif options.component == "attention_heads":
        hyper["heads"] = list(options.heads or [])
    if method == "das":
        hyper |= {"n_features": options.n_features, "steps": steps, "learning_rate": learning_rate}
    if method in ("dbm", "pca", "sae"):
        hyper |= {"mask_steps": steps, "learning_rate": learning_rate, "sparsity": options.sparsity}
    if method == "pca":
        hyper["pca_centring"] = options.pca_centring
    if method == "sae":
        hyper |= {"sae_latents": options.sae_latents or 4 * setup.model.d_model, "sae_steps": steps}
    info = METHODS[method]
    citation: dict[str, Any] = (
        {"citation": Citation.model_validate(info["citation"])} if "citation" in info else {}
    )
    return Method(
        name=info["name"], version="1.0", description=info["description"], hyperparameters=hyper, **citation
    )


def build_report(
    options: CausalVariableOptions,
    setup: CausalVariableSetup,
    result: CausalVariableResult,
    artifacts: list[dict[str, Any]],
    provenance: dict[str, Any],
) -> CausalVariableReport:
    """The report document of a run, given the artifact entries of the files written beside it."""
    dataset, seed, n_train = setup.dataset, options.seed, len(setup.train)
    mse_note = (
        " IOI is scored by the mean squared error of the logit difference against the causal model's target: "
        "lower is better, so per layer and best take the minimum."
        if setup.metric == "mse"
        else ""
    )
    return CausalVariableReport(
        profile=options.profile,
        title=f"{METHODS[options.method]['name']} featurizers for the {setup.task} variables of "
        f"{options.model_dir.name}",
        description=f"Featurizers trained on {n_train} generated train rows (seed {seed}), scored "
        f"by interchange interventions on the {dataset.split} rows." + mse_note,
        method=_method_block(options, setup),
        task=TaskRef(name=setup.task, dataset="dataset", split=dataset.split, n_examples=len(setup.rows)),
        seeds=[
            Seed(purpose="train split generation", value=seed),
            Seed(
                purpose="featurizer initialisation and batch order "
                "(per unit: seed·1000003 + variable·10007 + unit)",
                value=seed,
            ),
        ],
        model=model_ref(_model_ref(options.model_dir, setup.model)),
        settings=CausalVariableSettings(
            intervention="interchange",
            checker=cast(Checker, setup.checker),  # the profile's checker, already validated
            example_filter="model_correct_on_base_and_counterfactuals",
            batch_size=int(options.batch_size),
            causal_model="causal-model",
        ),
        claims=CausalVariableClaims(
            variables=[VariableClaims.model_validate(claim) for claim in result.claims]
        ),
        artifacts=[Artifact.model_validate(entry) for entry in artifacts],
        provenance=Provenance.model_validate(provenance),
    )


def _slug(spec: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in spec).strip("-")


def _featurizers(
    options: CausalVariableOptions,
    setup: CausalVariableSetup,
    variable: str,
    unit: _Unit,
    generator: Any,
) -> list[tuple[Featurizer, dict[str, np.ndarray]]]:
    """The featurizer document (without description, weights, artifacts, provenance) and the
    tensors of each site of a unit: its location, then a joint unit's further sites, trained
    together on interventions that write every site in one pass (MV-10)."""
    from ..engine import TorchFeaturizer, site_dim

    method, evaluator = options.method, setup.train_eval
    sites = (unit, *unit.joint)
    shapes = [(Location.model_validate(site.location), site_dim(setup.model, site.site)) for site in sites]
    if method == "full_vector":
        return [(_identity(location, d), {}) for location, d in shapes]
    data = training_pairs(
        evaluator,
        variable,
        setup.metric,
        unit.location,
        setup.sets[variable],
        joint=[site.location for site in unit.joint],
    )
    common = {
        "steps": options.steps,
        "learning_rate": options.learning_rate,
        "batch_size": min(int(options.batch_size), 32),
        "generator": generator,
    }
    engine_sites = [site.site for site in sites]
    if method == "das":
        n = options.n_features
        rotations = train_das(setup.model, engine_sites, data, n_features=n, **common)
        return [
            (
                Featurizer(
                    type="subspace",
                    location=location,
                    input_dim=d,
                    n_features=n,
                    feature_indices=list(range(n)),
                    error="add_base_error",
                ),
                {"rotation": rotation},
            )
            for (location, d), rotation in zip(shapes, rotations, strict=True)
        ]
    bases = [
        _basis(options, setup, site.location, d, generator)
        for site in sites
        for d in [site_dim(setup.model, site.site)]
    ]
    featurizers = [TorchFeaturizer(dump(doc), tensors, device=setup.model.device) for doc, tensors in bases]
    chosen = train_mask(setup.model, engine_sites, data, featurizers, sparsity=options.sparsity, **common)
    return [
        (doc.model_copy(update={"feature_indices": indices}), tensors)
        for (doc, tensors), indices in zip(bases, chosen, strict=True)
    ]


def _identity(location: Location, d: int) -> Featurizer:
    return Featurizer(type="identity", location=location, input_dim=d, n_features=d, error="add_base_error")


def _basis(
    options: CausalVariableOptions, setup: CausalVariableSetup, where: dict[str, Any], d: int, generator: Any
) -> tuple[Featurizer, dict[str, np.ndarray]]:
    """The document (without its mask) and tensors of a masked method's featurizer at a site:
    the identity (DBM), or PCA or an SAE fitted on the train split's base activations there."""
    location = Location.model_validate(where)
    if options.method == "dbm":
        return _identity(location, d), {}
    tensors = _fit_basis(options, setup.train_eval, where, d, generator)
    if options.method == "pca":
        return Featurizer(
            type="pca",
            location=location,
            input_dim=d,
            n_features=d,
            # CausalVariableOptions has checked the value.
            pca_centring=cast(Literal["centred", "uncentred"], options.pca_centring),
            error="add_base_error",
        ), tensors
    return Featurizer(
        type="sae",
        location=location,
        input_dim=d,
        n_features=options.sae_latents or 4 * d,
        sae_activation="relu",
        error="add_base_error",
    ), tensors


def _fit_basis(
    options: CausalVariableOptions, evaluator: Evaluator, location: dict[str, Any], d: int, generator: Any
) -> dict[str, np.ndarray]:
    """The PCA or SAE tensors fitted on the train split's base activations at ``location``
    (at every token of each base prompt for rule ``all``)."""
    prompts = [(r, "base") for r in range(len(evaluator.rows))]
    activations = collect_activations(evaluator, location, prompts)
    if options.method == "pca":
        return fit_pca(activations, d)
    return fit_sae(
        activations,
        options.sae_latents or 4 * d,
        steps=options.steps,
        learning_rate=options.learning_rate,
        l1=1e-3,
        generator=generator,
    )
