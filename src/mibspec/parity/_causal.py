"""Causal-variable parity: a report's subspace featurizers interchanged through pyvene and
through mibspec's engine, on the same model, rows and counterfactuals.

For every unit of the report whose featurizer is a subspace map read at each prompt's last
token of a residual-stream site (``residual_post``), and every counterfactual dataset it
scores, both sides intervene on every row; compared are the intervened logits at the base
prompt's last token and the interchange-intervention accuracy computed from each side's
argmax token with the same expected answers (``interventions[cf][variable]``, first token)
and the same example filter (the model right on the base and on the counterfactual).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ._circuit import ParityRow, _find_model

__all__ = ["PYVENE_PYTHON_ENV", "PYVENE_REQUIREMENTS", "compare_causal", "pyvene_python"]

PYVENE_PYTHON_ENV = "MIBSPEC_PYVENE_PYTHON"
PYVENE_REQUIREMENTS: tuple[tuple[str, ...], ...] = (
    ("torch==2.13.0",),
    ("pyvene==0.1.8", "transformers==4.57.6", "numpy==1.26.4"),
)
DRIVER = Path(__file__).with_name("_pyvene_driver.py")


def pyvene_python() -> Path | None:
    """``$MIBSPEC_PYVENE_PYTHON`` when it can import pyvene, else ``None``."""
    value = os.environ.get(PYVENE_PYTHON_ENV)
    if not value:
        return None
    probe = subprocess.run([value, "-c", "import pyvene"], capture_output=True, check=False, timeout=600)
    return Path(value) if probe.returncode == 0 else None


def _cases(
    report_path: Path, model_roots: list[Path]
) -> tuple[Path, list[dict[str, Any]], list[dict[str, Any]]]:
    from mibspec.core.sidecars import load_tensor, tensor_infos
    from mibspec.core.strict_json import read_json_lines

    folder = report_path.parent
    report = json.loads(report_path.read_text(encoding="utf-8"))
    artifacts = {a["id"]: a for a in report["artifacts"]}
    dataset_entry = artifacts[report["task"]["dataset"]]
    dataset = json.loads((folder / dataset_entry["path"]).read_text(encoding="utf-8"))
    with (folder / dataset["artifacts"][0]["path"]).open("rb") as handle:
        rows = [row for _, row in read_json_lines(handle)]
    cases = []
    for variable in report["claims"]["variables"]:
        for unit in variable["units"]:
            location = unit["location"]
            if location["component"] != "residual_post" or location["position"]["rule"] != "last":
                continue
            entry = artifacts[unit["featurizer"]]
            doc = json.loads((folder / entry["path"]).read_text(encoding="utf-8"))
            if doc["type"] != "subspace" or doc.get("error", "add_base_error") != "add_base_error":
                continue
            weights = next(a for a in doc["artifacts"] if a["id"] == doc["weights"]["rotation"]["artifact"])
            path = folder / weights["path"]
            rotation = np.array(load_tensor(path, tensor_infos(path, weights["media_type"])["rotation"]))
            indices = doc.get("feature_indices") or list(range(int(doc["n_features"])))
            for cf in unit["scores"]:
                cases.append(
                    {
                        "unit": unit["id"],
                        "variable": variable["name"],
                        "cf": cf,
                        "layer": int(location["layer"]),
                        "rotation": rotation.astype(np.float32),
                        "indices": [int(i) for i in indices],
                        "doc": doc,
                    }
                )
    return _find_model(report, folder, model_roots), rows, cases


def _pad(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)], mask[i, : len(r)] = r, 1
    return ids, mask


def compare_causal(
    report_path: Path, model_roots: list[Path], python: Path, rel_tol: float = 1e-5
) -> list[ParityRow]:
    """Rows comparing pyvene's and mibspec's interventions for every eligible unit × counterfactual."""
    import torch

    from mibspec.reference_impl.engine import forward_sites, load_model
    from mibspec.reference_impl.recompute import ModelSource, encode_function

    model_dir, rows, cases = _cases(Path(report_path), model_roots)
    model = load_model(model_dir)
    encode = encode_function(ModelSource(str(model_dir), None, local=True))
    base_ids, base_mask = _pad([encode(r["base"]["prompt"]) for r in rows])
    base_answer = np.array([encode(r["base"]["answer"])[0] for r in rows])
    with torch.no_grad():
        plain_base, _ = forward_sites(model, torch.tensor(base_ids), torch.tensor(base_mask))
    base = (base_ids, base_mask, plain_base.argmax(-1).numpy() == base_answer)
    prepared = [_prepare_case(model, encode, rows, case, base) for case in cases]
    logits = _run_pyvene(python, model_dir, [p[4] for p in prepared])
    result: list[ParityRow] = []
    for i, (case, ours, expected, valid, _) in enumerate(prepared):
        result += _case_rows(case, logits[f"logits_{i}"].astype(np.float64), ours, expected, valid, rel_tol)
    return result


def _prepare_case(
    model: Any, encode: Any, rows: list[dict[str, Any]], case: dict[str, Any], base: tuple[Any, Any, Any]
) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """mibspec's intervened logits for one case, the expected tokens, the rows where both
    prompts are answered right, and pyvene's job for the same intervention.

    ``base``: the padded base ids, their mask, and whether each base prompt is answered right.
    """
    import torch

    from mibspec.reference_impl.engine import Site, TorchFeaturizer, forward_sites, intervened_logits

    base_ids, base_mask, base_right = base
    cf = case["cf"]
    keep = [
        i for i, r in enumerate(rows) if cf in r["counterfactuals"] and r["counterfactuals"][cf].get("answer")
    ]
    src_ids, src_mask = _pad([encode(rows[i]["counterfactuals"][cf]["prompt"]) for i in keep])
    b_ids, b_mask = base_ids[keep], base_mask[keep]
    b_pos, s_pos = b_mask.sum(1) - 1, src_mask.sum(1) - 1
    site = Site(case["layer"], "residual_post")
    featurizer = TorchFeaturizer(case["doc"], {"rotation": case["rotation"]})
    with torch.no_grad():
        plain_src, recorded = forward_sites(
            model, torch.tensor(src_ids), torch.tensor(src_mask), record=[site]
        )
        sources = recorded[site][torch.arange(len(keep)), torch.tensor(s_pos)]
        ours = intervened_logits(
            model,
            torch.tensor(b_ids),
            torch.tensor(b_mask),
            site,
            torch.tensor(b_pos),
            sources,
            featurizer,
        ).numpy()
    cf_answer = np.array([encode(rows[i]["counterfactuals"][cf]["answer"])[0] for i in keep])
    expected = np.array([encode(rows[i]["interventions"][cf][case["variable"]])[0] for i in keep])
    valid = base_right[keep] & (plain_src.argmax(-1).numpy() == cf_answer)
    job = {
        "layer": case["layer"],
        "rotation": case["rotation"].tolist(),
        "indices": case["indices"],
        "base": b_ids.tolist(),
        "base_mask": b_mask.tolist(),
        "source": src_ids.tolist(),
        "source_mask": src_mask.tolist(),
        "base_position": b_pos.tolist(),
        "source_position": s_pos.tolist(),
    }
    return case, ours, expected, valid, job


def _run_pyvene(python: Path, model_dir: Path, cases: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """pyvene's intervened logits for every case (``logits_<i>``), run offline in its environment."""
    from safetensors.numpy import load_file

    with tempfile.TemporaryDirectory(prefix="mibspec-pyvene-") as tmp:
        job = {"model_dir": str(model_dir), "batch_size": 64, "cases": cases}
        (Path(tmp) / "job.json").write_text(json.dumps(job), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
        done = subprocess.run(
            [str(python), str(DRIVER), tmp], capture_output=True, text=True, env=env, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"pyvene failed:\n{done.stderr[-3000:]}")
        return load_file(str(Path(tmp) / "logits.safetensors"))


def _case_rows(
    case: dict[str, Any],
    theirs: np.ndarray,
    ours: np.ndarray,
    expected: np.ndarray,
    valid: np.ndarray,
    rel_tol: float,
) -> list[ParityRow]:
    """The largest logit difference and the two IIAs of one case."""
    name = f"{case['unit']} / {case['cf']}"
    diff = np.abs(theirs - ours)
    j = int(np.argmax(diff))
    logit_row = ParityRow(
        f"intervened logits {name}",
        float(theirs.ravel()[j]),
        float(ours.ravel()[j]),
        True,
        0.0,
        rel_tol,
        scale=float(np.abs(theirs).max()),
        group="intervened logits (pyvene)",
    )
    iia_theirs = float((theirs.argmax(-1) == expected)[valid].mean()) if valid.any() else 0.0
    iia_ours = float((ours.argmax(-1) == expected)[valid].mean()) if valid.any() else 0.0
    iia_row = ParityRow(f"IIA {name}", iia_theirs, iia_ours, True, 1e-5, 1e-5, group="IIA (pyvene)")
    return [logit_row, iia_row]
