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
from ._released import PUBLIC_ANSWER_TOKEN, public_task_name
from ._tasks import PUBLIC_TASKS, TASK_MODEL, TaskSpec, task_model_dir, task_report, task_rows

__all__ = [
    "ATTRIBUTION_TASKS",
    "PEERS_ENV",
    "PEER_ENV_DIR_ENV",
    "PEER_PYTHON_ENV",
    "PEER_REQUIREMENTS",
    "PUBLIC_ANSWER_TOKEN",
    "PUBLIC_TASKS",
    "RANDOM_MODELS",
    "TASK_MODEL",
    "CircuitInputs",
    "ParityRow",
    "PeerUnavailableError",
    "TaskSpec",
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
    "public_task_name",
    "random_model_dir",
    "report_method",
    "run_peer",
    "task_model_dir",
    "task_report",
    "task_rows",
]
