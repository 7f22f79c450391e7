"""Load a script of ``benchmarks/`` as a module, for its tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_script(relative: str, name: str) -> ModuleType:
    """The script at ``REPO / relative``, registered as ``name`` (dataclasses look their
    module up in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location(name, REPO / relative)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
