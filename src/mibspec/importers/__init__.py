"""Importers from the file formats of public benchmark code into mibspec documents."""

from .eap_ig import ImportResult, import_eap_ig
from .mib_causal_results import import_mib_causal_results
from .mib_dataset import import_mib_dataset
from .mib_results import import_mib_circuit_results

__all__ = [
    "ImportResult",
    "import_eap_ig",
    "import_mib_causal_results",
    "import_mib_circuit_results",
    "import_mib_dataset",
]
