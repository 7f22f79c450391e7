"""mibspec: a reporting standard, validator and reference recomputation for
interpretability benchmark results.

>>> import mibspec
>>> mibspec.SPEC_VERSION
'1.2'
"""

import os as _os
import sys as _sys

# Under ``python -m mibspec`` this package is imported with the working directory first on
# sys.path (argv[0] is "-m" until the module runs). Run inside a submission's folder, a
# file there named like a module mibspec imports (json.py, click.py, numpy.py) would be
# executed; mibspec imports nothing from the working directory, so the entry goes first.
if _sys.argv[:1] == ["-m"] and _sys.path and _sys.path[0] in ("", _os.getcwd()):
    del _sys.path[0]

from typing import TYPE_CHECKING, Any

from mibspec.core.findings import Finding, Severity
from mibspec.core.spec import SPEC_VERSION
from mibspec.core.version import __version__

if TYPE_CHECKING:
    from mibspec.validator import VerificationResult
    from mibspec.verification.api import schema_bundle_hash, verify

#: Names loaded on first use: the validator (and the numpy its rules use) is imported only
#: when something is verified, so `mibspec --help` and `mibspec --version` start fast.
_LAZY = {
    "verify": "mibspec.verification.api",
    "schema_bundle_hash": "mibspec.verification.api",
    "VerificationResult": "mibspec.validator",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mibspec' has no attribute {name!r}")


__all__ = [
    "SPEC_VERSION",
    "Finding",
    "Severity",
    "VerificationResult",
    "__version__",
    "schema_bundle_hash",
    "verify",
]
