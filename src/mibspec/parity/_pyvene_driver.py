"""pyvene side of the causal-variable parity check: interchange interventions through pyvene.

Executed as a script by the Python of an environment with pyvene, torch and transformers
(never imported by mibspec). Reads ``job.json`` from the folder given and writes
``logits.safetensors`` (``(N, V)`` float32 logits at each base prompt's last token):

    python _pyvene_driver.py JOB_FOLDER

Job fields: ``model_dir`` (a GPT-2 or Llama folder), ``batch_size`` and ``cases``, each with
``layer``, ``component`` (pyvene's: ``block_input``, ``block_output``, ``mlp_output``, or
``head_attention_value_output`` with ``head``, addressed as ``h.pos`` units),
``featurizer`` (``type``, ``n_features``, ``indices``, ``add_error``, ``centred``,
``activation``, ``k`` and ``weights`` as nested lists), ``base`` / ``source`` (``(N, T)``
right-padded ids), ``base_mask`` / ``source_mask``, ``base_positions`` /
``source_positions`` (per row, the positions written and read: one, or every token) and
``last`` (per row, the base's last token), and ``joint``: further sites (``layer``,
``component``, ``head``, ``featurizer``) of a joint unit, written at the same positions;
case i is written as ``logits_<i>``.

A case's sites are one pyvene intervention each, all in one group (``group_key`` 0, as
MIB's experiments group the model units of one intervention): pyvene reads every site's
source vectors from one unintervened run of the counterfactual, then runs the base once
with every site's hook set, each hook interchanging as the pass reaches it.

The intervention pyvene applies at each addressed vector is the one MIB's featurizers
define: ``(f, e) = F(base)``, ``f_s = F(source)``, the selected features of ``f`` replaced
by ``f_s``'s, and the result mapped back with the base's error added (``e = x − G(F(x))``,
or none when ``add_error`` is false). Rows are batched by their number of positions, as
pyvene stacks the positions of a batch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def run(folder: Path) -> None:
    import pyvene as pv
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)
    job = json.loads((folder / "job.json").read_text(encoding="utf-8"))
    model = AutoModelForCausalLM.from_pretrained(
        job["model_dir"], torch_dtype=torch.float32, attn_implementation="eager", trust_remote_code=False
    )
    model.eval()
    tensors = {}
    for i, case in enumerate(job["cases"]):
        tensors[f"logits_{i}"] = _case(pv, torch, model, case, int(job["batch_size"]))
    save_file(tensors, str(folder / "logits.safetensors"))


def _featurizer(torch: Any, spec: dict[str, Any]) -> tuple[Any, Any]:
    """``(encode, decode)`` of a declared featurizer."""
    w = {name: torch.tensor(value, dtype=torch.float32) for name, value in spec["weights"].items()}
    kind = spec["type"]
    if kind == "identity":
        return (lambda x: x), (lambda f: f)
    if kind in ("subspace", "rotation"):
        return (lambda x: x @ w["rotation"].T), (lambda f: f @ w["rotation"])
    if kind == "pca":
        if spec["centred"]:
            return (
                lambda x: ((x - w["mean"]) / w["scale"]) @ w["components"].T,
                lambda f: (f @ w["components"]) * w["scale"] + w["mean"],
            )
        return (lambda x: x @ w["components"].T), (lambda f: f @ w["components"])

    def encode(x: Any) -> Any:
        pre = x @ w["W_enc"] + w["b_enc"]
        if spec["activation"] == "relu":
            return torch.relu(pre)
        if spec["activation"] == "jumprelu":
            return pre * (pre > w["threshold"])
        top = torch.sort(pre, dim=-1, descending=True, stable=True).indices[..., : int(spec["k"])]
        return torch.zeros_like(pre).scatter(-1, top, torch.relu(pre.gather(-1, top)))

    return encode, (lambda f: f @ w["W_dec"] + w["b_dec"])


def _intervention(pv: Any, torch: Any, spec: dict[str, Any], width: int) -> Any:
    encode, decode = _featurizer(torch, spec)
    chosen = torch.zeros(int(spec["n_features"]), dtype=torch.bool)
    chosen[spec["indices"] if spec["indices"] is not None else slice(None)] = True

    class FeatureInterchange(pv.Intervention, pv.DistributedRepresentationIntervention):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)

        def forward(self, base: Any, source: Any, subspaces: Any = None, **kwargs: Any) -> Any:
            # pyvene hands several units flattened into the last dimension (pos) or stacked
            # (h.pos): the featurizer applies to each width-sized vector
            b, s = base.reshape(-1, width), source.reshape(-1, width)
            fb, fs = encode(b), encode(s)
            out = decode(torch.where(chosen, fs, fb))
            if spec["add_error"]:
                out = out + (b - decode(fb))
            return out.reshape(base.shape)

    return FeatureInterchange(embed_dim=width)


def _sites(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The case's sites: its first and each joint site (all written at the same positions)."""
    return [job, *job.get("joint", [])]


