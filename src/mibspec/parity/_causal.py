"""Causal-variable parity: featurizers interchanged through pyvene and through mibspec's
engine, on the same model, rows, counterfactuals and token positions.

Three sources of cases:

* :func:`causal_parity` (``mibspec parity causal-variable``) and :func:`compare_causal`:
  every unit of a causal-variable report whose sites pyvene can address (the residual stream
  entering or leaving a layer, an MLP's output, one attention head's output before the
  output projection) and whose token position resolves (any rule but ``named``), with the
  report's featurizers, for every counterfactual set it scores; a joint unit (MV-10) is
  intervened on at its location and every joint site in one pass, as recomputation does.
  :func:`causal_parity` lists the units it cannot compare, with the reason;
* :func:`compare_featurizers`: a seeded set of declared featurizers of every type (identity,
  subspace, rotation, PCA centred and uncentred, SAE with ReLU, JumpReLU and top-k) at
  residual, MLP and attention-head sites, at the last token, a template slot, a fixed index
  and every token (``all``, MIB's IOI units), on a report's model and dataset;
* :func:`compare_joint`: seeded joint units (MV-10, :func:`joint_units`), several sites
  each with its own featurizer written in one forward pass, on tiny GPT-2 and tiny Llama
  with a report's dataset: pyvene gets one intervention per site, all in one group (one
  unintervened counterfactual run feeds every site), mibspec ``intervened_logits(...,
  joint=...)``.

Both sides intervene on every row: the counterfactual's vectors are read at its resolved
positions and their selected features written at the base's (pyvene's ``block_input``,
``block_output``, ``mlp_output`` and ``head_attention_value_output`` (``h.pos``) hooks on
the transformers model; mibspec's own forward). Compared are the intervened logits at the
base prompt's last token and the interchange-intervention accuracy computed from each side's
argmax with the same expected answers (``interventions[cf][variable]``, first token) and the
same example filter (the model right on the base and on the counterfactual). A row whose
prompts cannot be aligned for ``all`` (different lengths) is left out of both sides.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from mibspec.metrics.featurizers import unit_sites

from ._circuit import ParityRow, _find_model

__all__ = [
    "PYVENE_PYTHON_ENV",
    "PYVENE_REQUIREMENTS",
    "CausalParity",
    "causal_parity",
    "compare_causal",
    "compare_featurizers",
    "compare_joint",
    "joint_units",
    "pyvene_missing",
    "pyvene_python",
]

PYVENE_PYTHON_ENV = "MIBSPEC_PYVENE_PYTHON"
PYVENE_REQUIREMENTS: tuple[tuple[str, ...], ...] = (
    ("torch==2.13.0",),
    ("pyvene==0.1.8", "transformers==4.57.6", "numpy==1.26.4"),
)
DRIVER = Path(__file__).with_name("_pyvene_driver.py")
#: mibspec's components and the pyvene component that hooks the same tensor.
PYVENE_COMPONENTS = {
    "residual_pre": "block_input",
    "residual_post": "block_output",
    "mlp_output": "mlp_output",
    "attention_heads": "head_attention_value_output",
}


def pyvene_python(python: Path | None = None) -> Path | None:
    """``python``, else ``$MIBSPEC_PYVENE_PYTHON``, when it can import pyvene; else ``None``."""
    value = str(python) if python is not None else os.environ.get(PYVENE_PYTHON_ENV)
    if not value:
        return None
    try:
        probe = subprocess.run([value, "-c", "import pyvene"], capture_output=True, check=False, timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(value) if probe.returncode == 0 else None


def pyvene_missing(python: Path | None = None) -> str:
    """What to say when no Python with pyvene is found: how to build its environment."""
    named = f"{python}" if python is not None else f"${PYVENE_PYTHON_ENV}"
    installs = "; then ".join(f"`bin/pip install {' '.join(group)}`" for group in PYVENE_REQUIREMENTS)
    return (
        f"{named} names no Python that imports pyvene. Build its environment: "
        f"`python3 -m venv ~/.cache/mibspec/pyvene-env`, then in it {installs} (the CPU torch wheel "
        f"first); pass its bin/python as --pyvene-python or in ${PYVENE_PYTHON_ENV}"
    )


@dataclass(frozen=True)
class _Write:
    """A further site of a joint unit (MV-10): its location and featurizer."""

    location: dict[str, Any]
    doc: dict[str, Any]
    weights: dict[str, np.ndarray]


@dataclass
class _Case:
    """One featurizer at one location, intervened with one counterfactual set; with ``joint``
    further sites written in the same pass at the same positions (a joint unit, MV-10)."""

    unit: str
    variable: str
    cf: str
    location: dict[str, Any]
    doc: dict[str, Any]
    weights: dict[str, np.ndarray]
    joint: tuple[_Write, ...] = ()


def _not_addressable(location: dict[str, Any]) -> str | None:
    """Why pyvene's hooks cannot reach the location or its position cannot be resolved, or
    ``None`` when they can."""
    if location["position"]["rule"] == "named":
        return f"position {location['position'].get('name')!r} is only known by name"
    if location["component"] not in PYVENE_COMPONENTS:
        return f"pyvene has no hook for component {location['component']!r}"
    if location["component"] == "attention_heads" and len(location.get("heads") or []) != 1:
        return "an attention location of several heads (pyvene hooks one head per intervention)"
    return None


def _addressable(location: dict[str, Any]) -> bool:
    """Whether pyvene's hooks reach the location and its position resolves."""
    return _not_addressable(location) is None


