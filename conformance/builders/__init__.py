"""The conformance cases of spec 1.1 (and of 1.0 documents, which 1.1 still accepts), one module
per document kind (report cases: one per track).

Every case folder ``v1/<kind>/<valid|invalid>/<case-id>/`` holds the document to
verify, its artifacts and ``expected.json``. The modules of this package are the
source of every case: documents are built from a few consistent base documents
(numbers obey the metric definitions of the spec), binary sidecars are written
byte-for-byte reproducibly, and artifact hashes and sizes are computed from the files
written.

- ``_common``: constants, the case folder, the case registry (``@case``);
- ``_graphs``, ``_inputs``, ``_causal_bench``: the material documents are made of
  (computation graphs and circuits; datasets, causal models, featurizers, shortcut
  datasets and saliency maps; CAUSAL-BENCH sets and claims);
- ``_reports``: the consistent base report of each track;
- one module of cases per kind, in :data:`MODULES`;
- ``_tree``: writing and checking the tree, the command line.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import (
    _tree,
    causal_model,
    circuit,
    counterfactual_dataset,
    featurizer,
    json_parsing,
    leaderboard,
    report_causal_bench,
    report_causal_variable,
    report_circuit,
    report_saliency,
    shortcut_dataset,
)
from ._common import Case, cases_of

__all__ = ["CASES", "MODULES", "Case", "main"]

#: The modules of cases, in the order the suite lists and builds them.
MODULES = (
    json_parsing,
    report_circuit,
    circuit,
    featurizer,
    counterfactual_dataset,
    causal_model,
    shortcut_dataset,
    report_causal_variable,
    report_causal_bench,
    report_saliency,
    leaderboard,
)

#: Every case of the suite.
CASES: list[Case] = [case for module in MODULES for case in cases_of(module)]


def main(argv: Sequence[str] | None = None) -> int:
    """Write every case (``--check``: compare with a fresh build; ``--list``: print the folders)."""
    return _tree.main(CASES, argv)
