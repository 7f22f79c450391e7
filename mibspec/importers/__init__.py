"""Importers from the file formats of public benchmark code into mibspec documents."""

from .eap_ig import ImportResult, import_eap_ig

__all__ = ["ImportResult", "import_eap_ig"]
