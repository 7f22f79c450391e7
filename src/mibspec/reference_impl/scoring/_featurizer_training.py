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
from ..engine import Site, TorchFeaturizer, forward_sites, intervened_logits

__all__ = [
    "TrainingPairs",
    "collect_activations",
    "fit_pca",
    "fit_sae",
    "train_das",
    "train_mask",
    "training_pairs",
]


@dataclass(frozen=True)
class TrainingPairs:
    """Base prompts, positions, source vectors and what each intervention should produce."""

    ids: torch.Tensor
    mask: torch.Tensor
    positions: torch.Tensor
    sources: torch.Tensor
    labels: torch.Tensor | None  # first token of the expected output (IIA)
    targets: torch.Tensor | None  # IOI target logit difference (MSE)
    io: torch.Tensor | None
    s: torch.Tensor | None

    @property
    def size(self) -> int:
        return int(self.ids.shape[0])


def training_pairs(
    evaluator: Any,
    variable: str,
    metric: str,
    location: Mapping[str, Any],
    cf_types: Sequence[str],
) -> TrainingPairs:
    """Every kept (base, counterfactual) pair of the given sets, as tensors."""
    site = Site.from_location(location)
    rows: list[int] = []
    positions: list[int] = []
    sources: list[torch.Tensor] = []
    labels: list[int] = []
    targets: list[float] = []
    io: list[int] = []
    s: list[int] = []
    for cf_type in cf_types:
        pairs = evaluator.pairs(variable, metric, cf_type, location["position"], "training pairs")
        if not pairs:
            continue
        sources.append(evaluator._source_vectors(site, cf_type, pairs))
        for p in pairs:
            if len(p.base_pos) != 1:
                raise ValueError(
                    "location: featurizers are trained on one position per prompt, not rule 'all'"
                )
            rows.append(p.row)
            positions.append(p.base_pos[0])
            if metric == "mse":
                targets.append(float(p.target))
                a, b = ioi_logit_names(evaluator.prompt(p.row, "base"))
                io.append(evaluator.answer_ids(a, p.row)[0])
                s.append(evaluator.answer_ids(b, p.row)[0])
            else:
                labels.append(evaluator.answer_ids(str(p.expected), p.row)[0])
    if not rows:
        raise ValueError(f"variable: no training pair is kept for {variable!r}")
    ids, mask = evaluator._batch([(r, "base") for r in rows])
    on = ids.device
    return TrainingPairs(
        ids=ids,
        mask=mask,
        positions=torch.tensor(positions, dtype=torch.long, device=on),
        sources=torch.cat(sources),
        labels=torch.tensor(labels, dtype=torch.long, device=on) if metric != "mse" else None,
        targets=torch.tensor(targets, dtype=torch.float64, device=wide_device(on))
        if metric == "mse"
        else None,
        io=torch.tensor(io, dtype=torch.long, device=on) if metric == "mse" else None,
        s=torch.tensor(s, dtype=torch.long, device=on) if metric == "mse" else None,
    )


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


def _slice(data: TrainingPairs, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    ids, mask = data.ids[index], data.mask[index]
    width = int(mask.sum(1).max())
    return ids[:, :width], mask[:, :width]


def train_das(
    model: Any,
    site: Site,
    data: TrainingPairs,
    *,
    n_features: int,
    steps: int,
    learning_rate: float,
    batch_size: int,
    generator: torch.Generator,
) -> np.ndarray:
    """A DAS subspace: rows R (n_features × d) orthonormal, learned by interchange training.

    R is the transpose of the Q factor of a free d × n_features matrix (initialised from the
    generator, entries N(0, 1/d)), so it stays orthonormal throughout; returns R in float32.
    """
    d = data.sources.shape[1]
    # a small initial scale lets Adam's fixed step size turn the subspace quickly
    init = torch.randn((d, n_features), generator=generator, dtype=torch.float32) / float(np.sqrt(d))
    free = init.to(data.sources.device).requires_grad_(True)
    optimiser = torch.optim.Adam([free], lr=learning_rate)
    spec = {"type": "subspace", "n_features": n_features}
    for index in _batches(data.size, batch_size, steps, generator, data.ids.device):
        rotation = torch.linalg.qr(free).Q.T
        featurizer = TorchFeaturizer(spec, {"rotation": rotation})
        ids, mask = _slice(data, index)
        logits = intervened_logits(
            model, ids, mask, site, data.positions[index], data.sources[index], featurizer
        )
        loss = _loss(logits, data, index)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        rotation = torch.linalg.qr(free.detach().cpu().double()).Q.T
    return rotation.float().numpy()


def train_mask(
    model: Any,
    site: Site,
    data: TrainingPairs,
    featurizer: TorchFeaturizer,
    *,
    steps: int,
    learning_rate: float,
    sparsity: float,
    batch_size: int,
    generator: torch.Generator,
) -> list[int]:
    """DBM: a binary mask over a featurizer's features, learned through a sigmoid relaxation.

    The soft mask σ(m) weights how much of each source feature replaces the base's; the loss is
    the task loss plus ``sparsity · mean σ(m)``. The selected features are those with m > 0
    (the single largest m when none is).
    """
    n = featurizer.n_features
    logits_mask = torch.zeros(n, dtype=torch.float32, device=data.sources.device).requires_grad_(True)
    optimiser = torch.optim.Adam([logits_mask], lr=learning_rate)
    for index in _batches(data.size, batch_size, steps, generator, data.ids.device):
        soft = torch.sigmoid(logits_mask)
        ids, mask = _slice(data, index)
        logits = intervened_logits(
            model, ids, mask, site, data.positions[index], data.sources[index], featurizer, soft_mask=soft
        )
        loss = _loss(logits, data, index) + sparsity * soft.mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    values = logits_mask.detach()
    chosen = [int(i) for i in torch.nonzero(values > 0).flatten()]
    return chosen or [int(torch.argmax(values))]


def collect_activations(
    evaluator: Any, location: Mapping[str, Any], prompts: Sequence[tuple[int, str]]
) -> np.ndarray:
    """The site's vectors at the declared position of each prompt, float64 ``(M, D)``."""
    from mibspec.metrics.positions import resolve_position

    site = Site.from_location(location)
    out = []
    batch = evaluator.batch_size
    for start in range(0, len(prompts), batch):
        chunk = prompts[start : start + batch]
        ids, mask = evaluator._batch(chunk)
        with torch.no_grad():
            _, recorded = forward_sites(evaluator.model, ids, mask, record=[site])
        for i, (row, which) in enumerate(chunk):
            tokens, offsets = evaluator.tokens(row, which)
            pos = resolve_position(
                location["position"], evaluator.prompt(row, which), tokens, offsets, evaluator.codec.encode
            )
            out.append(recorded[site][i, pos].cpu().double().numpy())
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
