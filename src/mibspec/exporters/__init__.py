"""Exporters from mibspec documents back into the file formats of public benchmark code."""

from .eap_ig import ExportError, export_eap_ig
from .mib_submission import export_mib_submission

__all__ = ["ExportError", "export_eap_ig", "export_mib_submission"]