def _inside(folder: Path, relative: str) -> Path:
    """``folder / relative``, refused when it leaves ``folder`` (an artifact path of a report
    is relative to the report's folder and stays inside it)."""
    path = folder / relative
    if not path.resolve().is_relative_to(folder.resolve()):
        raise ValueError(f"artifact path {relative!r} leaves the folder {str(folder)!r}")
    return path


def _report_inputs(report_path: Path) -> tuple[dict[str, Any], Path, list[dict[str, Any]]]:
    from mibspec.core.strict_json import read_json_lines

    folder = report_path.parent
    report = json.loads(report_path.read_text(encoding="utf-8"))
    artifacts = {a["id"]: a for a in report["artifacts"]}
    dataset_path = _inside(folder, artifacts[report["task"]["dataset"]]["path"])
    dataset = json.loads(dataset_path.read_text(encoding="utf-8"))
    with _inside(dataset_path.parent, dataset["artifacts"][0]["path"]).open("rb") as handle:
        rows = [row for _, row in read_json_lines(handle)]
    return report, folder, rows


def _report_cases(
    report: dict[str, Any], folder: Path, not_compared: list[tuple[str, str]] | None = None
) -> list[_Case]:
    """One case per unit with a featurizer × counterfactual set it scores, a joint unit's
    sites (MV-10) as the case's ``joint`` writes; a unit that cannot be compared is entered in
    ``not_compared`` as ``("variable: unit id", reason)``."""
    artifacts = {a["id"]: a for a in report["artifacts"]}
    cases = []
    for variable in report["claims"]["variables"]:
        for unit in variable["units"]:
            reason = _not_comparable(unit)
            if reason is not None:
                if not_compared is not None:
                    not_compared.append((f"{variable['name']}: {unit['id']}", reason))
                continue
            first, *rest = [
                _read_write(site.location, site.featurizer, artifacts, folder) for site in unit_sites(unit)
            ]
            cases += [
                _Case(unit["id"], variable["name"], cf, first.location, first.doc, first.weights, tuple(rest))
                for cf in unit["scores"]
            ]
    return cases


def _not_comparable(unit: dict[str, Any]) -> str | None:
    """Why a unit cannot be compared (no featurizer, a site pyvene cannot address), or ``None``."""
    sites = unit_sites(unit)
    if any(site.featurizer is None for site in sites):
        return "a site of the unit declares no featurizer"
    for site in sites:
        reason = _not_addressable(site.location)
        if reason is not None:
            return reason
    return None


def _read_write(
    location: dict[str, Any], ident: str, artifacts: dict[str, dict[str, Any]], folder: Path
) -> _Write:
    """A site with its featurizer document and weights, read from the report's folder."""
    from mibspec.reference_impl.recompute.causal_variable import read_featurizer_weights

    doc_path = _inside(folder, artifacts[ident]["path"])
    doc = json.loads(doc_path.read_text(encoding="utf-8"))
    weights = read_featurizer_weights(doc, doc_path.parent, "/featurizer")
    return _Write(location, doc, {k: np.asarray(v, dtype=np.float32) for k, v in weights.items()})


