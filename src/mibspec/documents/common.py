"""Building blocks shared by several document kinds."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from ._base import Closed

__all__ = [
    "Artifact",
    "ArtifactId",
    "ArtifactRef",
    "CausalModelRef",
    "CircuitRef",
    "Citation",
    "ComponentId",
    "Extensions",
    "FeaturizerRef",
    "HubModel",
    "LocalModel",
    "MediaType",
    "Method",
    "ModelConfigSummary",
    "ModelRef",
    "Provenance",
    "RegistryModel",
    "Seed",
    "Sha256",
    "ToolInfo",
    "Uncertainty",
    "Unit",
    "model_ref",
]

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="lower-case hex SHA-256")]
_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
ArtifactId = Annotated[
    str,
    Field(pattern=_ID_PATTERN, description="identifier of an artifact, unique in the document"),
]


def _reference(kind: str | None) -> Any:
    # Validators find references through this schema annotation.
    marker: dict[str, Any] = {"x-mibspec-artifact": {"kind": kind} if kind else {}}
    return Field(pattern=_ID_PATTERN, json_schema_extra=marker)


#: A field naming an entry of the document's ``artifacts`` list.
ArtifactRef = Annotated[str, _reference(None)]
#: References that must point at a document of a given kind.
CircuitRef = Annotated[str, _reference("circuit")]
FeaturizerRef = Annotated[str, _reference("featurizer")]
CausalModelRef = Annotated[str, _reference("causal_model")]


ComponentId = Annotated[str, Field(min_length=1, max_length=256)]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]
NonNegInt = Annotated[int, Field(ge=0)]
PosInt = Annotated[int, Field(ge=1)]
Extensions = Annotated[
    dict[str, Any],
    Field(
        description="free-form data outside the standard; ignored by conformance checks. "
        "Keys SHOULD be namespaced, e.g. `org.example:field`."
    ),
]

MediaType = Literal[
    "application/json",
    "application/jsonl",
    "application/x-safetensors",
    "application/x-npy",
]


class Artifact(Closed):
    """A file the document depends on, stored next to it and pinned by its hash."""

    id: ArtifactId
    role: str = Field(
        min_length=1,
        max_length=64,
        description="what the file is for, e.g. `circuit`, `dataset`, `scores`, `weights`, `maps`",
    )
    path: str = Field(
        min_length=1,
        max_length=1024,
        description="POSIX path relative to the folder of the document that declares it",
    )
    sha256: Sha256
    bytes: NonNegInt
    media_type: MediaType
    rows: NonNegInt | None = Field(
        default=None, description="number of rows, required for `application/jsonl`"
    )
    kind: str | None = Field(
        default=None,
        description="for `application/json` artifacts that are mibspec documents: their kind",
    )


class Seed(Closed):
    """A seed and what it drove."""

    purpose: str = Field(min_length=1, max_length=128)
    value: int = Field(ge=0, le=2**64 - 1)


class Citation(Closed):
    text: str = Field(min_length=1)
    doi: str | None = None
    url: str | None = None


class Method(Closed):
    """The method whose results a report carries."""

    name: str = Field(min_length=1, max_length=200)
    version: str | None = None
    description: str | None = None
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    citation: Citation | None = None


class ModelConfigSummary(Closed):
    """The architecture numbers a reader needs without opening the weights."""

    n_layers: PosInt
    n_heads: PosInt
    d_model: PosInt
    n_kv_heads: PosInt | None = None
    vocab_size: PosInt | None = None
    parallel_attn_mlp: bool = False


#: A model reference starts with its ``source``; each source lists its own fields in its own order.
Architecture = Annotated[
    str, Field(min_length=1, description="e.g. `GPT2LMHeadModel`, `LlamaForCausalLM`, `tiny-cnn-v1`")
]
ModelDtype = Literal["float32", "float16", "bfloat16"]


class LocalModel(Closed):
    """A model folder on disk, resolved against the report's folder or a declared model root."""

    source: Literal["local"]
    path: str = Field(min_length=1)
    architecture: Architecture
    dtype: ModelDtype = "float32"
    config: ModelConfigSummary | None = None
    files: dict[str, Sha256] = Field(
        default_factory=dict,
        description="SHA-256 of the model folder's files, by file name (checked on recomputation)",
    )


class HubModel(Closed):
    """A model on a hub, pinned to an exact revision (rule A111 requires the pin)."""

    source: Literal["hub"]
    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9_.-]+)?$")
    revision: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{40}$",
        description="the full commit hash; absent only in reports imported from files that do not record it",
    )
    architecture: Architecture
    dtype: ModelDtype = "float32"
    config: ModelConfigSummary | None = None
    files: dict[str, Sha256] = Field(default_factory=dict)


class RegistryModel(Closed):
    """An architecture from mibspec's built-in registry with weights in a sidecar."""

    source: Literal["registry"]
    architecture: Architecture
    dtype: ModelDtype = "float32"
    config: ModelConfigSummary | None = None
    weights: ArtifactRef


ModelRef = Annotated[LocalModel | HubModel | RegistryModel, Field(discriminator="source")]


class Uncertainty(Closed):
    """Uncertainty of an estimated claim."""

    kind: Literal["standard_error", "confidence_interval", "standard_deviation"]
    value: float | None = Field(default=None, ge=0)
    lower: float | None = None
    upper: float | None = None
    level: float | None = Field(default=None, gt=0, lt=1)
    n: PosInt | None = None
    method: str | None = Field(default=None, description="e.g. `bootstrap`, `seeds`, `analytic`")


class ToolInfo(Closed):
    name: str = Field(min_length=1)
    version: str = Field(min_length=1)


class Provenance(Closed):
    """Who and what produced a document."""

    tool: ToolInfo
    created: str = Field(
        pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$",
        description="RFC 3339 date-time",
    )
    libraries: dict[str, str] = Field(default_factory=dict)
    hardware: str | None = None
    source_revision: str | None = None
    command: str | None = None


_MODEL_REF: TypeAdapter[LocalModel | HubModel | RegistryModel] = TypeAdapter(ModelRef)


def model_ref(data: Any) -> LocalModel | HubModel | RegistryModel:
    """The model reference held in ``data`` (a mapping with its ``source``), validated."""
    return _MODEL_REF.validate_python(data)
