"""mibspec's interchange interventions against pyvene's, in pyvene's own environment (``-m parity``).

Skipped, saying why, when ``$MIBSPEC_PYVENE_PYTHON`` names no Python that imports pyvene
(build one as docs/coming-from-mib.md says). Each side runs the same featurizers, rows,
counterfactuals and token positions on the same tiny GPT-2 (joint units: also tiny Llama);
every case is checked to change the output, so that agreeing logits are not two untouched
forward passes.
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


def test_joint_units_agree_with_pyvene_on_gpt2_and_llama(pyvene: Path) -> None:
    from mibspec.parity._causal import JOINT_MODELS, compare_joint, joint_units

    rows = compare_joint(REPO / "examples" / "causal-variable-ioi" / "report.json", [MODELS], pyvene)
    units = joint_units(64, 16)
    assert [len(sites) for _, sites in units] == [3, 2]
    groups = _by_group(rows)
    for model in JOINT_MODELS:
        logits = groups[f"joint units, {model}: intervened logits (pyvene)"]
        assert len(logits) == 2 * len(units)  # two counterfactual sets each
        assert max(row.rel_diff for row in logits) < 1e-5
        for row in groups[f"joint units, {model}: intervention effect (pyvene)"]:
            assert row.mibspec > 1e-2, row.quantity
    assert [row.quantity for row in rows if not row.ok] == []
    covered = " ".join(row.quantity for row in rows)
    assert "L1 h0 + L1 h2 + L2 h1 [all]" in covered
    assert "L1 residual_post + L2 h3 [last]" in covered


def _joint_logits(model: Any, rows: list[dict[str, Any]], codec: Any, chained: bool) -> Any:
    """Last logits of the residual-then-head joint unit at the last token (tiny GPT-2,
    ``random_names``); ``chained=False``: the head's interchange computed from the base's
    unintervened head vector (a convention in which a later site does not see an earlier
    site's effect), written whole."""
    import torch

    from mibspec.parity._causal import _pad, joint_units
    from mibspec.reference_impl.engine import (
        JointWrite,
        Site,
        TorchFeaturizer,
        forward_sites,
        intervened_logits,
    )

    (_, (first, second)) = joint_units(64, 16)[1]
    base_ids, base_mask = (torch.tensor(a) for a in _pad([codec.encode(r["base"]["prompt"]) for r in rows]))
    cf = [codec.encode(r["counterfactuals"]["random_names"]["prompt"]) for r in rows]
    src_ids, src_mask = (torch.tensor(a) for a in _pad(cf))
    s1, s2 = Site.from_location(first.location), Site.from_location(second.location)
    f1, f2 = TorchFeaturizer(first.doc, first.weights), TorchFeaturizer(second.doc, second.weights)
    base_last, src_last = base_mask.sum(1) - 1, src_mask.sum(1) - 1
    n = torch.arange(len(rows))
    with torch.no_grad():
        _, src = forward_sites(model, src_ids, src_mask, record=[s1, s2])
        v1, v2 = src[s1][n, src_last], src[s2][n, src_last]
        write = JointWrite(s2, f2, v2)
        if not chained:
            _, plain = forward_sites(model, base_ids, base_mask, record=[s2])
            whole = TorchFeaturizer({"type": "identity", "n_features": 16, "input_dim": 16}, {})
            write = JointWrite(s2, whole, f2.interchange(plain[s2][n, base_last], v2))
        return intervened_logits(model, base_ids, base_mask, s1, base_last, v1, f1, joint=[write])


def test_the_joint_comparison_tells_chained_sites_from_unchained() -> None:
    """The agreement above holds only if pyvene's later site reads the base vector the earlier
    site changed (MV-10): the convention in which it reads the unintervened base moves the
    logits by far more than the tolerance."""
    from mibspec.core.strict_json import read_json_lines
    from mibspec.reference_impl.engine import load_model
    from mibspec.reference_impl.recompute import ModelSource
    from mibspec.reference_impl.recompute.causal_variable import TextCodec

    model_dir = MODELS / "tiny-gpt2"
    with (REPO / "examples" / "datasets" / "ioi" / "test.jsonl").open("rb") as handle:
        rows = [row for _, row in read_json_lines(handle)][:32]
    codec = TextCodec(ModelSource(str(model_dir), None, local=True))
    model = load_model(model_dir)
    chained = _joint_logits(model, rows, codec, chained=True)
    unchained = _joint_logits(model, rows, codec, chained=False)
    gap = float((chained - unchained).abs().max())
    assert gap > 1e-2 * float(chained.abs().max())  # a thousand times the 1e-5 tolerance
