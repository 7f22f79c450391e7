"""The benchmark-script tests share ``_scripts.py`` (loading a script of ``benchmarks/`` as a
module): this folder goes on ``sys.path``."""

from __future__ import annotations

import sys
from pathlib import Path

_FOLDER = str(Path(__file__).resolve().parent)
if _FOLDER not in sys.path:
    sys.path.insert(0, _FOLDER)
