"""The supporting document kinds: circuit, featurizer, counterfactual dataset,
causal model and shortcut dataset. Reports live in :mod:`.report`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from ._base import CURRENT_VERSION, Closed, SpecVersion, versions_from
from .common import (
    Artifact,
    ArtifactRef,
    CausalModelRef,
    Extensions,
    ModelRef,
    NonNegInt,
    PosInt,
    Provenance,
    Seed,
    Sha256,
)
from .rounding import closed_at, version_branch

__all__ = [
    "CausalModel",
    "CausalVariable",
    "Circuit",
    "CircuitEntry",
    "CounterfactualDataset",
    "DatasetFilter",
    "DatasetSource",
    "Featurizer",
    "GraphSpec",
    "Leaderboard",
    "LeaderboardCell",
    "LeaderboardRow",
    "LeaderboardTable",
    "Location",
    "ShortcutDataset",
    "TensorRef",
    "TokenPosition",
]

Version = SpecVersion


class _Document(Closed):
    """The fields every kind starts with. A kind narrows ``kind`` (which keeps its place) and ends
    with ``artifacts``, ``provenance`` and ``extensions``, declared in the kind itself so that they
    follow its own fields: the field order is the key order of the documents written."""

    spec_version: Version = CURRENT_VERSION
    kind: str
    description: str | None = None


class TensorRef(Closed):
    """A named tensor inside a safetensors artifact (or the single array of an .npy file).

    Its schema carries the annotation ``x-mibspec-tensor``, by which validators find it.
    """

    model_config = ConfigDict(json_schema_extra={"x-mibspec-tensor": True})

    artifact: ArtifactRef
    tensor: str | None = Field(
        default=None, description="tensor name in a safetensors file; omitted for .npy"
    )
    shape: list[NonNegInt] = Field(description="expected shape; checked against the file")
    dtype: Literal["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


# --- circuit -------------------------------------------------------------------------------


class GraphSpec(Closed):
    """The graph universe a circuit lives in (EAP-IG convention, see metrics/graph.md)."""

    convention: Literal["eap-ig"] = "eap-ig"
    n_layers: PosInt
    n_heads: PosInt
    parallel_attn_mlp: bool = False
    d_model: PosInt | None = None
    n_edges: PosInt = Field(description="edge total of the universe; must match the configuration")


class CircuitEntry(Closed):
    """One circuit of a circuit document: a row of the membership tensor."""

    index: NonNegInt = Field(description="row in the `membership` tensor")
    k: float | None = Field(default=None, gt=0, le=1, description="grid point it was built for")
    ranking: Literal["signed", "absolute", "greedy-signed", "greedy-absolute", "other"] | None = None
    n_edges: NonNegInt = Field(description="number of edges marked in the row")
    weighted_size: float | None = Field(
        default=None, ge=0, description="weighted edge count after pruning (metrics/graph.md)"
    )


class Circuit(_Document):
    """Edge scores and/or circuits over a model's computation graph."""

    kind: Literal["circuit"] = "circuit"
    model: ModelRef | None = None
    graph: GraphSpec
    granularity: Literal["edge", "node", "neuron"] = "edge"
    scores: TensorRef | None = Field(
        default=None, description="float vector of edge scores in canonical edge order"
    )
    membership: TensorRef | None = Field(
        default=None, description="bool matrix (n_circuits, n_edges) in canonical edge order"
    )
    neuron_masks: TensorRef | None = Field(
        default=None, description="bool tensor (n_circuits, n_forward, d_model) for neuron granularity"
    )
    node_membership: TensorRef | None = Field(
        default=None,
        description="bool matrix (n_circuits, n_forward): the source nodes each circuit keeps, in forward "
        "order (EAP-IG's node `in_graph` flags; `logits` is always kept)",
    )
    node_scores: TensorRef | None = Field(
        default=None,
        description="float vector (n_forward) of source-node scores in forward order; an entry false in "
        "`node_scored` is unscored and holds 0, which is not a score",
    )
    node_scored: TensorRef | None = Field(
        default=None,
        description="bool vector (n_forward): false where the source left the node unscored (EAP-IG's NaN)",
    )
    neuron_scores: TensorRef | None = Field(
        default=None,
        description="float matrix (n_forward, d_model) of neuron scores; an entry false in `neuron_scored` "
        "is unscored and holds 0, which is not a score",
    )
    neuron_scored: TensorRef | None = Field(
        default=None,
        description="bool matrix (n_forward, d_model): false where the source left the neuron unscored",
    )
    circuits: list[CircuitEntry] = Field(default_factory=list)
    artifacts: list[Artifact] = Field(default_factory=list)
    provenance: Provenance | None = None
    extensions: Extensions | None = None


# --- counterfactual dataset and causal model -----------------------------------------------


class DatasetFilter(Closed):
    name: Literal["equal_token_length", "model_correct", "other"]
    tokenizer: str | None = None
    kept: NonNegInt
    dropped: NonNegInt
    detail: str | None = None


class Generator(Closed):
    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    seed: int = Field(ge=0, le=2**64 - 1)
    parameters: dict[str, Any] = Field(default_factory=dict)


