"""Interchange interventions: a forward pass that reads and rewrites declared model sites.

Normative text: ``spec/v1/metrics/causal_variable.md`` (MV-7, MV-8). A :class:`Site` is a
featurizer location without its token position:

* ``residual_pre`` / ``residual_post``: the residual stream entering / leaving layer l
  (``(N, T, d)``);
* ``mlp_output``: layer l's MLP contribution to the residual stream (Gemma-2: after its
  output norm);
* ``attention_heads``: the listed heads' mixed values, the input of the output projection
  (``d_head`` values per head, concatenated in the listed order: ``(N, T, h·d_head)``).

:func:`forward_sites` is the engine's forward (same operations as ``_forward``) with a hook
at every site: it can record a site's tensor and replace it. :class:`TorchFeaturizer` is
the torch twin, on the model's device, of ``mibspec.metrics.featurizers.NumpyFeaturizer``
(the float64 formulas of MV-7, which the tests hold it to). :func:`intervened_logits` runs
base prompts with the features of given source vectors written at one position per
prompt (or at several, such as every token), at one site or at several together (a joint
unit, :class:`JointWrite`), and :func:`greedy_tokens` extends that to several generated
tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from . import _ops
from ._forward import embed, qkv_shared
from ._weights import ModelWeights

__all__ = [
    "COMPONENTS",
    "JointWrite",
    "Site",
    "TorchFeaturizer",
    "forward_sites",
    "greedy_tokens",
    "intervened_logits",
    "site_dim",
]

COMPONENTS: tuple[str, ...] = ("residual_pre", "residual_post", "mlp_output", "attention_heads")

Edit = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Site:
    """A model location without its token position (see the module docstring)."""

    layer: int
    component: str
    heads: tuple[int, ...] = ()

    @classmethod
    def from_location(cls, location: Mapping[str, Any]) -> Site:
        heads = tuple(location.get("heads") or ()) if location["component"] == "attention_heads" else ()
        return cls(int(location["layer"]), str(location["component"]), heads)


def site_dim(model: ModelWeights, site: Site) -> int:
    """The width of a site's vector: d_model, or ``len(heads)·d_head`` for attention heads."""
    return len(site.heads) * model.d_head if site.component == "attention_heads" else model.d_model


def check_site(model: ModelWeights, site: Site) -> None:
    """Raise ``ValueError`` naming the problem when a site does not exist in the model."""
    if site.component not in COMPONENTS:
        raise ValueError(f"site: component must be one of {list(COMPONENTS)}, got {site.component!r}")
    if not 0 <= site.layer < model.n_layers:
        raise ValueError(f"site: layer must lie in [0, {model.n_layers}), got {site.layer}")
    if site.component == "attention_heads":
        if not site.heads or len(set(site.heads)) != len(site.heads):
            raise ValueError(f"site: attention_heads needs distinct heads, got {list(site.heads)}")
        if not all(0 <= h < model.n_heads for h in site.heads):
            raise ValueError(f"site: heads must lie in [0, {model.n_heads}), got {list(site.heads)}")


