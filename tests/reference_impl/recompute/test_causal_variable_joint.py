"""Joint causal-variable units (MV-10) written by ``score causal-variable --joint-head``, recomputed.

MIB's IOI baselines score a list of attention heads as one unit, each head through its own
featurizer (``--heads_list``). The command writes such a unit on the shipped tiny GPT-2: heads
1.0, 1.2 and 3.1 at every token, one full-vector featurizer per head.

Independent anchor: a slow implementation written here — the transformers model run one
prompt at a time, a forward pre-hook on the output projection of each layer the unit
touches, the counterfactual's head values at token i recorded and written at the base's
token i, site by site, through the float64 numpy feature map of each site's own featurizer
document; the kept pairs chosen from the rows and the model's unintervened answers; the IOI
target computed from the causal model's coefficients by hand — gives the same MSE and kept
pairs as recomputation. Tampered claims and broken joint sites give R103, V110 + R104 and
V105 at their pointers.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import mibspec
from mibspec.metrics.featurizers import NumpyFeaturizer

if TYPE_CHECKING:
    from conftest import SmallDataset

pytestmark = pytest.mark.recompute
torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "examples" / "models"
N_ROWS = 48
#: the heads of the joint unit as the command line gives them (unsorted on purpose)
HEADS = ("3:1", "1:2", "1:0")
SETS = ("random_names", "io_s2_flip")
VARIABLE = "output_token"
COMMON = [
    *("--method", "full_vector", "--position", "all", "--variable", VARIABLE),
    *(arg for cf in SETS for arg in ("-c", cf)),
]


def _score(root: Path, dataset: Path, name: str, args: list[str]) -> Path:
    out = root / name
    command = ["score", "causal-variable", "-m", str(MODELS / "tiny-gpt2"), "-d", str(dataset)]
    done = subprocess.run(
        [sys.executable, "-m", "mibspec", *command, *COMMON, *args, "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
        cwd=root,
        env={**os.environ, "NO_COLOR": "1", "SOURCE_DATE_EPOCH": "1748856600", "HF_HUB_OFFLINE": "1"},
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "conformant without recomputation" in done.stdout
    return out


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, small_ioi_dataset: SmallDataset) -> dict[str, Path]:
    """The joint unit's folder, and the folder of its location (head 1.0) scored alone."""
    root = tmp_path_factory.mktemp("joint")
    dataset = small_ioi_dataset(root, N_ROWS)
    joint = _score(root, dataset, "joint", [arg for head in HEADS for arg in ("--joint-head", head)])
    alone = _score(root, dataset, "alone", ["--component", "attention_heads", "--layer", "1", "--head", "0"])
    return {"joint": joint, "alone": alone}


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _artifact_path(folder: Path, ident: str) -> Path:
    return folder / next(a["path"] for a in _read(folder / "report.json")["artifacts"] if a["id"] == ident)