class DatasetSource(Closed):
    """The released file imported rows were read from, pinned by its hash (and its hub repository,
    when named), so that anyone can check they hold the same file."""

    file: str = Field(min_length=1, max_length=1024, description="the file's name as it was read")
    format: Literal["parquet", "jsonl"]
    sha256: Sha256
    bytes: NonNegInt
    rows: NonNegInt = Field(description="rows in the file, before any filter")
    hub_id: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9_.-]+)?$",
        description="the dataset repository on the hub, e.g. `mib-bench/ioi`",
    )
    revision: str | None = Field(
        default=None, pattern=r"^[0-9a-f]{40}$", description="the repository's full commit hash"
    )


class CounterfactualDataset(_Document):
    """Base inputs paired with counterfactual inputs (rows in a JSON Lines sidecar)."""

    kind: Literal["counterfactual_dataset"] = "counterfactual_dataset"
    task: str = Field(min_length=1, description="e.g. `ioi`, `arithmetic`, `mcqa`, `arc_easy`, `ravel`")
    split: Literal["train", "validation", "test", "private_test"]
    examples: ArtifactRef = Field(description="the JSON Lines artifact holding the rows (datasets.md)")
    counterfactual_types: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)
    variables: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    causal_model: CausalModelRef | None = None
    generator: Generator | None = None
    filters: list[DatasetFilter] = Field(default_factory=list)
    source: DatasetSource | None = Field(
        default=None, description="for rows imported from a released file: that file, pinned"
    )
    artifacts: list[Artifact] = Field(default_factory=list)
    provenance: Provenance | None = None
    extensions: Extensions | None = None


class CausalVariable(Closed):
    name: str = Field(min_length=1)
    values: list[Any] | None = Field(default=None, description="finite domain, when there is one")
    description: str | None = None


class CausalModel(_Document):
    """A task's high-level causal model, built from a named built-in mechanism."""

    kind: Literal["causal_model"] = "causal_model"
    task: str = Field(min_length=1)
    mechanism: Literal["ioi_linear", "answer_pointer", "two_digit_carry", "attribute_lookup"]
    variables: list[CausalVariable] = Field(min_length=1)
    outputs: list[str] = Field(min_length=1, description="variables the model's output depends on")
    parameters: dict[str, Any] = Field(default_factory=dict)
    artifacts: list[Artifact] = Field(default_factory=list)
    provenance: Provenance | None = None
    extensions: Extensions | None = None


# --- featurizer ----------------------------------------------------------------------------


class TokenPosition(Closed):
    """A token position declared as data and resolved per example from the tokenizer
    (``metrics/causal_variable.md``, MV-8)."""

    rule: Literal["last", "index", "first_occurrence", "last_occurrence", "slot", "all", "named"] = Field(
        description="`all`: every token of the prompt, the counterfactual's token i written at the base's "
        "token i (both prompts must have as many tokens; MIB's IOI `Token:all`); `named`: a position known "
        "only by the name a submission's code gave it (imported results); it cannot be resolved, so "
        "recomputation reports it"
    )
    index: int | None = Field(default=None, description="for `index`: 0-based, negative counts from the end")
    token: str | None = Field(
        default=None, description="for `*_occurrence`: the text whose token sequence is searched for"
    )
    slot: str | None = Field(
        default=None,
        description="for `slot`: the template slot name; `{variable}` inside it is replaced by the "
        "prompt's value of that causal variable (e.g. `label_{answer_pointer}`, the correct choice's label)",
    )
    occurrence: int | None = Field(default=None, description="for `slot`: which mention (0-based, −1 = last)")
    match: Literal["placeholder", "value"] = Field(
        default="placeholder",
        description="for `slot`: `placeholder` counts the slot's placeholders in the template; `value` "
        "counts the mentions of the slot's value in the prompt (e.g. the subject's second mention)",
    )
    subtoken: Literal["first", "last"] = "last"
    name: str | None = Field(default=None, min_length=1, description="for `named`: the position's name")


class Location(Closed):
    """Where in the model a featurizer reads and writes."""

    layer: NonNegInt
    component: Literal["residual_post", "residual_pre", "attention_heads", "mlp_output"] = Field(
        description="`residual_pre`/`residual_post`: the residual stream entering/leaving the layer; "
        "`mlp_output`: the MLP's contribution to the residual stream; `attention_heads`: the listed "
        "heads' outputs before the output projection (d_head values each, concatenated in order)"
    )
    position: TokenPosition
    heads: list[NonNegInt] | None = Field(default=None, description="for `attention_heads` only")


