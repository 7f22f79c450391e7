"""Parity with the public MIB code: run it in its own environment on a mibspec report's
inputs and compare, value by value (``mibspec parity circuit``, ``benchmarks/parity/``)."""

from ._circuit import (
    CircuitInputs,
    ParityRow,
    circuit_parity,
    compare_circuit,
    load_circuit_inputs,
    mibspec_side,
    peer_job,
    public_model_difference,
)
from ._models import ATTRIBUTION_TASKS, RANDOM_MODELS, circuit_report, random_model_dir, report_method
from ._peer import (
    PEER_ENV_DIR_ENV,
    PEER_PYTHON_ENV,
    PEER_REQUIREMENTS,
    PEERS_ENV,
    PeerUnavailableError,
    build_peer_env,
    default_env_dir,
    find_peers,
    peer_python,
    run_peer,
)

__all__ = [
    "ATTRIBUTION_TASKS",
    "PEERS_ENV",
    "PEER_ENV_DIR_ENV",
    "PEER_PYTHON_ENV",
    "PEER_REQUIREMENTS",
    "RANDOM_MODELS",
    "CircuitInputs",
    "ParityRow",
    "PeerUnavailableError",
    "build_peer_env",
    "circuit_parity",
    "circuit_report",
    "compare_circuit",
    "default_env_dir",
    "find_peers",
    "load_circuit_inputs",
    "mibspec_side",
    "peer_job",
    "peer_python",
    "public_model_difference",
    "random_model_dir",
    "report_method",
    "run_peer",
]
