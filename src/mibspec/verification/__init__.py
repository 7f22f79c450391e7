"""Verifying documents from Python and the command line: the layer over the validator.

* :mod:`.api`: :func:`verify`, collecting report paths, rule codes, devices, the schema
  bundle's hash;
* :mod:`.grouping`: many reports in worker processes or on Ray, with the serial result;
* :mod:`.versions`: the library versions a verification imported (for receipts);
* :mod:`.receipt`: writing and checking a verification receipt;
* :mod:`.output_formats`: the reporters (text, JSON, GitHub, SARIF, JUnit, …);
* :mod:`.progress`: the terminal progress display.
"""

from mibspec.verification.api import collect_paths, schema_bundle_hash, verify

__all__ = ["collect_paths", "schema_bundle_hash", "verify"]
