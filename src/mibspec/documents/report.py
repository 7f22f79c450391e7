"""The result report: one per (method, model, task), with a claims block per track."""

from __future__ import annotations

from collections.abc import Iterable
from types import UnionType
from typing import Annotated, Any, Literal, Union, cast, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mibspec.core.tracks import TRACKS

from ._base import CURRENT_VERSION, Closed, SpecVersion, versions_from
from .common import (
    Artifact,
    ArtifactRef,
    CausalModelRef,
    CircuitRef,
    ComponentId,
    Extensions,
    FeaturizerRef,
    Method,
    ModelRef,
    NonNegInt,
    PosInt,
    Provenance,
    Seed,
    Uncertainty,
    Unit,
)
from .kinds import Location, TensorRef
from .rounding import Rounding, closed_at, version_branch

__all__ = [
    "CausalBenchReport",
    "CausalVariableReport",
    "CircuitReport",
    "Report",
    "SaliencyReport",
    "report_models",
    "rounded_objects",
    "track_of",
]

Ranking = Literal["signed", "absolute"]


class HubDataset(Closed):
    """A dataset on a hub, pinned to the commit its rows were read at."""

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9_.-]+)?$")
    revision: str = Field(pattern=r"^[0-9a-f]{40}$", description="the full commit hash")


class TaskRef(Closed):
    name: str = Field(min_length=1)
    dataset: ArtifactRef | None = Field(default=None, description="artifact id of the dataset document")
    hub_dataset: HubDataset | None = Field(
        default=None,
        description="the hub dataset the task's rows come from, where the report records no dataset "
        "document (imports); recomputation reads `dataset`",
    )
    split: Literal["train", "validation", "test", "private_test"] | None = None
    counterfactual_type: str | None = Field(
        default=None, description="circuit track: the counterfactual inputs used as the corrupted run"
    )
    n_examples: NonNegInt | None = None


_ROUNDING_DESCRIPTION = (
    "spec 1.1: how the numbers of this object (and the objects in it that declare none) were rounded; "
    "consistency and recomputation then hold within that rounding (SPEC.md C-10)"
)


def _rounding() -> Any:
    return Field(default=None, description=_ROUNDING_DESCRIPTION)


class _ReportBase(Closed):
    """The fields every report starts with. A track narrows ``track`` (which keeps its place),
    then lists its own fields, ``seeds`` among them, and ends with ``artifacts``, ``rounding``,
    ``provenance`` and ``extensions``: the field order is the key order of the reports written."""

    spec_version: SpecVersion = CURRENT_VERSION
    kind: Literal["report"] = "report"
    track: str
    profile: str = Field(default="default", min_length=1, description="conventions profile (profiles/)")
    title: str | None = None
    description: str | None = None
    method: Method
    task: TaskRef


# --- MIB circuit localization --------------------------------------------------------------


class CircuitSettings(Closed):
    ablation: Literal["counterfactual", "mean", "zero", "optimal"] = "counterfactual"
    granularity: Literal["edge", "node", "neuron"] = "edge"
    grid: list[Annotated[float, Field(gt=0, le=1)]] = Field(min_length=2)
    ranking: dict[Literal["cpr", "cmd", "auroc"], Ranking] = Field(
        description="edge ranking used to build the circuits each metric is computed on"
    )
    edge_count_rounding: Literal["floor", "ceil"] = "floor"
    metric: Literal["logit_difference", "probability_difference"] = "logit_difference"
    batch_size: PosInt | None = None
    padding_side: Literal["right", "left"] = "right"
    start_token: Literal["none", "prepend"] | None = Field(
        default=None,
        description="whether the model's start token (config bos_token_id, else eos_token_id) is "
        "prepended to every prompt; absent: the profile's start_token",
    )
    answer_token: Literal["as_written", "without_leading_space"] | None = Field(
        default=None,
        description="which token of each dataset answer the metric reads: the first token of the answer "
        "as written, or of the answer without its leading whitespace (the public loader's bare label); "
        "absent: the profile's answer_token for the task",
    )


