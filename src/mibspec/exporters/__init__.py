"""Exporters from mibspec documents back into the file formats of public benchmark code."""

from .eap_ig import ExportError, export_eap_ig
from .mib_cv_submission import ExportResult, export_mib_cv_submission
from .mib_submission import export_mib_submission

__all__ = [
    "ExportError",
    "ExportResult",
    "export_eap_ig",
    "export_mib_cv_submission",
    "export_mib_submission",
]