class Featurizer(_Document):
    """An invertible map from a model location to features, declared as data (no code)."""

    kind: Literal["featurizer"] = "featurizer"
    type: Literal["identity", "subspace", "rotation", "pca", "sae"]
    location: Location
    input_dim: PosInt = Field(
        description="d_model at residual and MLP locations, len(heads)·d_head at attention heads"
    )
    n_features: PosInt
    feature_indices: list[NonNegInt] | None = Field(
        default=None, description="the features intervened on; all when omitted"
    )
    weights: dict[str, TensorRef] = Field(
        default_factory=dict,
        description="named tensors: `rotation` (subspace: n_features × input_dim with orthonormal "
        "rows; rotation: input_dim × input_dim orthogonal); `components` (pca: n_features × input_dim, "
        "orthonormal rows), `mean` and `scale` (pca, input_dim each); `W_enc` (input_dim × n_features), "
        "`b_enc`, `W_dec` (n_features × input_dim), `b_dec`, `threshold` (sae, jumprelu)",
    )
    error: Literal["add_base_error", "discard"] = Field(
        default="add_base_error",
        description="whether the base input's reconstruction error is added back after the inverse",
    )
    pca_centring: Literal["centred", "uncentred"] | None = Field(
        default=None,
        description="pca: `centred` f = ((x − mean)/scale)·componentsᵀ; `uncentred` f = x·componentsᵀ "
        "(the public MIB code fits on standardised activations and applies the components uncentred)",
    )
    sae_activation: Literal["relu", "jumprelu", "topk"] | None = Field(
        default=None,
        description="sae: f = act(x·W_enc + b_enc); relu, jumprelu (pre·[pre > threshold]) or topk "
        "(the sae_k largest pre-activations, ties to the lower index, then relu)",
    )
    sae_k: PosInt | None = Field(default=None, description="sae with topk: the number of active latents")
    artifacts: list[Artifact] = Field(default_factory=list)
    provenance: Provenance | None = None
    extensions: Extensions | None = None


# --- shortcut dataset (pixel-level saliency) -----------------------------------------------


class ShortcutPerturbation(Closed):
    kernel_size: PosInt = Field(description="K: number of kernel weights (the kernel is √K×√K)")
    patch_size: PosInt = Field(description="D: number of patch pixels (the patch is √D×√D)")
    alpha: float = Field(ge=0, description="non-dominant kernel weights are uniform in [0, α]")
    seed: int = Field(ge=0, le=2**64 - 1)
    kernels: TensorRef = Field(description="float (n_classes, √K, √K)")
    locations: list[Annotated[list[NonNegInt], Field(min_length=2, max_length=2)]] = Field(
        description="per class: [row, col] of the patch's corner"
    )


class ShortcutDataset(_Document):
    """Images carrying a class-specific shortcut perturbation."""

    kind: Literal["shortcut_dataset"] = "shortcut_dataset"
    source: str = Field(min_length=1, description="where the clean images come from")
    split: Literal["train", "validation", "test"]
    n_classes: PosInt
    image_shape: list[PosInt] = Field(min_length=3, max_length=3, description="[C, H, W]")
    clean_images: TensorRef
    perturbed_images: TensorRef
    labels: TensorRef
    perturbation: ShortcutPerturbation
    seeds: list[Seed] = Field(default_factory=list)
    artifacts: list[Artifact] = Field(default_factory=list)
    provenance: Provenance | None = None
    extensions: Extensions | None = None


# --- leaderboard ---------------------------------------------------------------------------


class LeaderboardCell(Closed):
    task: str = Field(min_length=1)
    model: str = Field(min_length=1)
    value: float = Field(description="the method's CPR or CMD on this task × model")


class LeaderboardRow(Closed):
    method: str = Field(min_length=1)
    cells: list[LeaderboardCell] = Field(min_length=1)
    average: float = Field(description="arithmetic mean of the cells (MC-11)")
    score: float = Field(ge=0, le=1, description="mean over the cells of σ(value) (MC-11)")


class LeaderboardTable(Closed):
    metric: Literal["cpr", "cmd"] = Field(
        description="`cpr`: higher is better; `cmd`: lower is better, for the cells and the Score alike"
    )
    profile: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9.-]*$",
        description="spec 1.1, required: the profile every cell of the table was verified under; reports "
        "of different profiles are never ranked in one table (C-9)",
    )
    rows: list[LeaderboardRow] = Field(min_length=1)


class Leaderboard(Closed):
    """A MIB-style circuit-track leaderboard: per method, cells and the Average and Score
    derived from them (as `mibspec leaderboard -o FILE.json` writes it, or as a paper quotes it)."""

    # Not a _Document: the description follows the track and the title, the key order that
    # `mibspec leaderboard -o FILE.json` has always written.
    spec_version: Version = CURRENT_VERSION
    kind: Literal["leaderboard"] = "leaderboard"
    track: Literal["circuit"] = "circuit"
    title: str = Field(min_length=1)
    description: str | None = None
    tables: list[LeaderboardTable] = Field(min_length=1)
    artifacts: list[Artifact] = Field(default_factory=list)
    provenance: Provenance | None = None
    extensions: Extensions | None = None


# Spec 1.0 tables have no profile; from 1.1 every table names the one its cells were verified under.
Leaderboard.model_config["json_schema_extra"] = {
    "allOf": [
        version_branch("1.0", [closed_at(("tables", "*"), ["metric", "rows"])]),
        version_branch(
            versions_from("1.1"), [closed_at(("tables", "*"), ["metric", "profile", "rows"], ["profile"])]
        ),
    ]
}