def _copy_changed(source: Path, target: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    shutil.copytree(source, target)
    path = target / "report.json"
    report = _read(path)
    change(report)
    path.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return path


def _findings(result: Any) -> dict[tuple[str, str], Any]:
    return {(f.code, f.pointer): f for doc in result.documents for f in doc.findings}


# --------------------------------------------------------------------------- slow implementation


class SlowJoint:
    """One prompt at a time through transformers, with pre-hooks on the output projections."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer
        from transformers import AutoModelForCausalLM

        self.hf = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=False).eval()
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.e = self.hf.config.n_embd // self.hf.config.n_head
        self.answers: dict[str, bool] = {}

    def ids(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def logits(
        self, ids: list[int], action: Callable[[int, Any], Any] | None = None, layers: tuple[int, ...] = ()
    ) -> np.ndarray:
        """The last position's logits; ``action(layer, values)`` sees (and may replace) the
        input of the output projection of each of ``layers``, ``(1, T, d_model)``."""
        handles = []
        if action is not None:
            for layer in layers:
                attention = self.hf.transformer.h[layer].attn.c_proj

                def pre(module: Any, args: tuple[Any, ...], layer: int = layer) -> Any:
                    return action(layer, args[0])

                handles.append(attention.register_forward_pre_hook(pre))
        try:
            with torch.no_grad():
                return self.hf(torch.tensor([ids])).logits[0, -1].double().numpy()  # type: ignore[no-any-return]
        finally:
            for handle in handles:
                handle.remove()

    def correct(self, prompt: dict[str, Any]) -> bool:
        if prompt["answer"] is None:
            return True
        if prompt["prompt"] not in self.answers:
            predicted = int(np.argmax(self.logits(self.ids(prompt["prompt"]))))
            self.answers[prompt["prompt"]] = predicted == self.ids(prompt["answer"])[0]
        return self.answers[prompt["prompt"]]

    def joint_logits(
        self, sites: list[tuple[int, int, NumpyFeaturizer]], base: str, source: str
    ) -> np.ndarray:
        """The base's logits with every site's head values at every token taken from the
        source run at the same token through that site's featurizer (rule ``all``)."""
        base_ids, source_ids = self.ids(base), self.ids(source)
        assert len(base_ids) == len(source_ids)
        e, recorded = self.e, {}

        def record(layer: int, values: Any) -> None:
            for i, (at, head, _) in enumerate(sites):
                if at == layer:
                    recorded[i] = values[0, :, head * e : (head + 1) * e].double().numpy().copy()

        def write(layer: int, values: Any) -> Any:
            values = values.clone()
            for i, (at, head, featurizer) in enumerate(sites):
                if at != layer:
                    continue
                for token in range(values.shape[1]):
                    now = values[0, token, head * e : (head + 1) * e].double().numpy()
                    new = featurizer.interchange(now[None], recorded[i][token][None])[0]
                    values[0, token, head * e : (head + 1) * e] = torch.as_tensor(new, dtype=values.dtype)
            return (values,)

        touched = tuple(sorted({layer for layer, _, _ in sites}))
        self.logits(source_ids, record, touched)
        return self.logits(base_ids, write, touched)


def _site_featurizers(folder: Path, unit: dict[str, Any]) -> list[tuple[int, int, NumpyFeaturizer]]:
    """(layer, head, featurizer) of the unit's location and of each joint site, read from files."""
    sites = []
    for site in (unit["location"], *unit.get("joint_sites", [])):
        ident = unit["featurizer"] if site is unit["location"] else site["featurizer"]
        document = _read(_artifact_path(folder, ident))
        assert document["type"] == "identity"
        assert not document.get("weights")
        [head] = site["heads"]
        sites.append((site["layer"], head, NumpyFeaturizer(document, {})))
    return sites


def _slow_scores(
    slow: SlowJoint, folder: Path, unit: dict[str, Any]
) -> tuple[dict[str, float], dict[str, int]]:
    """MSE of the IOI logit difference against the causal model's target, and kept pairs."""
    sites = _site_featurizers(folder, unit)
    params = _read(folder / "causal_model.json")["parameters"]
    rows = [json.loads(line) for line in (folder / "dataset.jsonl").read_text(encoding="utf-8").splitlines()]
    scores, counts = {}, {}
    for cf_type in SETS:
        errors = []
        for row in rows:
            base, source = row["base"], row["counterfactuals"][cf_type]
            b, s = base["variables"][VARIABLE], source["variables"][VARIABLE]
            if s is None or not (slow.correct(base) and slow.correct(source)):
                continue
            token_signal = 1.0 if s == b else -1.0  # output_token interchanged; the position kept
            target = params["bias"] + params["token_coeff"] * token_signal + params["position_coeff"]
            logits = slow.joint_logits(sites, base["prompt"], source["prompt"])
            names = (base["slots"]["name_a"], base["slots"]["name_b"])
            io = names[base["variables"]["output_position"]]
            subject = names[1 - base["variables"]["output_position"]]
            d = logits[slow.ids(" " + io)[0]] - logits[slow.ids(" " + subject)[0]]
            errors.append((d - target) ** 2)
        scores[cf_type], counts[cf_type] = float(np.mean(errors)), len(errors)
    return scores, counts


# --------------------------------------------------------------------------- the written report


@pytest.mark.slow
def test_the_written_unit_joins_every_head_with_its_own_featurizer(written: dict[str, Path]) -> None:
    folder = written["joint"]
    [variable] = _read(folder / "report.json")["claims"]["variables"]
    [unit] = variable["units"]
    every_token = {"rule": "all"}
    assert unit["location"] == {
        "layer": 1,
        "component": "attention_heads",
        "position": every_token,
        "heads": [0],
    }
    assert [(s["layer"], s["component"], s["heads"]) for s in unit["joint_sites"]] == [
        (1, "attention_heads", [2]),
        (3, "attention_heads", [1]),
    ]
    idents = [unit["featurizer"], *(s["featurizer"] for s in unit["joint_sites"])]
    assert len(set(idents)) == 3
    for ident, (layer, head) in zip(idents, [(1, 0), (1, 2), (3, 1)], strict=True):
        featurizer = _read(_artifact_path(folder, ident))
        assert featurizer["type"] == "identity"
        assert featurizer["input_dim"] == featurizer["n_features"] == 16  # d_model 64 / 4 heads
        assert featurizer["location"] == {
            "layer": layer,
            "component": "attention_heads",
            "position": every_token,
            "heads": [head],
        }
    # the unit counts under its location's layer
    assert list(variable["per_layer"]) == ["1"]
    assert variable["average"] == variable["best"] == variable["per_layer"]["1"]


@pytest.mark.slow
def test_an_honest_joint_report_verifies_and_equals_the_slow_implementation(written: dict[str, Path]) -> None:
    folder = written["joint"]
    result = mibspec.verify(folder / "report.json", model_roots=[MODELS])
    assert result.valid, [str(f) for f in result.findings]
    report = result.documents[0]
    assert report.stages[mibspec.validator.Stage.RECOMPUTE][0].value == "passed"
    [unit] = _read(folder / "report.json")["claims"]["variables"][0]["units"]
    # every claim compared: the dataset's rows, a score and a count per set, the layer's value,
    # the Average and best
    assert len(report.comparisons) == 1 + 2 * len(SETS) + 3
    assert all(c.within for c in report.comparisons)
    recomputed = {c.pointer: c.recomputed for c in report.comparisons}
    scores, counts = _slow_scores(SlowJoint(MODELS / "tiny-gpt2"), folder, unit)
    for cf_type in SETS:
        assert 0 < counts[cf_type] <= N_ROWS
        assert recomputed[f"/claims/variables/0/units/0/n_examples/{cf_type}"] == counts[cf_type]
        assert recomputed[f"/claims/variables/0/units/0/scores/{cf_type}"] == pytest.approx(
            scores[cf_type], rel=1e-5, abs=1e-4
        )


@pytest.mark.slow
def test_the_further_heads_change_the_scores(written: dict[str, Path]) -> None:
    """The joint unit is not its location scored alone: the same kept pairs (MV-10), other
    errors, each farther apart than recomputation's tolerance."""
    joint = _read(written["joint"] / "report.json")["claims"]["variables"][0]["units"][0]
    alone = _read(written["alone"] / "report.json")["claims"]["variables"][0]["units"][0]
    assert alone["location"] == joint["location"]
    assert "joint_sites" not in alone
    assert alone["n_examples"] == joint["n_examples"]
    for cf_type in SETS:
        assert abs(joint["scores"][cf_type] - alone["scores"][cf_type]) > 1e-2 * alone["scores"][cf_type]


# --------------------------------------------------------------------------- tampered and broken


@pytest.mark.slow
def test_a_joint_unit_score_moved_beyond_tolerance_is_r103_where_it_is_claimed(
    written: dict[str, Path], tmp_path: Path
) -> None:
    def move(report: dict[str, Any]) -> None:
        variable = report["claims"]["variables"][0]
        unit = variable["units"][0]
        unit["scores"]["io_s2_flip"] += 0.5
        mean = sum(unit["scores"].values()) / len(unit["scores"])
        # the aggregates follow, so that the claims agree with each other: only recomputation can tell
        variable["per_layer"]["1"] = variable["average"] = variable["best"] = mean

    path = _copy_changed(written["joint"], tmp_path / "moved", move)
    result = mibspec.verify(path, model_roots=[MODELS])
    assert not result.valid
    found = _findings(result)
    assert "C112" not in {code for code, _ in found}
    moved = found[("R103", "/claims/variables/0/units/0/scores/io_s2_flip")]
    assert moved.line is not None
    assert moved.column is not None
    assert '"io_s2_flip"' in path.read_text(encoding="utf-8").splitlines()[moved.line - 1]
    assert ("R103", "/claims/variables/0/per_layer/1") in found
    assert ("R103", "/claims/variables/0/units/0/scores/random_names") not in found


@pytest.mark.slow
def test_a_joint_site_without_its_featurizer_is_v110_and_r104(
    written: dict[str, Path], tmp_path: Path
) -> None:
    def drop(report: dict[str, Any]) -> None:
        del report["claims"]["variables"][0]["units"][0]["joint_sites"][1]["featurizer"]

    path = _copy_changed(written["joint"], tmp_path / "dropped", drop)
    result = mibspec.verify(path, model_roots=[MODELS])
    assert not result.valid
    found = _findings(result)
    gap = found[("V110", "/claims/variables/0/units/0")]
    assert gap.severity.value == "warning"
    assert "featurizer" in gap.message
    assert ("R104", "/claims/variables/0/units/0") in found
    assert not [
        c for c in result.documents[0].comparisons if c.pointer.startswith("/claims/variables/0/units")
    ]


@pytest.mark.slow
def test_a_joint_site_whose_featurizer_reads_another_head_is_v105(
    written: dict[str, Path], tmp_path: Path
) -> None:
    folder = tmp_path / "other-head"
    shutil.copytree(written["joint"], folder)
    report = _read(folder / "report.json")
    ident = report["claims"]["variables"][0]["units"][0]["joint_sites"][1]["featurizer"]  # head 3.1
    path = _artifact_path(folder, ident)
    featurizer = _read(path)
    featurizer["location"]["heads"] = [0]  # the same width, another head
    data = (json.dumps(featurizer, indent=2) + "\n").encode()
    path.write_bytes(data)
    entry = next(a for a in report["artifacts"] if a["id"] == ident)
    entry.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    (folder / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    result = mibspec.verify(folder / "report.json", model_roots=[MODELS])
    assert not result.valid
    found = _findings(result)
    assert ("V105", "/claims/variables/0/units/0/joint_sites/1") in found
    assert (
        "differs from its featurizer's"
        in found[("V105", "/claims/variables/0/units/0/joint_sites/1")].message
    )
    assert result.documents[0].stages[mibspec.validator.Stage.RECOMPUTE][0].value == "not_run"