class CurvePoint(Closed):
    k: float = Field(gt=0, le=1)
    circuit: NonNegInt | None = Field(
        default=None, description="index of the circuit in the circuit document (needed to recompute)"
    )
    n_edges: NonNegInt | None = Field(
        default=None, description="edges of the point's circuit (K-9: checked against that circuit)"
    )
    weighted_size: float | None = Field(
        default=None,
        ge=0,
        description="the size the profile says a report records (recorded_size: weighted edge count after "
        "pruning) of the point's circuit; only where a circuit row or the circuit document's scores "
        "determine that circuit (K-9)",
    )
    faithfulness: float
    uncertainty: Uncertainty | None = None
    rounding: Rounding | None = _rounding()


class Curve(Closed):
    ranking: Ranking
    points: list[CurvePoint] = Field(min_length=1)


class ScalarClaim(Closed):
    value: float
    uncertainty: Uncertainty | None = None
    rounding: Rounding | None = _rounding()


class AurocClaim(Closed):
    value: Unit
    convention: Literal["mib", "rank"]
    ground_truth: CircuitRef = Field(
        description="circuit document holding the true edge set as its one membership row (C-13)"
    )
    rounding: Rounding | None = _rounding()


class NonNegativeClaim(Closed):
    value: float = Field(ge=0)
    uncertainty: Uncertainty | None = None
    rounding: Rounding | None = _rounding()


class CircuitClaims(Closed):
    circuit: CircuitRef | None = Field(
        default=None, description="artifact id of the circuit document (needed to recompute the curve)"
    )
    n_edges: PosInt = Field(
        description="edge total of the graph universe: that of the circuit document's graph and of the "
        "model's (K-8)"
    )
    m_full: float | None = Field(default=None, description="mean metric of the full model (clean run)")
    m_empty: float | None = Field(
        default=None, description="mean metric of the empty circuit (corrupted run)"
    )
    curves: list[Curve] = Field(min_length=1)
    cpr: ScalarClaim
    cmd: NonNegativeClaim
    auroc: AurocClaim | None = None


class CircuitReport(_ReportBase):
    """MIB circuit localization: faithfulness curve, CPR, CMD (and AUROC)."""

    track: Literal["circuit"] = "circuit"
    seeds: list[Seed] = Field(default_factory=list)
    model: ModelRef
    settings: CircuitSettings
    claims: CircuitClaims
    artifacts: list[Artifact] = Field(default_factory=list)
    rounding: Rounding | None = _rounding()
    provenance: Provenance
    extensions: Extensions | None = None


# --- MIB causal variable localization ------------------------------------------------------


class CausalVariableSettings(Closed):
    intervention: Literal["interchange"] = "interchange"
    checker: Literal["exact_token", "substring"] = "exact_token"
    example_filter: Literal["model_correct_on_base_and_counterfactuals", "none"] = (
        "model_correct_on_base_and_counterfactuals"
    )
    batch_size: PosInt | None = None
    causal_model: CausalModelRef | None = None


class JointSite(Closed):
    """A further site a joint unit intervenes on, at the unit's token position (MV-10)."""

    layer: NonNegInt
    component: Literal["residual_post", "residual_pre", "attention_heads", "mlp_output"]
    heads: list[NonNegInt] | None = Field(default=None, description="for `attention_heads` only")
    featurizer: FeaturizerRef | None = Field(
        default=None,
        description="this site's featurizer (its location is this site at the unit's position); absent "
        "only where the source did not record it",
    )


class UnitScore(Closed):
    id: str = Field(min_length=1, description="stable name of the model unit")
    location: Location
    featurizer: FeaturizerRef | None = Field(
        default=None,
        description="absent only where the source did not record it (imported results); recomputation "
        "then reports what is missing",
    )
    joint_sites: list[JointSite] | None = Field(
        default=None,
        min_length=1,
        description="spec 1.2: further sites intervened on in the same forward pass as `location`, each "
        "with its own featurizer, at the same token position (MIB's IOI unit of heads across layers); "
        "`location` is the site of lowest layer and gives the unit's layer (MV-10)",
    )
    scores: dict[str, float] = Field(
        min_length=1, description="score per counterfactual dataset (IIA or MSE)"
    )
    n_examples: dict[str, NonNegInt] | None = None


_UNIT_INTERVAL = {"minimum": 0, "maximum": 1}
_NON_NEGATIVE = {"minimum": 0}


