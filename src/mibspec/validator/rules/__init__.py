"""The validator's rules, one module per family of documents; each registers its rules
with :func:`rule` on import (see ``_registry.py``)."""

# Registration happens on import: the order of these imports is the order rules run in.
from . import artifacts as _artifacts  # noqa: F401
from . import causal_bench as _causal_bench  # noqa: F401
from . import causal_variable as _causal_variable  # noqa: F401
from . import circuit as _circuit  # noqa: F401
from . import circuit_document as _circuit_document  # noqa: F401
from . import saliency as _saliency  # noqa: F401
from ._registry import RULES, Rule, compare, rule, run_rules, with_defaults

__all__ = ["RULES", "Rule", "compare", "rule", "run_rules", "with_defaults"]
