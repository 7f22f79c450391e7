"""Recomputers of the verify command's recompute stage, one module per track.

Each module exposes ``recompute(ctx, progress) -> Recomputation`` (see
``mibspec.validator``'s recompute stage) and is imported only when that stage runs. What
every model-based recomputer needs (the model, its tokenizer, referenced documents) is
exported here for the producers too; this package itself imports no torch.
"""

from ._hash_cache import FileHashCache, default_cache_dir
from ._inputs import (
    ModelSource,
    UnusableInputError,
    config_start_token,
    dtype_narrowing,
    encode_function,
    stored_dtype,
)
from ._neuron_circuits import NeuronLevelCircuits
from ._node_circuits import NodeLevelCircuits
from ._rebuilt import RebuiltCircuits
from ._session import RecomputeSession

__all__ = [
    "FileHashCache",
    "ModelSource",
    "NeuronLevelCircuits",
    "NodeLevelCircuits",
    "RebuiltCircuits",
    "RecomputeSession",
    "UnusableInputError",
    "config_start_token",
    "default_cache_dir",
    "dtype_narrowing",
    "encode_function",
    "stored_dtype",
]