def forward_sites(
    model: ModelWeights,
    ids: torch.Tensor,
    mask: torch.Tensor,
    *,
    record: Sequence[Site] = (),
    edits: Mapping[Site, Edit] | None = None,
) -> tuple[torch.Tensor, dict[Site, torch.Tensor]]:
    """Forward pass with site hooks; returns the last-position logits and recorded tensors.

    Args:
        model: the weights.
        ids, mask: ``(N, T)`` right-padded token batch (already checked).
        record: sites whose (possibly edited) tensor is returned.
        edits: per site, a function mapping the site's ``(N, T, D)`` tensor to its
            replacement (same shape).

    Returns:
        ``(logits (N, V) at each row's last non-padding position, {site: (N, T, D)})``.
        Autograd flows through the edits (the caller chooses ``no_grad``).
    """
    ids, mask = ids.to(model.device), mask.to(model.device)
    edits = dict(edits or {})
    wanted = set(record)
    recorded: dict[Site, torch.Tensor] = {}
    N, T = ids.shape
    H, d, e = model.n_heads, model.d_model, model.d_head
    positions = _ops.positions_from_mask(mask)
    rope = _ops.rope_tables(model, positions)
    masks: dict[int | None, torch.Tensor] = {}
    head_sites: dict[int, list[Site]] = {}
    for site in {*wanted, *edits}:
        if site.component == "attention_heads":
            head_sites.setdefault(site.layer, []).append(site)

    def touch(site: Site, x: torch.Tensor) -> torch.Tensor:
        if site in edits:
            x = edits[site](x)
        if site in wanted:
            recorded[site] = x
        return x

    x = embed(model, ids, positions)
    for li, layer in enumerate(model.layers):
        x = touch(Site(li, "residual_pre"), x)
        if layer.sliding_window not in masks:
            masks[layer.sliding_window] = _ops.causal_mask(mask, layer.sliding_window)
        q, k, v = qkv_shared(model, layer, x, rope)
        z = _ops.attention(
            q,
            k,
            v,
            masks[layer.sliding_window],
            layer.attn_scale,
            model.attn_softcap,
            layer.sliding_window is not None,
        )  # (N, H, T, e)
        for site in sorted(head_sites.get(li, []), key=lambda s: s.heads):
            index = torch.tensor(site.heads, dtype=torch.long, device=z.device)
            part = z.index_select(1, index).permute(0, 2, 1, 3).reshape(N, T, len(site.heads) * e)
            new = touch(site, part)
            if new is not part:
                z = z.clone()
                z[:, index] = new.reshape(N, T, len(site.heads), e).permute(0, 2, 1, 3)
        attn = _ops.matmul(z.transpose(1, 2).reshape(N, T, H * e), layer.w_o.reshape(-1, d))
        if layer.b_o is not None:
            attn = attn + layer.b_o
        if layer.norm_attn_out is not None:
            attn = _ops.norm(attn, layer.norm_attn_out)
        x = x + attn
        m = _ops.mlp(_ops.norm(x, layer.norm_mlp), layer, model.activation)
        m = touch(Site(li, "mlp_output"), m)
        x = x + m
        x = touch(Site(li, "residual_post"), x)
    last = mask.long().sum(1) - 1
    h = _ops.norm(x[torch.arange(N, device=x.device), last], model.norm_final)
    logits = _ops.matmul(h, model.w_unembed.T)
    if model.b_unembed is not None:
        logits = logits + model.b_unembed
    if model.final_softcap is not None:
        logits = torch.tanh(logits / model.final_softcap) * model.final_softcap
    return logits, recorded