def _bounded(bound: dict[str, int]) -> dict[str, Any]:
    return {
        "average": bound,
        "best": bound,
        "highest": bound,
        "per_layer": {"additionalProperties": bound},
        "units": {"items": {"properties": {"scores": {"additionalProperties": bound}}}},
    }


class VariableClaims(Closed):
    """Scores of one causal variable. IIA lies in [0, 1] and is higher-is-better; MSE is
    non-negative and lower-is-better (the schema ties ``better`` and the bounds to ``metric``)."""

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {
                    "if": {"properties": {"metric": {"const": "iia"}}, "required": ["metric"]},
                    "then": {"properties": {"better": {"const": "higher"}, **_bounded(_UNIT_INTERVAL)}},
                },
                {
                    "if": {"properties": {"metric": {"const": "mse"}}, "required": ["metric"]},
                    "then": {"properties": {"better": {"const": "lower"}, **_bounded(_NON_NEGATIVE)}},
                },
            ]
        }
    )

    name: str = Field(min_length=1)
    metric: Literal["iia", "mse"]
    better: Literal["higher", "lower"]
    units: list[UnitScore] = Field(min_length=1)
    per_layer: dict[Annotated[str, Field(pattern=r"^(0|[1-9][0-9]*)$")], float] | None = None
    average: float
    best: float | None = Field(
        default=None,
        description="the best per-layer score: the highest IIA, the lowest MSE (required from spec 1.1)",
    )
    highest: float | None = Field(default=None, description="spec 1.0 only: the name of `best` in 1.0")
    rounding: Rounding | None = _rounding()

    @model_validator(mode="after")
    def _one_best(self) -> VariableClaims:
        if (self.best is None) == (self.highest is None):
            raise ValueError("a variable gives its best score once: `best` (spec 1.1) or `highest` (1.0)")
        return self


class CausalVariableClaims(Closed):
    variables: list[VariableClaims] = Field(min_length=1)


class CausalVariableReport(_ReportBase):
    """MIB causal variable localization: interchange-intervention accuracy per unit."""

    track: Literal["causal_variable"] = "causal_variable"
    seeds: list[Seed] = Field(default_factory=list)
    model: ModelRef
    settings: CausalVariableSettings = Field(default_factory=CausalVariableSettings)
    claims: CausalVariableClaims
    artifacts: list[Artifact] = Field(default_factory=list)
    rounding: Rounding | None = _rounding()
    provenance: Provenance
    extensions: Extensions | None = None


# --- CAUSAL-BENCH --------------------------------------------------------------------------


class Behaviour(Closed):
    kind: Literal["planted", "transformer"]
    n_layers: PosInt | None = None
    n_heads: PosInt | None = None
    seed: int = Field(ge=0, le=2**64 - 1)
    signal: float | None = None
    component_noise_sd: float | None = Field(default=None, ge=0)
    measurement_noise_sd: float | None = Field(default=None, ge=0)
    ablation: Literal["counterfactual", "mean", "zero"] | None = None
    metric: Literal["normalised_logit_difference"] | None = Field(
        default=None,
        description="transformer: β(S) = (m(S) − m(∅))/(m(C) − m(∅)), m the mean logit difference with only "
        "S active (metrics/causal_bench.md MB-17)",
    )


class Perturbation(Closed):
    """What a seed run of the stability metric changes (metrics/causal_bench.md MB-19)."""

    kind: Literal["method_noise", "subsample"] = Field(
        description="`method_noise`: only the method's generator; `subsample`: also the examples β is "
        "evaluated on"
    )
    subsample_size: PosInt | None = Field(default=None, description="examples per seed run (`subsample`)")


class CausalBenchSettings(Closed):
    weights: dict[Literal["F", "C", "M", "S", "COS"], Annotated[float, Field(gt=0)]] = Field(
        min_length=1, description="composite weights (at least one part: the composite of none is undefined)"
    )
    cos_threshold: float = Field(default=0.85, gt=0, le=1)
    n_permutations: PosInt
    p_convention: Literal["plus_one", "paper"] = "plus_one"
    z_ddof: Literal[0, 1] = 0
    perturbation: Perturbation | None = None