@dataclass
class CausalParity:
    """pyvene's and mibspec's values for a report's units (:func:`causal_parity`), and the
    units or unit × counterfactual cases not compared, each with the reason."""

    rows: list[ParityRow]
    not_compared: list[tuple[str, str]]


def causal_parity(
    report_path: Path, model_roots: Sequence[Path], python: Path, rel_tol: float = 1e-5
) -> CausalParity:
    """Every unit × counterfactual set of a causal-variable report through pyvene and through
    mibspec; the units whose sites pyvene cannot address, and the cases without a row to
    intervene on, listed as not compared. The report is read as it is: verify it first
    (``mibspec.verify(path, recompute=False)``), so that its artifacts are inside its folder
    and match their hashes.

    Raises:
        ValueError: the report cannot be compared (not a causal-variable report, no model).
    """
    report, folder, rows = _report_inputs(Path(report_path))
    if report.get("track") != "causal_variable":
        raise ValueError(f"{report_path} is not a causal-variable report")
    not_compared: list[tuple[str, str]] = []
    # the variables of a report may share unit ids: each row names its variable
    cases = [replace(c, unit=f"{c.variable}: {c.unit}") for c in _report_cases(report, folder, not_compared)]
    model_dir = _find_model(report, folder, list(model_roots))
    compared = _compare(model_dir, rows, cases, python, rel_tol, not_compared) if cases else []
    return CausalParity(compared, not_compared)


def compare_causal(
    report_path: Path, model_roots: list[Path], python: Path, rel_tol: float = 1e-5
) -> list[ParityRow]:
    """Rows comparing pyvene's and mibspec's interventions for every eligible unit × counterfactual."""
    report, folder, rows = _report_inputs(Path(report_path))
    cases = _report_cases(report, folder)
    return _compare(_find_model(report, folder, model_roots), rows, cases, python, rel_tol)


def compare_featurizers(
    report_path: Path, model_roots: list[Path], python: Path, rel_tol: float = 1e-5, seed: int = 0
) -> list[ParityRow]:
    """Rows comparing pyvene and mibspec on :func:`declared_featurizers` of every type, on
    the model and dataset of ``report_path`` (its first variable and counterfactual sets)."""
    report, folder, rows = _report_inputs(Path(report_path))
    model_dir = _find_model(report, folder, model_roots)
    config = report["model"]["config"]
    variable = report["claims"]["variables"][0]
    cfs = list(variable["units"][0]["scores"])[:2]
    cases = [
        _Case(name, variable["name"], cf, location, doc, weights)
        for name, location, doc, weights in declared_featurizers(
            int(config["d_model"]), int(config["d_model"]) // int(config["n_heads"]), seed
        )
        for cf in cfs
    ]
    return _compare(model_dir, rows, cases, python, rel_tol)


#: the models the joint cases run on, each with the IOI report's dataset (one tokenizer)
JOINT_MODELS = ("tiny-gpt2", "tiny-llama")


