"""The featurizer trainers at every token (rule ``all``) and over the sites of a joint unit.

On the shipped tiny GPT-2 and the generated IOI train split: the training pairs at ``all``
write every base token, each with the counterfactual's vector at the same token, read here
from a run of the counterfactual prompt alone; DAS lowers the training loss below that of
its initial random rotations (the same generator without steps), at one head and at two
heads of two layers trained together, both of whose rotations move and stay orthonormal;
the same seed gives the same rotations; a pair of unequal token counts is refused as
scoring refuses it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import SmallDataset

pytestmark = [pytest.mark.recompute, pytest.mark.slow]  # each test loads the model and the train split
torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "examples" / "models"
VARIABLE = "output_token"
SETS = ["random_names", "io_s2_flip"]
#: head 3.1 alone, and heads 1.0 and 3.1 as one joint unit
HEAD = {"layer": 3, "component": "attention_heads", "position": {"rule": "all"}, "heads": [1]}
LOWER = {"layer": 1, "component": "attention_heads", "position": {"rule": "all"}, "heads": [0]}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, small_ioi_dataset: SmallDataset) -> Any:
    from mibspec.reference_impl.scoring.causal_variable import CausalVariableOptions, prepare_causal_variable

    root = tmp_path_factory.mktemp("training")
    options = CausalVariableOptions(
        MODELS / "tiny-gpt2",
        small_ioi_dataset(root, 16),
        root / "out",
        method="das",
        component="attention_heads",
        joint_heads=[(1, 0), (3, 1)],
        positions=["all"],
        variables=[VARIABLE],
        counterfactuals=SETS,
        train_rows=40,
    )
    return prepare_causal_variable(options)


def _pairs(setup: Any, location: dict[str, Any], joint: list[dict[str, Any]]) -> Any:
    from mibspec.reference_impl.scoring._featurizer_training import training_pairs

    return training_pairs(setup.train_eval, VARIABLE, setup.metric, location, SETS, joint=joint)


def _site_vectors(setup: Any, prompt: str, location: dict[str, Any]) -> Any:
    """The site's ``(T, D)`` vectors over one prompt run alone (no batch, no padding)."""
    from mibspec.reference_impl.engine import Site, forward_sites

    ids = torch.tensor([setup.train_eval.codec.encode(prompt)])
    site = Site.from_location(location)
    with torch.no_grad():
        _, recorded = forward_sites(setup.model, ids, torch.ones_like(ids), record=[site])
    return recorded[site][0]


def test_pairs_at_every_token_write_each_base_token_from_the_counterfactuals_same_token(setup: Any) -> None:
    evaluator = setup.train_eval
    data = _pairs(setup, LOWER, [HEAD])
    # the kept pairs in the order training reads them: set after set
    kept = [
        (p.row, cf)
        for cf in SETS
        for p in evaluator.pairs(VARIABLE, setup.metric, cf, {"rule": "all"}, "test")
    ]
    assert data.size == len(kept) > 10
    assert int(data.starts[-1]) == data.positions.shape[0] == data.sources.shape[0]
    for i in range(0, len(kept), max(1, len(kept) // 6)):
        row, cf = kept[i]
        base = evaluator.rows[row]["base"]["prompt"]
        source = evaluator.rows[row]["counterfactuals"][cf]["prompt"]
        n = len(evaluator.codec.encode(base))
        assert len(evaluator.codec.encode(source)) == n
        span = slice(int(data.starts[i]), int(data.starts[i + 1]))
        assert data.positions[span].tolist() == list(range(n))
        for vectors, location in ((data.sources, LOWER), (data.joint_sources[0], HEAD)):
            expected = _site_vectors(setup, source, location)
            assert torch.allclose(vectors[span], expected, atol=1e-5)
            # the counterfactual's vectors, not the base's
            assert not torch.allclose(vectors[span], _site_vectors(setup, base, location), atol=1e-3)


def _orthonormal_error(rotation: np.ndarray) -> float:
    gram = rotation.astype(np.float64) @ rotation.astype(np.float64).T
    return float(np.abs(gram - np.eye(rotation.shape[0])).max())


@pytest.mark.parametrize(
    ("location", "joint"), [(HEAD, []), (LOWER, [HEAD])], ids=["head-3.1-all", "joint-1.0-3.1-all"]
)
def test_das_lowers_the_loss_below_its_initial_rotations_and_stays_orthonormal(
    setup: Any, location: dict[str, Any], joint: list[dict[str, Any]]
) -> None:
    from mibspec.reference_impl.engine import Site, TorchFeaturizer
    from mibspec.reference_impl.scoring._featurizer_training import intervention_loss, train_das

    data = _pairs(setup, location, joint)
    sites = [Site.from_location(where) for where in (location, *joint)]

    def trained(steps: int) -> list[np.ndarray]:
        generator = torch.Generator().manual_seed(5)
        options = {"n_features": 4, "learning_rate": 0.02, "batch_size": 32}
        return train_das(setup.model, sites, data, steps=steps, generator=generator, **options)

    def loss(rotations: list[np.ndarray]) -> float:
        spec = {"type": "subspace", "n_features": 4}
        featurizers = [TorchFeaturizer(spec, {"rotation": r}) for r in rotations]
        return intervention_loss(setup.model, sites, data, featurizers, 32)

    initial, after = trained(0), trained(40)
    assert len(initial) == len(after) == len(sites)
    assert loss(after) < 0.9 * loss(initial)
    for start, end in zip(initial, after, strict=True):
        assert end.shape == (4, 16)
        assert float(np.abs(end - start).max()) > 1e-2  # every site's rotation is trained
        assert _orthonormal_error(end) <= 1e-4
    # the same seed, the same rotations
    assert all(np.array_equal(a, b) for a, b in zip(after, trained(40), strict=True))


def test_a_pair_of_unequal_token_counts_at_every_token_is_refused_as_scoring_refuses_it(setup: Any) -> None:
    from mibspec.reference_impl.recompute import UnusableInputError
    from mibspec.reference_impl.recompute.causal_variable import Evaluator

    row = json.loads(json.dumps(setup.train_eval.rows[0]))
    row["counterfactuals"]["random_names"]["prompt"] += " and"
    evaluator = Evaluator(
        setup.model, setup.train_eval.codec, [row], setup.causal_doc, example_filter="none", batch_size=4
    )
    with pytest.raises(UnusableInputError, match=r"rule 'all' writes the counterfactual's token i"):
        _pairs_of(evaluator, setup.metric)


def _pairs_of(evaluator: Any, metric: str) -> Any:
    from mibspec.reference_impl.scoring._featurizer_training import training_pairs

    return training_pairs(evaluator, VARIABLE, metric, HEAD, ["random_names"])
