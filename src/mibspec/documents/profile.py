"""Profiles: the conventions a report is checked and recomputed under, as data."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from mibspec.core.claims import claim_catalogue
from mibspec.core.conventions import BINDABLE
from mibspec.core.tracks import TRACKS

from ._base import Closed, SpecVersion
from .report import report_models, track_of
from .rounding import Rounding

__all__ = ["ModelDtypes", "Profile", "RoundingKind", "Tolerance", "unchecked_when"]

#: The kinds of claim a rounding may apply to, as the claim catalogue (spec/v1/claims.json) defines them.
RoundingKind: Any = Literal[tuple(claim_catalogue().rounding_kinds)]  # type: ignore[valid-type]
#: The report tracks (``mibspec.core.tracks``), in the order of their report models.
TrackName: Any = Literal[tuple(track_of(model) for model in report_models(TRACKS))]  # type: ignore[valid-type]
#: The conventions a profile may make binding (``mibspec.core.conventions``).
Bindable: Any = Literal[BINDABLE]  # type: ignore[valid-type]


def unchecked_when(value: object, track: str, what: str, *codes: str) -> Any:
    """The schema annotation ``x-mibspec-unchecked`` of a profile setting: when the setting has
    ``value``, reports of ``track`` are not checked for ``what`` (by the rules ``codes``, when
    named). Verification output lists, per report, every such setting of its profile."""
    return {"x-mibspec-unchecked": {"when": value, "track": track, "what": what, "codes": list(codes)}}


class Tolerance(Closed):
    """|claimed − recomputed| ≤ abs + rel·|recomputed|."""

    abs: float = Field(ge=0)
    rel: float = Field(ge=0)


class ModelDtypes(Closed):
    """The models of a track a profile evaluates in a 16-bit dtype."""

    track: TrackName
    dtype: Literal["float16", "bfloat16"]
    models: list[Annotated[str, Field(min_length=1)]] = Field(
        min_length=1,
        description="architectures (the class a config.json names) or hub ids, or `*` for every model",
    )


class Profile(Closed):
    """Named constants and conventions (spec/v1/profiles/<name>.json)."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")
    spec_version: SpecVersion
    description: str
    grid: list[Annotated[float, Field(gt=0, le=1)]] = Field(min_length=2)
    edge_count_rounding: Literal["floor", "ceil"]
    ranking: dict[Literal["cpr", "cmd", "auroc"], Literal["signed", "absolute"]]
    tie_break: Literal["canonical_index"]
    auroc_convention: Literal["mib", "rank"]
    check_circuit_size: bool = Field(
        description="size at each k must not exceed k·|E|",
        json_schema_extra=unchecked_when(
            False, "circuit", "circuit sizes against their grid point k", "K103"
        ),
    )
    force_full_faithfulness: bool = Field(
        description="treat f at k = 1 as 1.0 whatever the circuit (the public backend does)",
        json_schema_extra=unchecked_when(
            True, "circuit", "the faithfulness at k = 1 (taken as 1, not the measured value)"
        ),
    )
    faithfulness_min_denominator: float = Field(gt=0)
    consistency: Tolerance = Field(description="claimed aggregate vs the same metric of the claimed parts")
    recompute: dict[Literal["float32", "float16", "bfloat16"], Tolerance] = Field(
        description="claimed vs recomputed from the model, by model dtype"
    )
    model_dtypes: list[ModelDtypes] = Field(
        default_factory=list,
        description="per track, the 16-bit dtype this profile evaluates models in (the first entry naming "
        "the model): importers declare it, and recomputation accepts it when it is narrower than the "
        "weights are stored in (SPEC.md M-6); any other narrowing is R113, since a 16-bit dtype widens the "
        "recompute tolerance",
    )
    min_stability_runs: int = Field(ge=2)
    min_random_baseline_seeds: int = Field(ge=1)
    min_permutations: int = Field(ge=1)
    min_shapley_trials: int = Field(ge=1)
    p_convention: Literal["plus_one", "paper"] = Field(
        json_schema_extra=unchecked_when(
            "paper", "causal_bench", "that a permutation p-value is above 0 (count/B may be 0)"
        )
    )
    checker: Literal["exact_token", "substring"] = Field(
        json_schema_extra=unchecked_when(
            "substring",
            "causal_variable",
            "that an answer is the expected token: any output whose text contains it counts as correct",
        )
    )
    binding: list[Bindable] = Field(
        default_factory=list,
        description="conventions whose profile value applies whatever a report declares; a report "
        "declaring another value is an error (C122). grid and checker are always binding (K101, V108)",
    )
    start_token: Literal["none", "prepend"] = Field(
        description="circuit track: whether recomputation prepends the model's start token to every "
        "prompt when the report's settings.start_token is absent (mib-2025: prepend, as the public code's "
        "prepend_bos=True)",
    )
    answer_token: dict[
        Annotated[str, Field(min_length=1)], Literal["as_written", "without_leading_space"]
    ] = Field(
        description="circuit track: per task, which token of a dataset answer the metric reads when the "
        "report's settings.answer_token is absent: the first token of the answer as written (a task not "
        "listed), or of the answer without its leading whitespace (mib-2025 for MCQA, ARC and arithmetic, "
        "as the public circuit loader tokenises the bare label)",
    )
    ig_points: Literal["right", "left"] = Field(
        default="right",
        description="EAP-IG (inputs) interpolation points of the reference producer: right = "
        "α = 1/n … 1 (clean endpoint in), left = α = 0 … (n−1)/n (corrupted endpoint in, the public code)",
    )
    attribution_scale: Literal["per_example", "per_example_and_batch"] = Field(
        default="per_example",
        description="edge scores of the reference producer: the per-example score averaged over "
        "examples, or that average also divided by each batch's size (the public code)",
    )
    recorded_size: Literal["complete_pruning"] = Field(
        default="complete_pruning",
        description="circuit sizes a report records: weighted edge counts after pruning to a fixed "
        "point (both profiles; the public code at its pinned commit records sizes after one round)",
    )
    neuron_coordinates: Literal["model", "centred_under_layernorm"] = Field(
        default="model",
        description="coordinates a neuron mask selects: the model's own residual coordinates, or, in "
        "LayerNorm models, those of each output with its mean over the residual removed (TransformerLens "
        "centres writing weights; the public code)",
    )
    counterfactual_types: dict[Annotated[str, Field(min_length=1)], Annotated[str, Field(min_length=1)]] = (
        Field(
            default_factory=dict,
            description="circuit track: per task, the counterfactual type an import records when it is "
            "given none (mib-2025: the types the public loader reads by default)",
        )
    )
    coarsest_rounding: dict[RoundingKind, Annotated[list[Rounding], Field(min_length=1)]] = Field(
        description="per kind of claim (claims.json rounding_kinds), the coarsest roundings a report may "
        "declare for it: a declared rounding is accepted when, at the claimed value, its last printed digit "
        "is no coarser than that of one of these (C131); a kind not listed accepts no rounding",
    )
    severity: dict[
        Annotated[str, Field(pattern=r"^[A-Z][0-9]{3}$")], Literal["error", "warning", "info", "off"]
    ] = Field(default_factory=dict, description="per-code severity overrides")
