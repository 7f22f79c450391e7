"""``mibspec score causal-variable``: units at every token (MIB's IOI ``Token:all``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mibspec.reference_impl.scoring.causal_variable import parse_position

REPO = Path(__file__).resolve().parents[3]


def test_all_is_a_position_of_its_own() -> None:
    assert parse_position("all") == {"rule": "all"}
    with pytest.raises(ValueError, match="expected last, all, index:N"):
        parse_position("all:3")  # every token takes no parameter


@pytest.mark.parametrize("method", ["das", "dbm", "pca", "sae"])
def test_trained_methods_are_refused_at_every_token_before_training(method: str, tmp_path: Path) -> None:
    """DAS and the masks learn from one position per prompt: at ``all`` the run stops before
    anything is loaded, trained or written, saying which method scores such units."""
    from mibspec.reference_impl.scoring.causal_variable import score_causal_variable

    with pytest.raises(ValueError, match=r"not at position 'all'.*--method full_vector"):
        score_causal_variable(
            REPO / "examples" / "models" / "tiny-gpt2",
            REPO / "examples" / "datasets" / "ioi" / "test.meta.json",
            tmp_path / "out",
            method=method,
            component="attention_heads",
            heads=[0],
            layers=[1],
            positions=["last", "all"],
        )
    assert not (tmp_path / "out").exists()
