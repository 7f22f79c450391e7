"""mibspec: a reporting standard, validator and reference recomputation for
interpretability benchmark results.

>>> import mibspec
>>> mibspec.SPEC_VERSION
'1.0'
"""

from mibspec._api import SPEC_VERSION, schema_bundle_hash, verify
from mibspec._version import __version__
from mibspec.validator import Finding, Severity, VerificationResult

__all__ = [
    "SPEC_VERSION",
    "Finding",
    "Severity",
    "VerificationResult",
    "__version__",
    "schema_bundle_hash",
    "verify",
]
