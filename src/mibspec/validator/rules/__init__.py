"""The validator's rules: the artifact rules, then each track's rule modules as the track
registry (``mibspec.core.tracks``) names them; each module registers its rules with
:func:`rule` on import (see ``_registry.py``), and rules run in registration order."""

import importlib

from mibspec.core.tracks import TRACKS

from . import artifacts as _artifacts  # noqa: F401  (registers the A rules, which run first)
from . import conventions as _conventions  # noqa: F401  (registers the report-convention rule)
from . import migration as _migration  # noqa: F401  (registers the migrated-document rule)
from . import rounding as _rounding  # noqa: F401  (registers the declared-rounding rule)
from . import task as _task  # noqa: F401  (registers the rule on a report's example count)
from ._registry import RULES, Rule, compare, rule, run_rules, with_defaults

for _track in TRACKS.values():
    for _module in _track.rules:
        importlib.import_module(_module)

__all__ = ["RULES", "Rule", "compare", "rule", "run_rules", "with_defaults"]
