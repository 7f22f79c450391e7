"""Small, seeded trainers for the reference featurizers: DAS, PCA, a sparse autoencoder, DBM masks.

Every trainer draws only from a local ``torch.Generator`` seeded by the caller and runs in
seconds on the shipped tiny models. The objective of DAS and of DBM is the causal-variable
metric itself: cross-entropy of the intervened model's next token against the first token
of the expected output (IIA variables) or the squared error of the IOI logit difference
against its causal-model target (MSE variables), on training pairs built by the same
:class:`~mibspec.reference_impl.recompute.causal_variable.Evaluator` that scores them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mibspec.metrics.causal_models import ioi_logit_names

from ..devices import wide, wide_device
from ..engine import JointWrite, Site, TorchFeaturizer, forward_sites, intervened_logits

__all__ = [
    "TrainingPairs",
    "collect_activations",
    "fit_pca",
    "fit_sae",
    "intervention_loss",
    "train_das",
    "train_mask",
    "training_pairs",
]


@dataclass(frozen=True)
class TrainingPairs:
    """Base prompts, the writes of each pair and what each intervention should produce.

    A pair writes at one base token (a position rule naming one token) or at every token
    (rule ``all``): pair i's writes are ``starts[i]:starts[i + 1]`` of ``positions`` (the
    base token written) and ``sources`` (the counterfactual's vector at the first site, read
    at the counterfactual's token of the same index); ``joint_sources`` hold the same writes'
    vectors at the further sites of a joint unit (MV-10).
    """

    ids: torch.Tensor
    mask: torch.Tensor
    starts: torch.Tensor  # (N + 1,) on the CPU
    positions: torch.Tensor
    sources: torch.Tensor
    labels: torch.Tensor | None  # first token of the expected output (IIA)
    targets: torch.Tensor | None  # IOI target logit difference (MSE)
    io: torch.Tensor | None
    s: torch.Tensor | None
    joint_sources: tuple[torch.Tensor, ...] = ()

    @property
    def size(self) -> int:
        return int(self.ids.shape[0])


def training_pairs(
    evaluator: Any,
    variable: str,
    metric: str,
    location: Mapping[str, Any],
    cf_types: Sequence[str],
    joint: Sequence[Mapping[str, Any]] = (),
) -> TrainingPairs:
    """Every kept (base, counterfactual) pair of the given sets, as tensors; ``joint``: the
    further sites of a joint unit (locations without their position), whose source vectors
    are read at the same tokens.

    The pairs are the evaluator's, so at rule ``all`` a pair whose base and counterfactual
    differ in token count is refused as scoring refuses it (``UnusableInputError``); the
    generated train split is filtered to equal token lengths, so none reaches training.
    """
    site = Site.from_location(location)
    further = [Site.from_location(where) for where in joint]
    rows: list[int] = []
    counts: list[int] = []
    positions: list[int] = []
    sources: list[list[torch.Tensor]] = [[] for _ in range(1 + len(further))]
    answers: dict[str, list[Any]] = {"labels": [], "targets": [], "io": [], "s": []}
    for cf_type in cf_types:
        pairs = evaluator.pairs(variable, metric, cf_type, location["position"], "training pairs")
        if not pairs:
            continue
        for each, vectors in zip((site, *further), sources, strict=True):
            vectors.append(evaluator._source_vectors(each, cf_type, pairs))
        for p in pairs:
            rows.append(p.row)
            counts.append(len(p.base_pos))
            positions.extend(p.base_pos)
            _answer(evaluator, metric, p, answers)
    if not rows:
        raise ValueError(f"variable: no training pair is kept for {variable!r}")
    ids, mask = evaluator._batch([(r, "base") for r in rows])
    on = ids.device
    mse = metric == "mse"
    return TrainingPairs(
        ids=ids,
        mask=mask,
        starts=torch.cumsum(torch.tensor([0, *counts], dtype=torch.long), 0),
        positions=torch.tensor(positions, dtype=torch.long, device=on),
        sources=torch.cat(sources[0]),
        labels=None if mse else torch.tensor(answers["labels"], dtype=torch.long, device=on),
        targets=torch.tensor(answers["targets"], dtype=torch.float64, device=wide_device(on))
        if mse
        else None,
        io=torch.tensor(answers["io"], dtype=torch.long, device=on) if mse else None,
        s=torch.tensor(answers["s"], dtype=torch.long, device=on) if mse else None,
        joint_sources=tuple(torch.cat(vectors) for vectors in sources[1:]),
    )


def _answer(evaluator: Any, metric: str, pair: Any, answers: dict[str, list[Any]]) -> None:
    """What a pair's intervention should produce: the IOI target and the base's two names'
    first tokens (MSE), or the expected output's first token (IIA)."""
    if metric == "mse":
        answers["targets"].append(float(pair.target))
        a, b = ioi_logit_names(evaluator.prompt(pair.row, "base"))
        answers["io"].append(evaluator.answer_ids(a, pair.row)[0])
        answers["s"].append(evaluator.answer_ids(b, pair.row)[0])
    else:
        answers["labels"].append(evaluator.answer_ids(str(pair.expected), pair.row)[0])


def _loss(logits: torch.Tensor, data: TrainingPairs, index: torch.Tensor) -> torch.Tensor:
    if data.labels is not None:
        return torch.nn.functional.cross_entropy(logits.float(), data.labels[index])
    assert data.targets is not None
    assert data.io is not None
    assert data.s is not None
    rows = torch.arange(index.shape[0], device=logits.device)
    diff = logits[rows, data.io[index]] - logits[rows, data.s[index]]
    return ((wide(diff) - data.targets[index.to(data.targets.device)]) ** 2).mean()


def _batches(
    n: int, batch: int, steps: int, generator: torch.Generator, device: torch.device
) -> list[torch.Tensor]:
    """Minibatch indices, drawn on the CPU (the same order on every device), put on ``device``."""
    out: list[torch.Tensor] = []
    while len(out) < steps:
        order = torch.randperm(n, generator=generator)
        out.extend(order[i : i + batch] for i in range(0, n, batch))
    return [index.to(device) for index in out[:steps]]


def _intervene(
    model: Any,
    sites: Sequence[Site],
    data: TrainingPairs,
    index: torch.Tensor,
    featurizers: Sequence[TorchFeaturizer],
    soft_masks: Sequence[torch.Tensor] | None = None,
) -> torch.Tensor:
    """Last-position logits of a minibatch of pairs, every write of each pair at every site
    made in one pass (``rows`` of :func:`intervened_logits`; joint sites as ``JointWrite``)."""
    ids, mask = data.ids[index], data.mask[index]
    width = int(mask.sum(1).max())
    ids, mask = ids[:, :width], mask[:, :width]
    chosen = index.cpu()
    starts = data.starts
    take = torch.cat([torch.arange(int(starts[i]), int(starts[i + 1])) for i in chosen.tolist()])
    rows = torch.repeat_interleave(torch.arange(chosen.shape[0]), starts[chosen + 1] - starts[chosen])
    take, rows = take.to(data.positions.device), rows.to(data.positions.device)
    masks: Sequence[torch.Tensor | None] = soft_masks if soft_masks is not None else [None] * len(sites)
    joint = [
        JointWrite(site, featurizer, vectors[take], soft)
        for site, featurizer, vectors, soft in zip(
            sites[1:], featurizers[1:], data.joint_sources, masks[1:], strict=True
        )
    ]
    positions, sources = data.positions[take], data.sources[take]
    first = featurizers[0]
    return intervened_logits(
        model, ids, mask, sites[0], positions, sources, first, soft_mask=masks[0], rows=rows, joint=joint
    )


def intervention_loss(
    model: Any,
    sites: Sequence[Site],
    data: TrainingPairs,
    featurizers: Sequence[TorchFeaturizer],
    batch_size: int,
) -> float:
    """The training objective over every pair, without gradients: the mean per-pair loss
    (cross-entropy or squared error) of the featurizers' interventions."""
    total = 0.0
    with torch.no_grad():
        for start in range(0, data.size, batch_size):
            index = torch.arange(start, min(data.size, start + batch_size), device=data.ids.device)
            logits = _intervene(model, sites, data, index, featurizers)
            total += float(_loss(logits, data, index)) * int(index.shape[0])
    return total / data.size


def _dims(data: TrainingPairs) -> list[int]:
    return [int(vectors.shape[1]) for vectors in (data.sources, *data.joint_sources)]


def train_das(
    model: Any,
    sites: Sequence[Site],
    data: TrainingPairs,
    *,
    n_features: int,
    steps: int,
    learning_rate: float,
    batch_size: int,
    generator: torch.Generator,
) -> list[np.ndarray]:
    """A DAS subspace per site: rows R (n_features × d) orthonormal, learned by interchange
    training; the sites of a joint unit are trained together, each through its own rotation,
    all written in one pass.

    Each R is the transpose of the Q factor of a free d × n_features matrix (initialised from
    the generator, site after site, entries N(0, 1/d)), so it stays orthonormal throughout;
    returns the R of each site in float32 (with ``steps`` 0, the initial ones).
    """
    spec = {"type": "subspace", "n_features": n_features}
    free = []
    for d in _dims(data):
        # a small initial scale lets Adam's fixed step size turn the subspace quickly
        init = torch.randn((d, n_features), generator=generator, dtype=torch.float32) / float(np.sqrt(d))
        free.append(init.to(data.sources.device).requires_grad_(True))
    optimiser = torch.optim.Adam(free, lr=learning_rate)
    for index in _batches(data.size, batch_size, steps, generator, data.ids.device):
        featurizers = [TorchFeaturizer(spec, {"rotation": torch.linalg.qr(each).Q.T}) for each in free]
        loss = _loss(_intervene(model, sites, data, index, featurizers), data, index)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        rotations = [torch.linalg.qr(each.detach().cpu().double()).Q.T for each in free]
    return [rotation.float().numpy() for rotation in rotations]


def train_mask(
    model: Any,
    sites: Sequence[Site],
    data: TrainingPairs,
    featurizers: Sequence[TorchFeaturizer],
    *,
    steps: int,
    learning_rate: float,
    sparsity: float,
    batch_size: int,
    generator: torch.Generator,
) -> list[list[int]]:
    """DBM: a binary mask over each site's featurizer's features, learned through a sigmoid
    relaxation; the masks of a joint unit's sites are trained together, in one pass.

    The soft mask σ(m) weights how much of each source feature replaces the base's; the loss is
    the task loss plus ``sparsity`` times the mean of σ(m) over every site's features. The
    selected features of a site are those with m > 0 (its single largest m when none is).
    """
    device = data.sources.device
    logits_masks = [
        torch.zeros(each.n_features, dtype=torch.float32, device=device).requires_grad_(True)
        for each in featurizers
    ]
    optimiser = torch.optim.Adam(logits_masks, lr=learning_rate)
    for index in _batches(data.size, batch_size, steps, generator, data.ids.device):
        soft = [torch.sigmoid(each) for each in logits_masks]
        logits = _intervene(model, sites, data, index, featurizers, soft)
        loss = _loss(logits, data, index) + sparsity * torch.cat(soft).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    chosen = []
    for each in logits_masks:
        values = each.detach()
        picked = [int(i) for i in torch.nonzero(values > 0).flatten()]
        chosen.append(picked or [int(torch.argmax(values))])
    return chosen


def collect_activations(
    evaluator: Any, location: Mapping[str, Any], prompts: Sequence[tuple[int, str]]
) -> np.ndarray:
    """The site's vectors at the declared position of each prompt (at each of its tokens for
    rule ``all``), prompt after prompt, float64 ``(M, D)``."""
    from mibspec.metrics.positions import resolve_positions

    site = Site.from_location(location)
    out: list[np.ndarray] = []
    batch = evaluator.batch_size
    for start in range(0, len(prompts), batch):
        chunk = prompts[start : start + batch]
        ids, mask = evaluator._batch(chunk)
        with torch.no_grad():
            _, recorded = forward_sites(evaluator.model, ids, mask, record=[site])
        for i, (row, which) in enumerate(chunk):
            tokens, offsets = evaluator.tokens(row, which)
            at = resolve_positions(
                location["position"], evaluator.prompt(row, which), tokens, offsets, evaluator.codec.encode
            )
            out.extend(recorded[site][i, pos].cpu().double().numpy() for pos in at)
    return np.stack(out)


def fit_pca(activations: np.ndarray, n_components: int) -> dict[str, np.ndarray]:
    """PCA of standardised activations: ``mean``, ``scale`` (std, 1 where 0) and the top
    ``n_components`` right singular vectors as orthonormal rows, each sign fixed so that its
    largest-magnitude entry is positive (a deterministic orientation)."""
    mean = activations.mean(0)
    scale = activations.std(0)
    scale = np.where(scale > 0, scale, 1.0)
    z = (activations - mean) / scale
    _, _, vt = np.linalg.svd(z, full_matrices=True)
    components = vt[:n_components]
    signs = np.sign(components[np.arange(components.shape[0]), np.abs(components).argmax(1)])
    components = components * np.where(signs == 0, 1.0, signs)[:, None]
    # re-orthonormalise in float64 so that the stored float32 rows pass the CV-1 tolerance
    q, _ = np.linalg.qr(components.T)
    q = q * np.sign(np.sum(q * components.T, axis=0))
    return {
        "mean": mean.astype(np.float32),
        "scale": scale.astype(np.float32),
        "components": np.ascontiguousarray(q.T).astype(np.float32),
    }


def fit_sae(
    activations: np.ndarray,
    n_latents: int,
    *,
    steps: int,
    learning_rate: float,
    l1: float,
    generator: torch.Generator,
) -> dict[str, np.ndarray]:
    """A ReLU sparse autoencoder f = relu(x·W_enc + b_enc), x̂ = f·W_dec + b_dec, trained full-batch
    on ``‖x − x̂‖² + l1·‖f‖₁`` (per example means) from a seeded initialisation."""
    x = torch.as_tensor(activations, dtype=torch.float32)
    d = x.shape[1]
    w_dec = torch.randn((n_latents, d), generator=generator, dtype=torch.float32)
    w_dec = w_dec / w_dec.norm(dim=1, keepdim=True)
    params = {
        "W_enc": w_dec.T.clone().requires_grad_(True),
        "b_enc": torch.zeros(n_latents, dtype=torch.float32, requires_grad=True),
        "W_dec": w_dec.clone().requires_grad_(True),
        "b_dec": x.mean(0).clone().requires_grad_(True),
    }
    optimiser = torch.optim.Adam(list(params.values()), lr=learning_rate)
    centred = x - x.mean(0)
    for _ in range(steps):
        f = torch.relu(x @ params["W_enc"] + params["b_enc"])
        recon = f @ params["W_dec"] + params["b_dec"]
        loss = ((recon - x) ** 2).sum(1).mean() / (centred**2).sum(1).mean() + l1 * f.abs().sum(1).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return {name: value.detach().numpy().astype(np.float32) for name, value in params.items()}
