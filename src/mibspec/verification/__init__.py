"""Verifying documents from Python and the command line: the layer over the validator.

* :mod:`.request`: the options of a verification, declared once
  (:class:`VerificationRequest`) and checked once;
* :mod:`.api`: :func:`verify`, collecting report paths, rule codes, the schema bundle's hash;
* :mod:`.grouping`: many reports in worker processes or on Ray, with the serial result;
* :mod:`.versions`: the library versions a verification imported (for receipts);
* :mod:`.receipt`: writing and checking a verification receipt;
* :mod:`.output_formats`: the reporters (text, JSON, GitHub, SARIF, JUnit, …);
* :mod:`.progress`: the terminal progress display.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mibspec.verification.api import collect_paths, schema_bundle_hash, verify
    from mibspec.verification.request import RequestError, VerificationRequest

#: Names loaded on first use: ``mibspec.verification.request`` (what the command line is
#: built from) is imported without the validator behind :func:`verify`.
_LAZY = {
    "collect_paths": "mibspec.verification.api",
    "schema_bundle_hash": "mibspec.verification.api",
    "verify": "mibspec.verification.api",
    "RequestError": "mibspec.verification.request",
    "VerificationRequest": "mibspec.verification.request",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mibspec.verification' has no attribute {name!r}")


__all__ = ["RequestError", "VerificationRequest", "collect_paths", "schema_bundle_hash", "verify"]