class TorchFeaturizer:
    """A featurizer document's feature map in torch (formulas: ``mibspec.metrics.featurizers``).

    Weights are converted to the given dtype (and moved to ``device`` when one is given);
    :meth:`interchange` is differentiable in them, so training code can pass tensors that
    require gradients.
    """

    def __init__(
        self,
        doc: Mapping[str, Any],
        weights: Mapping[str, Any],
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        self.type = str(doc["type"])
        self.n_features = int(doc["n_features"])
        indices = doc.get("feature_indices")
        chosen = list(range(self.n_features)) if indices is None else list(indices)
        self.indices = torch.tensor(chosen, dtype=torch.long, device=device)
        self.add_error = doc.get("error", "add_base_error") == "add_base_error"
        self.centred = doc.get("pca_centring") == "centred"
        self.activation = doc.get("sae_activation")
        self.k = doc.get("sae_k")
        self.w: dict[str, torch.Tensor] = {}
        for name, value in weights.items():
            tensor = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
            self.w[name] = tensor.to(dtype) if device is None else tensor.to(device=device, dtype=dtype)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        if self.type == "identity":
            return x
        if self.type in ("subspace", "rotation"):
            return _ops.matmul(x, self.w["rotation"].T)
        if self.type == "pca":
            z = (x - self.w["mean"]) / self.w["scale"] if self.centred else x
            return _ops.matmul(z, self.w["components"].T)
        pre = _ops.matmul(x, self.w["W_enc"]) + self.w["b_enc"]
        if self.activation == "relu":
            return torch.relu(pre)
        if self.activation == "jumprelu":
            return torch.where(pre > self.w["threshold"], pre, torch.zeros_like(pre))
        assert self.k is not None
        # stable descending sort: equal pre-activations keep the lower index first
        order = torch.sort(pre, dim=-1, descending=True, stable=True).indices[..., : int(self.k)]
        keep = torch.zeros_like(pre, dtype=torch.bool).scatter(-1, order, True)
        return torch.where(keep, torch.relu(pre), torch.zeros_like(pre))

    def decode(self, f: torch.Tensor) -> torch.Tensor:
        if self.type == "identity":
            return f
        if self.type in ("subspace", "rotation"):
            return _ops.matmul(f, self.w["rotation"])
        if self.type == "pca":
            z = _ops.matmul(f, self.w["components"])
            return z * self.w["scale"] + self.w["mean"] if self.centred else z
        return _ops.matmul(f, self.w["W_dec"]) + self.w["b_dec"]

    def interchange(
        self, base: torch.Tensor, source: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``g(f') + e(base)`` row by row (``(N, D)``); ``mask`` (``(n,)`` in [0, 1]) replaces the
        selected indices by a soft selection over all features (mask training)."""
        fb, fs = self.encode(base), self.encode(source)
        if mask is None:
            select = torch.zeros(fb.shape[-1], dtype=torch.bool, device=fb.device)
            select[self.indices.to(fb.device)] = True
            mixed = torch.where(select, fs, fb)
        else:
            mixed = fb + mask.to(fb.dtype) * (fs - fb)
        out = self.decode(mixed)
        if self.add_error:
            out = out + (base - self.decode(fb))
        return out


def _position_edit(
    featurizer: TorchFeaturizer,
    positions: torch.Tensor,
    sources: torch.Tensor,
    mask: torch.Tensor | None = None,
    rows: torch.Tensor | None = None,
) -> Edit:
    """The edit writing ``sources`` at ``(rows[i], positions[i])``; row i at ``positions[i]``
    when ``rows`` is None (one position per prompt)."""

    def edit(x: torch.Tensor) -> torch.Tensor:
        # features are computed in float32 at least, whatever the model dtype
        wide = torch.promote_types(x.dtype, torch.float32)
        at = positions.to(x.device)
        rows_at = torch.arange(at.shape[0], device=x.device) if rows is None else rows.to(x.device)
        new = featurizer.interchange(x[rows_at, at].to(wide), sources.to(device=x.device, dtype=wide), mask)
        out = x.clone()
        out[rows_at, at] = new.to(x.dtype)
        return out

    return edit


@dataclass(frozen=True)
class JointWrite:
    """A further site of a joint intervention (MV-10): its featurizer and its source vectors,
    written at the same positions and rows as the intervention's first site; ``soft_mask``
    as in :func:`intervened_logits`, for this site's features (mask training)."""

    site: Site
    featurizer: TorchFeaturizer
    sources: torch.Tensor
    soft_mask: torch.Tensor | None = None


def _edits(
    site: Site,
    edit: Edit,
    joint: Sequence[JointWrite],
    positions: torch.Tensor,
    rows: torch.Tensor | None,
) -> dict[Site, Edit]:
    """The edits of one intervention: ``edit`` at ``site`` and each joint write at its own."""
    edits = {site: edit}
    for write in joint:
        if write.site in edits:
            raise ValueError(f"site {write.site} is written twice in one intervention")
        edits[write.site] = _position_edit(write.featurizer, positions, write.sources, write.soft_mask, rows)
    return edits


def intervened_logits(
    model: ModelWeights,
    ids: torch.Tensor,
    mask: torch.Tensor,
    site: Site,
    positions: torch.Tensor,
    sources: torch.Tensor,
    featurizer: TorchFeaturizer,
    *,
    soft_mask: torch.Tensor | None = None,
    rows: torch.Tensor | None = None,
    joint: Sequence[JointWrite] = (),
) -> torch.Tensor:
    """Last-position logits ``(N, V)`` of base prompts under one interchange per prompt, or
    under any number per prompt when ``rows`` is given.

    Args:
        ids, mask: ``(N, T)`` base prompts, right padded.
        site: where the featurizer reads and writes.
        positions: ``(N,)`` the token index intervened on in each base prompt.
        sources: ``(N, D)`` the source (counterfactual) vectors at that site, each read at
            its own prompt's declared position.
        featurizer: the feature map; its selected features are interchanged.
        soft_mask: optional ``(n,)`` soft feature selection (replaces ``feature_indices``).
        rows: optional ``(M,)`` base row of each entry; then ``positions`` is ``(M,)`` and
            ``sources`` ``(M, D)``: entry i is written at token ``positions[i]`` of prompt
            ``rows[i]`` (several positions of one prompt, e.g. the ``all`` rule).
        joint: further sites written in the same pass at the same positions and rows (a
            joint unit, MV-10), each with its own featurizer and ``(M, D_site)`` sources.
    """
    edit = _position_edit(featurizer, positions, sources, soft_mask, rows)
    logits, _ = forward_sites(model, ids, mask, edits=_edits(site, edit, joint, positions, rows))
    return logits


def greedy_tokens(
    model: ModelWeights,
    ids: torch.Tensor,
    mask: torch.Tensor,
    n_tokens: int,
    *,
    site: Site | None = None,
    positions: torch.Tensor | None = None,
    sources: torch.Tensor | None = None,
    featurizer: TorchFeaturizer | None = None,
    rows: torch.Tensor | None = None,
    joint: Sequence[JointWrite] = (),
) -> torch.Tensor:
    """``(N, n_tokens)`` greedy continuation (argmax, lowest id on ties), intervened if a site
    is given (``rows`` and ``joint`` as in :func:`intervened_logits`). The intervention
    rewrites the same prompt positions at every step; generated tokens are appended after
    each row's last prompt token."""
    edits: dict[Site, Edit] = {}
    if site is not None:
        if positions is None or sources is None or featurizer is None:
            raise ValueError("site: positions, sources and featurizer are needed with a site")
        edit = _position_edit(featurizer, positions, sources, rows=rows)
        edits = _edits(site, edit, joint, positions, rows)
    elif joint:
        raise ValueError("joint: further sites need a first site")
    ids, mask = ids.to(model.device), mask.to(model.device)
    N = ids.shape[0]
    lengths = mask.long().sum(1)
    out = torch.zeros((N, n_tokens), dtype=torch.long, device=ids.device)
    cur_ids, cur_mask = ids.clone(), mask.clone()
    with torch.no_grad():
        for step in range(n_tokens):
            logits, _ = forward_sites(model, cur_ids, cur_mask, edits=edits)
            token = logits.argmax(-1)
            out[:, step] = token
            if step + 1 == n_tokens:
                break
            width = int((lengths + step + 1).max())
            grown = torch.zeros((N, width), dtype=torch.long, device=ids.device)
            grown_mask = torch.zeros((N, width), dtype=torch.long, device=ids.device)
            grown[:, : cur_ids.shape[1]] = cur_ids[:, :width]
            grown_mask[:, : cur_mask.shape[1]] = cur_mask[:, :width]
            at = lengths + step
            grown[torch.arange(N, device=ids.device), at] = token
            grown_mask[torch.arange(N, device=ids.device), at] = 1
            cur_ids, cur_mask = grown, grown_mask
    return out
