"""mibspec's interchange interventions against pyvene's, in pyvene's own environment (``-m parity``).

Skipped, saying why, when ``$MIBSPEC_PYVENE_PYTHON`` names no Python that imports pyvene
(build one as docs/coming-from-mib.md says). Each side runs the same featurizers, rows,
counterfactuals and token positions on the same tiny GPT-2; every case is checked to change
the output, so that agreeing logits are not two untouched forward passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.parity, pytest.mark.recompute]

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "examples" / "models"


@pytest.fixture(scope="module")
def pyvene() -> Path:
    from mibspec.parity._causal import PYVENE_PYTHON_ENV, pyvene_python

    python = pyvene_python()
    if python is None:
        pytest.skip(f"{PYVENE_PYTHON_ENV} names no Python that imports pyvene")
    return python


def _by_group(rows: list[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for row in rows:
        out.setdefault(row.group, []).append(row)
    return out


def test_every_featurizer_type_position_and_site_agrees_with_pyvene(pyvene: Path) -> None:
    from mibspec.parity._causal import compare_featurizers, declared_featurizers

    rows = compare_featurizers(REPO / "examples" / "causal-variable-ioi" / "report.json", [MODELS], pyvene)
    names = [name for name, *_ in declared_featurizers(64, 16)]
    assert {doc["type"] for _, _, doc, _ in declared_featurizers(64, 16)} == {
        "identity",
        "subspace",
        "rotation",
        "pca",
        "sae",
    }
    groups = _by_group(rows)
    assert len(groups["intervened logits (pyvene)"]) == 2 * len(names)  # two counterfactual sets each
    assert [row.quantity for row in rows if not row.ok] == []
    for row in groups["intervention effect (pyvene)"]:
        assert row.mibspec > 1e-2, row.quantity  # the intervention changed the logits
    covered = " ".join(row.quantity for row in rows)
    for where in ("attention_heads h3 [all]", "attention_heads h2 [last]", "[name_c]", "[1]", "mlp_output"):
        assert where in covered


def test_report_units_at_the_last_token_and_at_a_slot_agree_with_pyvene(pyvene: Path) -> None:
    from mibspec.parity._causal import compare_causal

    rows = compare_causal(REPO / "examples" / "causal-variable-arithmetic" / "report.json", [MODELS], pyvene)
    logits = _by_group(rows)["intervened logits (pyvene)"]
    assert any("Token-slot:operand_2" in row.quantity for row in logits)
    assert any("Token-last" in row.quantity for row in logits)
    assert [row.quantity for row in rows if not row.ok] == []
    assert max(row.rel_diff for row in logits) < 1e-5
