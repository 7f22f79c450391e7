"""mibspec: a reporting standard, validator and reference recomputation for
interpretability benchmark results.

>>> import mibspec
>>> mibspec.SPEC_VERSION
'1.0'
"""

import os as _os
import sys as _sys

# Under ``python -m mibspec`` this package is imported with the working directory first on
# sys.path (argv[0] is "-m" until the module runs). Run inside a submission's folder, a
# file there named like a module mibspec imports (json.py, typer.py, numpy.py) would be
# executed; mibspec imports nothing from the working directory, so the entry goes first.
if _sys.argv[:1] == ["-m"] and _sys.path and _sys.path[0] in ("", _os.getcwd()):
    del _sys.path[0]

from mibspec._api import SPEC_VERSION, schema_bundle_hash, verify
from mibspec.core.version import __version__
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