class SeedRun(Closed):
    seed: int = Field(ge=0, le=2**64 - 1)
    components: list[ComponentId]


class MethodMetrics(Closed):
    F: float
    C: float
    M: Unit
    S: Unit
    COS: Unit
    composite: float | None = Field(
        default=None, description="omitted exactly when a weighted part is negative (undefined, MB-9)"
    )
    precision: Unit | None = None
    recall: Unit | None = None
    f1: Unit | None = None
    rounding: Rounding | None = _rounding()


class LocalizationProcedure(Closed):
    """How a method's sets were found, so that they can be re-run (metrics/causal_bench.md MB-18)."""

    kind: Literal["activation_patching", "gradient_attribution", "ablation_scanning", "circuit_discovery"]
    threshold: float = Field(
        description="detection threshold τ; for circuit discovery the faithfulness floor"
    )
    seed: int = Field(ge=0, le=2**64 - 1, description="seed of the identified set")
    noise_sd: float | None = Field(default=None, ge=0, description="σ of the simulated noise (0 if absent)")
    false_positive_rate: Unit | None = None
    false_positive_boost: float | None = Field(default=None, ge=0)


class MethodResult(Closed):
    name: str = Field(min_length=1)
    procedure: LocalizationProcedure | None = None
    components: list[ComponentId] = Field(description="the method's identified set")
    runs: list[SeedRun] = Field(min_length=2, description="sets under seed perturbations (stability)")
    reduced: list[ComponentId] | None = Field(default=None, description="set left by the COS reduction")
    metrics: MethodMetrics


class Convergence(Closed):
    j_obs: Unit
    null_mean: Unit
    null_std: float = Field(ge=0)
    z: float | None = Field(default=None, description="omitted when the null has zero spread")
    p: Unit
    n_permutations: PosInt
    seed: int = Field(ge=0, le=2**64 - 1)
    rounding: Rounding | None = _rounding()


class JaccardMatrix(Closed):
    methods: list[str] = Field(min_length=1)
    matrix: list[list[Unit]]
    rounding: Rounding | None = _rounding()


class SensitivityPoint(Closed):
    threshold: float
    components: list[ComponentId]
    metrics: MethodMetrics = Field(description="S: stability of the seed runs thresholded at this point")


class ThresholdSensitivity(Closed):
    method: str = Field(min_length=1, description="name of a method with a thresholded procedure")
    points: list[SensitivityPoint] = Field(min_length=1)


class WeightScenario(Closed):
    name: str = Field(min_length=1)
    weights: dict[Literal["F", "C", "M", "S", "COS"], Annotated[float, Field(gt=0)]] = Field(min_length=1)
    composites: dict[str, float] = Field(description="method name → composite under these weights")
    ranking: list[str] = Field(description="method names by composite, highest first")
    rounding: Rounding | None = _rounding()


class ScaledMethod(Closed):
    name: str = Field(min_length=1, description="a method of claims.methods, re-run with its procedure")
    components: list[ComponentId]
    precision: Unit
    recall: Unit
    f1: Unit
    rounding: Rounding | None = _rounding()


class ScalingConfig(Closed):
    """One planted model size: the report's behaviour parameters with these L and H, the
    default planted set (MB-15) as ground truth."""

    n_layers: PosInt
    n_heads: PosInt
    methods: list[ScaledMethod] = Field(min_length=1)
    convergence: Convergence | None = None


class CausalBenchClaims(Closed):
    methods: list[MethodResult] = Field(min_length=1)
    convergence: Convergence | None = None
    consensus: list[ComponentId] | None = None
    majority: list[ComponentId] | None = None
    jaccard: JaccardMatrix | None = None
    threshold_sensitivity: ThresholdSensitivity | None = None
    weight_robustness: list[WeightScenario] | None = None
    scaling: list[ScalingConfig] | None = None


class CausalBenchReport(_ReportBase):
    """CAUSAL-BENCH: multi-metric scoring of component sets, convergence test."""

    track: Literal["causal_bench"] = "causal_bench"
    behaviour: Behaviour
    model: ModelRef | None = Field(default=None, description="the model of a transformer behaviour")
    universe: list[ComponentId] = Field(min_length=1, description="all components, canonical order")
    ground_truth: list[ComponentId] | None = None
    settings: CausalBenchSettings
    claims: CausalBenchClaims
    seeds: list[Seed] = Field(default_factory=list)
    artifacts: list[Artifact] = Field(default_factory=list)
    rounding: Rounding | None = _rounding()
    provenance: Provenance
    extensions: Extensions | None = None


