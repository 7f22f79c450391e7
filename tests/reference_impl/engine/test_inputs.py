"""The clean/corrupted token-pair check shared by the patching engine, attribution and the
transformer behaviour: one message for one mistake, whichever entry point is called."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mibspec.reference_impl.behaviour.transformer import TransformerBehaviour
from mibspec.reference_impl.engine import (
    attribute_edges,
    evaluate_circuits,
    graph_universe,
    load_model,
    random_model,
)
from mibspec.reference_impl.engine._forward import check_token_pair

pytestmark = pytest.mark.recompute

N, T = 2, 5


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Any:
    directory: Path = tmp_path_factory.mktemp("gpt2")
    random_model("gpt2", directory, seed=3)
    return load_model(directory, dtype="float64")


def test_pair_of_one_shape_is_returned_as_long_tensors(model: Any) -> None:
    rng = np.random.default_rng(0)
    ids, cids = rng.integers(0, 64, (N, T)), rng.integers(0, 64, (N, T))
    got_ids, got_cids, mask = check_token_pair(model, ids, cids, None)
    assert got_ids.tolist() == ids.tolist()
    assert got_cids.tolist() == cids.tolist()
    assert mask.tolist() == np.ones((N, T), dtype=int).tolist()


def test_every_entry_point_rejects_a_corrupted_batch_of_another_shape(model: Any) -> None:
    rng = np.random.default_rng(1)
    ids, short = rng.integers(0, 64, (N, T)), rng.integers(0, 64, (N - 1, T))
    answers = (np.array([1, 2]), np.array([3, 4]))
    circuits = np.ones((1, graph_universe(model).n_edges), dtype=bool)
    calls = [
        lambda: check_token_pair(model, ids, short, None),
        lambda: evaluate_circuits(model, ids, short, None, *answers, circuits),
        lambda: attribute_edges(model, ids, short, None, *answers, method="eap"),
        lambda: TransformerBehaviour(model, ids, short, None, *answers),
    ]
    for call in calls:
        with pytest.raises(
            ValueError, match=r"^corrupted_ids: expected shape \(2, 5\) like clean_ids, got \(1, 5\)$"
        ):
            call()
