"""Importers from the file formats of public benchmark code into mibspec documents."""

from ._layout import SubmissionLayout, submission_layout
from ._options import ImportOptions, OptionError
from .eap_ig import ImportResult, import_eap_ig
from .mib_causal_results import hub_id, import_mib_causal_results
from .mib_cv_join import ResultsModel, UnresolvedModelError, join_mib_cv_results
from .mib_cv_submission import import_mib_cv_submission
from .mib_dataset import import_mib_dataset
from .mib_results import import_mib_circuit_results
from .mib_submission import SubmissionOptions, import_mib_submission

__all__ = [
    "ImportOptions",
    "ImportResult",
    "OptionError",
    "ResultsModel",
    "SubmissionLayout",
    "SubmissionOptions",
    "UnresolvedModelError",
    "hub_id",
    "import_eap_ig",
    "import_mib_causal_results",
    "import_mib_circuit_results",
    "import_mib_cv_submission",
    "import_mib_dataset",
    "import_mib_submission",
    "join_mib_cv_results",
    "submission_layout",
]
