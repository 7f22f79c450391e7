"""pyvene side of the causal-variable parity check: an interchange intervention through pyvene.

Executed as a script by the Python of an environment with pyvene, torch and transformers
(never imported by mibspec). Reads ``job.json`` from the folder given and writes
``logits.safetensors`` (``(N, V)`` float32 logits at each base prompt's last token):

    python _pyvene_driver.py JOB_FOLDER

Job fields: ``model_dir`` (a GPT-2 folder), ``batch_size`` and ``cases``, each with
``layer`` (the block whose output is the site, mibspec's ``residual_post``), ``rotation``
(``(n, d)`` subspace featurizer rows), ``indices`` (the features interchanged), ``base`` /
``source`` (``(N, T)`` right-padded ids), ``base_mask`` / ``source_mask``,
``base_position`` / ``source_position`` (``(N,)``); case i is written as ``logits_<i>``.
The interchange written through pyvene's hooks at ``block_output`` is
``x_base + ((x_source − x_base)·R_Iᵀ)·R_I``: the featurizer's selected features taken from
the source, the rest and the base's error kept (a subspace featurizer with the base error).
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


def _case(pv: Any, torch: Any, model: Any, job: dict[str, Any], size: int) -> Any:
    rotation = torch.tensor(job["rotation"], dtype=torch.float32)[job["indices"]]  # (k, d)

    class SubspaceInterchange(pv.Intervention, pv.DistributedRepresentationIntervention):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)

        def forward(self, base: Any, source: Any, subspaces: Any = None, **kwargs: Any) -> Any:
            return base + ((source - base) @ rotation.T) @ rotation

    config = pv.IntervenableConfig(
        representations=[
            pv.RepresentationConfig(
                layer=int(job["layer"]),
                component="block_output",
                unit="pos",
                max_number_of_units=1,
                intervention=SubspaceInterchange(embed_dim=model.config.n_embd),
            )
        ]
    )
    intervenable = pv.IntervenableModel(config, model)
    intervenable.disable_model_gradients()
    base, source = torch.tensor(job["base"]), torch.tensor(job["source"])
    base_mask, source_mask = torch.tensor(job["base_mask"]), torch.tensor(job["source_mask"])
    base_pos, source_pos = job["base_position"], job["source_position"]
    out = []
    with torch.no_grad():
        for start in range(0, base.shape[0], size):
            sl = slice(start, start + size)
            _, counterfactual = intervenable(
                {"input_ids": base[sl], "attention_mask": base_mask[sl]},
                [{"input_ids": source[sl], "attention_mask": source_mask[sl]}],
                unit_locations={
                    "sources->base": (
                        [[[p] for p in source_pos[sl]]],
                        [[[p] for p in base_pos[sl]]],
                    )
                },
            )
            logits = counterfactual.logits
            rows = torch.arange(logits.shape[0])
            out.append(logits[rows, torch.tensor(base_pos[sl])].to(torch.float32))
    return torch.cat(out).contiguous()


if __name__ == "__main__":
    run(Path(sys.argv[1]))
