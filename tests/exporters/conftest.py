"""The exporter tests write their inputs with the importer tests' small files in MIB's
formats (``tests/importers/_mib_files.py``): that folder goes on ``sys.path``."""

from __future__ import annotations

import sys
from pathlib import Path

_FOLDER = str(Path(__file__).resolve().parents[1] / "importers")
if _FOLDER not in sys.path:
    sys.path.insert(0, _FOLDER)