# --- pixel-level saliency ------------------------------------------------------------------


class SaliencySettings(Closed):
    dominance_threshold: float = Field(default=0.9, gt=0, lt=1)
    wiou_ks: list[PosInt] = Field(min_length=1)
    wiou_weights: list[Annotated[float, Field(gt=0)]] = Field(min_length=1)
    auc_convention: Literal["normalised_trapezoid", "unit_step_sum"] = "normalised_trapezoid"
    shapley_sampler: Literal["exact", "permutation", "antithetic", "rotated_antithetic"]
    shapley_trials: PosInt = 1
    placeholder: Literal["clean"] = Field(
        default="clean",
        description="value a removed pixel takes in the Shapley game and the deletion/addition curves: "
        "its clean-image value (MS-7, MS-9)",
    )
    curve_steps: PosInt | None = None
    curve_score: Literal["probability", "accuracy"] = Field(
        default="probability",
        description="deletion/addition curve value per image: the class probability, or 1 when the "
        "argmax is the class (MS-7)",
    )
    shapley_permutations: PosInt | None = None
    shapley_seed: int | None = Field(
        default=None,
        ge=0,
        le=2**64 - 1,
        description="root seed of the permutations; the image at dataset index i uses "
        "SeedSequence([seed, i]) (metrics/saliency.md MS-10); required to recompute a sampled ground truth",
    )


class SaliencyMethod(Closed):
    name: str = Field(min_length=1)
    maps: TensorRef = Field(
        description="the method's maps: one (H, W) map per dominant image, in dataset order (MS-11)"
    )
    channel_reduction: Literal["none", "sum", "sum_abs", "max_abs", "mean", "l2_norm"] | None = Field(
        default=None,
        description="how the method's per-channel values became one value per pixel (MS-1); "
        "`none` when it yields one value per pixel",
    )
    hit_accuracy: Unit
    wiou: Unit
    per_k_iou: list[Unit] | None = None
    deletion_auc: float | None = None
    addition_auc: float | None = None
    rounding: Rounding | None = _rounding()


class Dominance(Closed):
    n_images: NonNegInt
    n_dominant: NonNegInt
    rate: Unit
    rounding: Rounding | None = _rounding()


class SaliencyClaims(Closed):
    clean_accuracy: Unit | None = None
    perturbed_accuracy: Unit | None = None
    dominance: Dominance
    ground_truth: TensorRef = Field(
        description="Shapley ground truth: one (H, W) map per dominant image, in dataset order (MS-11)"
    )
    methods: list[SaliencyMethod] = Field(min_length=1)


class SaliencyReport(_ReportBase):
    """Pixel-level saliency evaluation against Shapley ground truth."""

    track: Literal["saliency"] = "saliency"
    seeds: list[Seed] = Field(default_factory=list)
    model: ModelRef
    settings: SaliencySettings
    claims: SaliencyClaims
    artifacts: list[Artifact] = Field(default_factory=list)
    rounding: Rounding | None = _rounding()
    provenance: Provenance
    extensions: Extensions | None = None


# --- the union of the tracks' reports -----------------------------------------------------------


def track_of(model: type[BaseModel]) -> str:
    """The ``track`` value a report model narrows ``track`` to."""
    return str(get_args(model.model_fields["track"].annotation)[0])


def report_models(tracks: Iterable[str]) -> tuple[type[BaseModel], ...]:
    """Every report model (the subclasses of the common report fields), in the order they are
    defined here, which is the order of the report schema's branches.

    Args:
        tracks: the track names the models must cover: exactly one model per name.

    Raises:
        TypeError: naming the tracks without a model and the models whose track is not listed.
    """
    models = {track_of(model): model for model in _ReportBase.__subclasses__()}
    missing = [name for name in tracks if name not in models]
    unknown = sorted(set(models) - set(tracks))
    if missing or unknown:
        raise TypeError(
            f"report models and tracks differ: no model for {missing}, no track descriptor for {unknown} "
            "(a track is declared in mibspec.core.tracks and typed here)"
        )
    return tuple(models.values())