def _width(model: Any, site: dict[str, Any]) -> int:
    config = model.config
    if site["head"] is None:
        return int(config.hidden_size)
    return int(config.hidden_size) // int(config.num_attention_heads)


def _intervenable(pv: Any, torch: Any, model: Any, job: dict[str, Any], count: int) -> Any:
    """One intervenable model with an intervention per site, all in one group: one source
    input, read at every site in one run, and every site written in one base pass."""
    representations = [
        pv.RepresentationConfig(
            layer=int(site["layer"]),
            component=site["component"],
            unit="h.pos" if site["head"] is not None else "pos",
            max_number_of_units=count,
            intervention=_intervention(pv, torch, site["featurizer"], _width(model, site)),
            group_key=0,
        )
        for site in _sites(job)
    ]
    intervenable = pv.IntervenableModel(pv.IntervenableConfig(representations=representations), model)
    intervenable.disable_model_gradients()
    return intervenable


def _locations(job: dict[str, Any], rows: list[int]) -> dict[str, Any]:
    """``sources->base`` unit locations: per site, the positions read and written per row
    (``h.pos`` sites: the head, then the positions)."""
    src = [job["source_positions"][r] for r in rows]
    dst = [job["base_positions"][r] for r in rows]
    read, write = [], []
    for site in _sites(job):
        head = site["head"]
        read.append([[[head] for _ in rows], src] if head is not None else src)
        write.append([[[head] for _ in rows], dst] if head is not None else dst)
    return {"sources->base": (read, write)}


def _case(pv: Any, torch: Any, model: Any, job: dict[str, Any], size: int) -> Any:
    groups: dict[int, list[int]] = {}
    for row, positions in enumerate(job["base_positions"]):
        groups.setdefault(len(positions), []).append(row)
    base, source = torch.tensor(job["base"]), torch.tensor(job["source"])
    base_mask, source_mask = torch.tensor(job["base_mask"]), torch.tensor(job["source_mask"])
    out = torch.zeros((base.shape[0], model.config.vocab_size), dtype=torch.float32)
    for count, members in sorted(groups.items()):
        intervenable = _intervenable(pv, torch, model, job, count)
        for start in range(0, len(members), size):
            rows = members[start : start + size]
            with torch.no_grad():
                _, counterfactual = intervenable(
                    {"input_ids": base[rows], "attention_mask": base_mask[rows]},
                    [{"input_ids": source[rows], "attention_mask": source_mask[rows]}],
                    unit_locations=_locations(job, rows),
                )
            last = torch.tensor([job["last"][r] for r in rows])
            out[rows] = counterfactual.logits[torch.arange(len(rows)), last].to(torch.float32)
    return out.contiguous()


if __name__ == "__main__":
    run(Path(sys.argv[1]))