def compare_joint(
    report_path: Path,
    model_roots: list[Path],
    python: Path,
    rel_tol: float = 1e-5,
    seed: int = 0,
    models: tuple[str, ...] = JOINT_MODELS,
) -> list[ParityRow]:
    """Rows comparing pyvene and mibspec on the :func:`joint_units` (MV-10) on each model of
    ``models`` (found under ``model_roots``), with the dataset of ``report_path`` (its first
    variable and counterfactual sets); each row's group names its model."""
    report, _, rows = _report_inputs(Path(report_path))
    variable = report["claims"]["variables"][0]
    cfs = list(variable["units"][0]["scores"])[:2]
    out: list[ParityRow] = []
    for name in models:
        model_dir = _find_model({"model": {"path": name}}, Path(report_path).parent, model_roots)
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        d_model = int(config.get("n_embd") or config["hidden_size"])
        n_heads = int(config.get("n_head") or config["num_attention_heads"])
        cases = [
            _Case(unit, variable["name"], cf, first.location, first.doc, first.weights, tuple(rest))
            for unit, (first, *rest) in joint_units(d_model, d_model // n_heads, seed)
            for cf in cfs
        ]
        for row in _compare(model_dir, rows, cases, python, rel_tol):
            row.quantity = f"{name}: {row.quantity}"
            row.group = f"joint units, {name}: {row.group}"
            out.append(row)
    return out


def joint_units(d_model: int, d_head: int, seed: int = 0) -> list[tuple[str, list[_Write]]]:
    """``(name, sites)`` of seeded joint units (MV-10), every site with its own subspace
    featurizer: three attention heads on two layers at every token (two heads of layer 1 as
    separate sites, then one of layer 2: MIB's IOI units), and a residual-stream site with a
    later attention head at the last token."""
    rng = np.random.default_rng(seed)

    def subspace(location: dict[str, Any], n: int, indices: list[int]) -> _Write:
        width = _dim(location, d_model, d_head)
        doc = {"type": "subspace", "n_features": n, "feature_indices": indices, "input_dim": width}
        return _Write(location, doc, {"rotation": _orthonormal_rows(rng, n, width)})

    every, last = {"rule": "all"}, {"rule": "last"}
    heads = [
        subspace(_at(1, "attention_heads", every, 0), 4, [0, 2]),
        subspace(_at(1, "attention_heads", every, 2), 4, [1, 3]),
        subspace(_at(2, "attention_heads", every, 1), 4, [0, 1, 2]),
    ]
    stream = [
        subspace(_at(1, "residual_post", last), 12, [0, 1, 4, 5, 7, 8, 9, 11]),
        subspace(_at(2, "attention_heads", last, 3), 8, [0, 2, 4, 6]),
    ]
    return [
        ("joint: L1 h0 + L1 h2 + L2 h1 [all]", heads),
        ("joint: L1 residual_post + L2 h3 [last]", stream),
    ]


def _orthonormal_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    q, _ = np.linalg.qr(rng.normal(size=(d, n)))
    return np.ascontiguousarray(q.T).astype(np.float32)


Declared = tuple[str, dict[str, Any], dict[str, Any], dict[str, np.ndarray]]


def declared_featurizers(d_model: int, d_head: int, seed: int = 0) -> list[Declared]:
    """``(name, location, featurizer document, weights)`` of each featurizer type, seeded:
    the classes a MIB submission may hold as mibspec declares them (DAS, DBM+SVD, DBM+PCA:
    ``subspace``; DBM and the full vector: ``identity`` with or without indices; SAE:
    ``sae``) and the other declared types (``rotation``, centred ``pca``)."""
    rng = np.random.default_rng(seed)
    out = _residual_featurizers(rng, d_model)
    out += [
        (
            "head subspace, last",
            _at(1, "attention_heads", {"rule": "last"}, 2),
            {"type": "subspace", "n_features": 4},
            {"rotation": _orthonormal_rows(rng, 4, d_head)},
        ),
        (
            "head identity, all tokens",
            _at(2, "attention_heads", {"rule": "all"}, 1),
            {"type": "identity", "n_features": d_head},
            {},
        ),
        (
            "head subspace, all tokens (IOI)",
            _at(1, "attention_heads", {"rule": "all"}, 3),
            {"type": "subspace", "n_features": 4, "feature_indices": [0, 2]},
            {"rotation": _orthonormal_rows(rng, 4, d_head)},
        ),
    ]
    return [
        (f"{name} @ {_where(loc)}", loc, doc | {"input_dim": _dim(loc, d_model, d_head)}, w)
        for name, loc, doc, w in out
    ]


def _at(layer: int, component: str, position: dict[str, Any], head: int | None = None) -> dict[str, Any]:
    return {"layer": layer, "component": component, "position": position} | (
        {"heads": [head]} if head is not None else {}
    )


def _sae(
    rng: np.random.Generator, d: int, activation: str, extra: dict[str, np.ndarray]
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """An SAE of 2·d latents (decoder = encoderᵀ), three latents interchanged."""
    n = 2 * d
    w_enc = rng.normal(scale=d**-0.5, size=(d, n)).astype(np.float32)
    weights = {
        "W_enc": w_enc,
        "b_enc": rng.normal(scale=0.1, size=n).astype(np.float32),
        "W_dec": np.ascontiguousarray(w_enc.T),
        "b_dec": rng.normal(scale=0.1, size=d).astype(np.float32),
    } | extra
    doc = {"type": "sae", "n_features": n, "sae_activation": activation, "feature_indices": [0, 3, 5]}
    return doc | ({"sae_k": 16} if activation == "topk" else {}), weights


def _residual_featurizers(rng: np.random.Generator, d: int) -> list[Declared]:
    """The residual-stream and MLP cases of :func:`declared_featurizers`."""
    slot, last = {"rule": "slot", "slot": "name_c"}, {"rule": "last"}
    pca = {
        "components": _orthonormal_rows(rng, 8, d),
        "mean": rng.normal(size=d).astype(np.float32),
        "scale": rng.uniform(0.5, 2.0, size=d).astype(np.float32),
    }
    return [
        ("identity (full vector)", _at(1, "residual_post", last), {"type": "identity", "n_features": d}, {}),
        (
            "identity, indices (DBM)",
            _at(2, "residual_post", slot),
            {"type": "identity", "n_features": d, "feature_indices": list(range(0, d, 3))},
            {},
        ),
        (
            "subspace (DAS, DBM+SVD, DBM+PCA)",
            _at(2, "residual_pre", {"rule": "index", "index": 1}),
            {"type": "subspace", "n_features": 12, "feature_indices": [0, 1, 4, 5, 7, 8, 9, 11]},
            {"rotation": _orthonormal_rows(rng, 12, d)},
        ),
        (
            "rotation",
            _at(1, "mlp_output", last),
            {"type": "rotation", "n_features": d, "feature_indices": list(range(d // 2))},
            {"rotation": _orthonormal_rows(rng, d, d)},
        ),
        (
            "pca, centred",
            _at(1, "residual_post", slot),
            {"type": "pca", "n_features": 8, "pca_centring": "centred"},
            pca,
        ),
        (
            "pca, uncentred",
            _at(1, "residual_post", last),
            {"type": "pca", "n_features": 8, "pca_centring": "uncentred", "feature_indices": [1, 2]},
            {"components": pca["components"]},
        ),
        ("sae, relu", _at(2, "residual_post", last), *_sae(rng, d, "relu", {})),
        (
            "sae, jumprelu",
            _at(2, "residual_post", last),
            *_sae(rng, d, "jumprelu", {"threshold": np.full(2 * d, 0.05, np.float32)}),
        ),
        ("sae, topk", _at(2, "residual_post", last), *_sae(rng, d, "topk", {})),
    ]


def _where(location: dict[str, Any]) -> str:
    heads = f" h{location['heads'][0]}" if location.get("heads") else ""
    rule = location["position"]
    position = rule.get("slot") or (str(rule.get("index")) if rule["rule"] == "index" else rule["rule"])
    return f"L{location['layer']} {location['component']}{heads} [{position}]"


def _dim(location: dict[str, Any], d_model: int, d_head: int) -> int:
    return d_head if location["component"] == "attention_heads" else d_model


def _pad(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)], mask[i, : len(r)] = r, 1
    return ids, mask


@dataclass
class _Inputs:
    """The model, its tokenizer, the rows and each row's base tokens and correctness."""

    model: Any
    codec: Any
    rows: list[dict[str, Any]]
    base: list[tuple[list[int], list[tuple[int, int]]]]
    base_right: np.ndarray
    plain: np.ndarray  # (N, V) each base prompt's last logits without an intervention


class _NoRowsError(ValueError):
    """No row of the dataset has a counterfactual of the case whose positions align."""


def _compare(
    model_dir: Path,
    rows: list[dict[str, Any]],
    cases: list[_Case],
    python: Path,
    rel_tol: float,
    not_compared: list[tuple[str, str]] | None = None,
) -> list[ParityRow]:
    """The rows of every case; a case without a row to intervene on raises, or with
    ``not_compared`` is entered there as ``("unit / counterfactual set", reason)``."""
    import torch

    from mibspec.reference_impl.engine import forward_sites, load_model
    from mibspec.reference_impl.recompute import ModelSource
    from mibspec.reference_impl.recompute.causal_variable import TextCodec

    model = load_model(model_dir)
    codec = TextCodec(ModelSource(str(model_dir), None, local=True))
    base = [codec.encode_offsets(r["base"]["prompt"]) for r in rows]
    base_ids, base_mask = _pad([b[0] for b in base])
    with torch.no_grad():
        plain, _ = forward_sites(model, torch.tensor(base_ids), torch.tensor(base_mask))
    answers = np.array([codec.encode(r["base"]["answer"])[0] for r in rows])
    plain_logits = plain.numpy().astype(np.float64)
    inputs = _Inputs(model, codec, rows, base, plain_logits.argmax(-1) == answers, plain_logits)
    prepared = []
    for case in cases:
        try:
            prepared.append(_prepare_case(inputs, case))
        except _NoRowsError as exc:
            if not_compared is None:
                raise
            not_compared.append((f"{case.unit} / {case.cf}", str(exc)))
    if not prepared:
        return []
    logits = _run_pyvene(python, model_dir, [p[4] for p in prepared])
    result: list[ParityRow] = []
    for i, (case, ours, expected, valid, job) in enumerate(prepared):
        clean = inputs.plain[job["rows"]]
        theirs = logits[f"logits_{i}"].astype(np.float64)
        result += _case_rows(case, (theirs, ours, clean), expected, valid, rel_tol)
    return result


def _aligned_positions(
    inputs: _Inputs, case: _Case
) -> tuple[
    list[int], list[tuple[list[int], list[tuple[int, int]]]], list[tuple[int, ...]], list[tuple[int, ...]]
]:
    """The rows used (a counterfactual with an answer and an expected output, positions that
    resolve and align), their counterfactual tokens, and the base and source positions."""
    from mibspec.metrics.positions import PositionError, resolve_positions

    keep, sources, base_at, source_at = [], [], [], []
    position = case.location["position"]
    for i, row in enumerate(inputs.rows):
        cf = row["counterfactuals"].get(case.cf)
        expected = (row.get("interventions", {}).get(case.cf) or {}).get(case.variable)
        if not cf or not cf.get("answer") or expected is None:
            continue
        source = inputs.codec.encode_offsets(cf["prompt"])
        try:
            b = resolve_positions(
                position, row["base"], inputs.base[i][0], inputs.base[i][1], inputs.codec.encode
            )
            s = resolve_positions(position, cf, source[0], source[1], inputs.codec.encode)
        except PositionError:
            continue
        if len(b) == len(s):
            keep.append(i)
            sources.append(source)
            base_at.append(b)
            source_at.append(s)
    return keep, sources, base_at, source_at


def _our_logits(
    inputs: _Inputs,
    case: _Case,
    base: tuple[np.ndarray, np.ndarray],
    source: tuple[np.ndarray, np.ndarray],
    at: tuple[list[tuple[int, ...]], list[tuple[int, ...]]],
) -> tuple[np.ndarray, np.ndarray]:
    """mibspec's side of one case: the counterfactuals' plain last logits and the intervened
    base logits. Every site's sources are read from one unintervened counterfactual run and
    written at the base positions ``at[0]`` in one pass (MV-10 for a joint case)."""
    import torch

    from mibspec.reference_impl.engine import (
        JointWrite,
        Site,
        TorchFeaturizer,
        forward_sites,
        intervened_logits,
    )

    base_at, source_at = at
    sites = [Site.from_location(case.location), *(Site.from_location(w.location) for w in case.joint)]
    with torch.no_grad():
        plain_src, recorded = forward_sites(
            inputs.model, torch.tensor(source[0]), torch.tensor(source[1]), record=sites
        )
        read = [torch.cat([recorded[s][j, list(p)] for j, p in enumerate(source_at)]) for s in sites]
        joint = [
            JointWrite(s, TorchFeaturizer(w.doc, w.weights), vectors)
            for s, w, vectors in zip(sites[1:], case.joint, read[1:], strict=True)
        ]
        ours = intervened_logits(
            inputs.model,
            torch.tensor(base[0]),
            torch.tensor(base[1]),
            sites[0],
            torch.tensor([p for ps in base_at for p in ps]),
            read[0],
            TorchFeaturizer(case.doc, case.weights),
            rows=torch.tensor([j for j, ps in enumerate(base_at) for _ in ps]),
            joint=joint,
        ).numpy()
    return plain_src.numpy(), ours


def _prepare_case(
    inputs: _Inputs, case: _Case
) -> tuple[_Case, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """mibspec's intervened logits for one case, the expected tokens, the rows where both
    prompts are answered right, and pyvene's job for the same intervention."""
    keep, sources, base_at, source_at = _aligned_positions(inputs, case)
    if not keep:
        raise _NoRowsError(f"{case.unit} / {case.cf}: no row has a counterfactual whose positions align")
    src_ids, src_mask = _pad([s[0] for s in sources])
    b_ids, b_mask = _pad([inputs.base[i][0] for i in keep])
    plain_src, ours = _our_logits(inputs, case, (b_ids, b_mask), (src_ids, src_mask), (base_at, source_at))
    encode, rows_kept = inputs.codec.encode, [inputs.rows[i] for i in keep]
    cf_answer = np.array([encode(r["counterfactuals"][case.cf]["answer"])[0] for r in rows_kept])
    expected = np.array([encode(r["interventions"][case.cf][case.variable])[0] for r in rows_kept])
    valid = inputs.base_right[keep] & (plain_src.argmax(-1) == cf_answer)
    job = _site_job(case.location, case.doc, case.weights) | {
        "joint": [_site_job(w.location, w.doc, w.weights) for w in case.joint],
        "base": b_ids.tolist(),
        "base_mask": b_mask.tolist(),
        "source": src_ids.tolist(),
        "source_mask": src_mask.tolist(),
        "base_positions": [list(p) for p in base_at],
        "source_positions": [list(p) for p in source_at],
        "last": (b_mask.sum(1) - 1).tolist(),
        "rows": keep,
    }
    return case, ours, expected, valid, job


def _site_job(
    location: dict[str, Any], doc: dict[str, Any], weights: dict[str, np.ndarray]
) -> dict[str, Any]:
    """One site as the driver reads it: pyvene's layer, component and head, and its featurizer."""
    return {
        "layer": int(location["layer"]),
        "component": PYVENE_COMPONENTS[location["component"]],
        "head": (location.get("heads") or [None])[0],
        "featurizer": _featurizer_job(doc, weights),
    }


def _featurizer_job(doc: dict[str, Any], weights: dict[str, np.ndarray]) -> dict[str, Any]:
    """The featurizer as the driver reads it: its type, options and weights as lists."""
    return {
        "type": doc["type"],
        "n_features": int(doc["n_features"]),
        "indices": doc.get("feature_indices"),
        "add_error": doc.get("error", "add_base_error") == "add_base_error",
        "centred": doc.get("pca_centring") == "centred",
        "activation": doc.get("sae_activation"),
        "k": doc.get("sae_k"),
        "weights": {name: np.asarray(w, dtype=np.float32).tolist() for name, w in weights.items()},
    }


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
    case: _Case,
    logits: tuple[np.ndarray, np.ndarray, np.ndarray],
    expected: np.ndarray,
    valid: np.ndarray,
    rel_tol: float,
) -> list[ParityRow]:
    """The largest logit difference, the two sides' intervention effects (largest change of a
    logit from the plain run) and the two IIAs of one case; ``logits``: pyvene's, mibspec's
    and the plain run's, ``(N, V)`` each."""
    theirs, ours, clean = logits
    name = f"{case.unit} / {case.cf}"
    diff = np.abs(theirs - ours)
    j = int(np.argmax(diff))
    note = f"{len(theirs)} rows, {int(valid.sum())} kept for IIA"
    logit_row = ParityRow(
        f"intervened logits {name}",
        float(theirs.ravel()[j]),
        float(ours.ravel()[j]),
        True,
        0.0,
        rel_tol,
        note=note,
        scale=float(np.abs(theirs).max()),
        group="intervened logits (pyvene)",
    )
    iia_theirs = float((theirs.argmax(-1) == expected)[valid].mean()) if valid.any() else 0.0
    iia_ours = float((ours.argmax(-1) == expected)[valid].mean()) if valid.any() else 0.0
    iia_row = ParityRow(
        f"IIA {name}", iia_theirs, iia_ours, True, 1e-5, 1e-5, note=note, group="IIA (pyvene)"
    )
    effect_theirs, effect_ours = float(np.abs(theirs - clean).max()), float(np.abs(ours - clean).max())
    effect_row = ParityRow(
        f"intervention effect {name}",
        effect_theirs,
        effect_ours,
        True,
        0.0,
        rel_tol,
        note=note,
        scale=float(np.abs(theirs).max()),
        group="intervention effect (pyvene)",
    )
    return [logit_row, effect_row, iia_row]