#: A report of any track: the models of :func:`report_models`, told apart by ``track``.
Report: Any = Annotated[Union[report_models(TRACKS)], Field(discriminator="track")]  # noqa: UP007


# --- what spec 1.0 does not have -------------------------------------------------------------


def rounded_objects(model: type[BaseModel]) -> list[tuple[tuple[str, ...], type[BaseModel]]]:
    """Where a report of ``model`` holds claim objects that may declare ``rounding`` (spec 1.1):
    the path of each (``*`` an item of an array or a value of an object) with its model, found
    by walking the model's fields under ``claims`` in their order."""
    return _objects_with_rounding(model.model_fields["claims"].annotation, ("claims",))


def _objects_with_rounding(annotation: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    origin, args = get_origin(annotation), get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        found = [(path, annotation)] if "rounding" in annotation.model_fields else []
        for name, field in annotation.model_fields.items():
            found += _objects_with_rounding(field.annotation, (*path, name))
        return found
    if origin is Annotated:
        return _objects_with_rounding(args[0], path)
    if origin in (list, dict):
        return _objects_with_rounding(args[-1], (*path, "*"))
    if origin in (Union, UnionType):
        return [found for arg in args for found in _objects_with_rounding(arg, path)]
    return []


#: :func:`rounded_objects` of the tracks of spec 1.1, in the order the published schema lists them
#: (the schema bundle's hash is cited and kept in receipts); a test keeps each equal to the walk. A
#: track added later takes the walk's order.
_PUBLISHED_ORDER: dict[type[BaseModel], list[tuple[tuple[str, ...], type[BaseModel]]]] = {
    CircuitReport: [
        (("claims", "curves", "*", "points", "*"), CurvePoint),
        (("claims", "cpr"), ScalarClaim),
        (("claims", "cmd"), NonNegativeClaim),
        (("claims", "auroc"), AurocClaim),
    ],
    CausalVariableReport: [(("claims", "variables", "*"), VariableClaims)],
    CausalBenchReport: [
        (("claims", "methods", "*", "metrics"), MethodMetrics),
        (("claims", "threshold_sensitivity", "points", "*", "metrics"), MethodMetrics),
        (("claims", "convergence"), Convergence),
        (("claims", "scaling", "*", "convergence"), Convergence),
        (("claims", "scaling", "*", "methods", "*"), ScaledMethod),
        (("claims", "weight_robustness", "*"), WeightScenario),
        (("claims", "jaccard"), JaccardMatrix),
    ],
    SaliencyReport: [(("claims", "methods", "*"), SaliencyMethod), (("claims", "dominance"), Dominance)],
}


def _fields(model: type[BaseModel], *without: str) -> list[str]:
    return [name for name in model.model_fields if name not in without]


def _version_rules(report: type[BaseModel]) -> list[dict[str, Any]]:
    """Spec 1.0: no ``rounding`` anywhere, a variable's best score is ``highest``; from spec 1.1
    it is ``best``; before spec 1.2 a causal-variable unit has no ``joint_sites``."""
    v10 = [closed_at((), _fields(report, "rounding"))]
    v11 = []
    for path, model in _PUBLISHED_ORDER.get(report) or rounded_objects(report):
        if model is VariableClaims:
            v10.append(closed_at(path, _fields(model, "rounding", "best"), ["highest"]))
            v11.append(closed_at(path, _fields(model, "highest"), ["best"]))
        else:
            v10.append(closed_at(path, _fields(model, "rounding")))
    before_12 = []
    if report is CausalVariableReport:
        units = ("claims", "variables", "*", "units", "*")
        before_12.append(
            version_branch(["1.0", "1.1"], [closed_at(units, _fields(UnitScore, "joint_sites"))])
        )
    rules = [version_branch("1.0", v10)]
    if v11:
        rules.append(version_branch(versions_from("1.1"), v11))
    return rules + before_12


for _report in report_models(TRACKS):
    _report.model_config["json_schema_extra"] = cast(Any, {"allOf": _version_rules(_report)})
