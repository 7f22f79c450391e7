"""The hardening tests import ``tests/fuzz/fuzzlib.py`` (shared with ``tests/fuzz/run.py``) and
their helpers in ``hardening_support.py``: both folders go on ``sys.path``."""

from __future__ import annotations

import sys
from pathlib import Path

for folder in (Path(__file__).resolve().parent, Path(__file__).resolve().parents[1] / "fuzz"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
