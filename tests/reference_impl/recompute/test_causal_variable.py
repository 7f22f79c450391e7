"""The causal-variable recompute stage and producer, end to end on the shipped tiny models.

Independent anchor: a slow implementation written here — the transformers model run one
prompt at a time with a forward hook, token positions found by splitting words, the
float64 numpy feature map, the model's filter and the expected outputs read straight from
the rows, the IOI target computed from the causal model's coefficients by hand — gives the
same IIA, MSE and kept-pair counts as the batched engine recomputation. Tampered claims
give R103; broken declarations give R104 or rule findings at their pointers; Python files
next to a report are never imported.

MIB's IOI units read attention heads at every token (``AttentionHead(Layer:l,Head:h,Token:all)``,
the position rule ``all``). A report of such units, written by ``mibspec score causal-variable``
on the shipped tiny GPT-2, verifies through the command line with every claim recomputed; a
claim moved beyond its tolerance is R103 at its place, located in the file. The intervention
itself is checked against per-example hooks in ``tests/reference_impl/engine``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import mibspec
from mibspec.metrics.causal_variable import aggregate_scores
from mibspec.metrics.featurizers import NumpyFeaturizer

if TYPE_CHECKING:
    from conftest import CliRun, SmallDataset

pytestmark = pytest.mark.recompute
torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[3]
MODELS = REPO / "examples" / "models"
N_ROWS = 16


def _small_dataset(folder: Path, task: str) -> Path:
    source = REPO / "examples" / "datasets" / task
    lines = (source / "test.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:N_ROWS]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test.jsonl").write_text("".join(lines), encoding="utf-8")
    meta = json.loads((source / "test.meta.json").read_text(encoding="utf-8"))
    meta["filters"].append(
        {"name": "other", "kept": N_ROWS, "dropped": meta["rows"] - N_ROWS, "detail": "first rows"}
    )
    meta["rows"] = N_ROWS
    (folder / "test.meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder / "test.meta.json"


def _score(args: list[str], out: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "mibspec", "score", "causal-variable", *args, "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "SOURCE_DATE_EPOCH": "1748856600", "NO_COLOR": "1", "HF_HUB_OFFLINE": "1"},
        cwd=out.parent,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "conformant without recomputation" in completed.stdout


ARITHMETIC_ARGS = [
    "--method",
    "das",
    "--layer",
    "2",
    "--position",
    "last",
    "--position",
    "slot:operand_2",
    "-c",
    "ones_carry",
    "-c",
    "tens_digit_operand_1",
    "--train-rows",
    "60",
    "--steps",
    "8",
]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two small reports: DAS on addition (IIA) written by the command line, and the full vector on
    IOI (MSE) written by the producer function."""
    from mibspec.reference_impl.scoring.causal_variable import score_causal_variable

    root = tmp_path_factory.mktemp("cv")
    arithmetic = _small_dataset(root / "data-arithmetic", "arithmetic")
    ioi = _small_dataset(root / "data-ioi", "ioi")
    _score(["-m", str(MODELS / "tiny-gpt2"), "-d", str(arithmetic), *ARITHMETIC_ARGS], root / "arithmetic")
    score_causal_variable(
        MODELS / "tiny-gpt2",
        ioi,
        root / "ioi",
        method="full_vector",
        variables=["output_position"],
        layers=[2],
        positions=["slot:name_c"],
        counterfactuals=["io_s1_flip", "random_names"],
        train_rows=60,
    )
    return {"arithmetic": root / "arithmetic", "ioi": root / "ioi", "arithmetic-data": arithmetic}


def _codes(result: Any) -> list[tuple[str, str]]:
    return [(f.code, f.pointer) for doc in result.documents for f in doc.findings]


def _copy(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / source.name
    shutil.copytree(source, target)
    return target


def _edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _featurizer_path(folder: Path, ident: str) -> str:
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    return str(next(a["path"] for a in report["artifacts"] if a["id"] == ident))


def _rehash(report: Path, artifact_path: str) -> None:
    data = (report.parent / artifact_path).read_bytes()

    def change(doc: dict[str, Any]) -> None:
        entry = next(a for a in doc["artifacts"] if a["path"] == artifact_path)
        entry["sha256"], entry["bytes"] = hashlib.sha256(data).hexdigest(), len(data)

    _edit(report, change)


# --------------------------------------------------------------------------- slow implementation


def _words(text: str) -> list[str]:
    return re.findall(r"[^\s\W]+|[^\w\s]", text)


def _position(spec: dict[str, Any], prompt: dict[str, Any]) -> int:
    words = _words(prompt["prompt"])
    if spec["rule"] == "last":
        return len(words) - 1
    value = prompt["slots"][spec["slot"]]
    if spec["slot"] == "name_c":  # the third name of the prompt: after name_a and name_b
        names = [
            i
            for i, w in enumerate(words)
            if w in (prompt["slots"]["name_a"], prompt["slots"]["name_b"], value)
        ]
        return names[2]
    return max(i for i, w in enumerate(words) if w == value)


class Slow:
    """One prompt at a time through transformers, with a forward hook on the block's output."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer
        from transformers import AutoModelForCausalLM

        self.hf = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=False).eval()
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.cache: dict[tuple[Any, ...], Any] = {}

    def ids(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def last_logits(self, prompt: str, layer: int, edit: Any = None) -> np.ndarray:
        captured: dict[str, Any] = {}

        def hook(module: Any, args: Any, output: Any) -> Any:
            hidden = output[0] if isinstance(output, tuple) else output
            captured["hidden"] = hidden[0].double().numpy().copy()
            if edit is None:
                return None
            hidden = hidden.clone()
            edit(hidden[0])
            return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

        handle = self.hf.transformer.h[layer].register_forward_hook(hook)
        with torch.no_grad():
            logits = self.hf(torch.tensor([self.ids(prompt)])).logits[0, -1].double().numpy()
        handle.remove()
        self.captured = captured["hidden"]
        return logits

    def correct(self, prompt: dict[str, Any]) -> bool:
        if prompt["answer"] is None:
            return True
        key = ("correct", prompt["prompt"])
        if key not in self.cache:
            self.cache[key] = (
                int(np.argmax(self.last_logits(prompt["prompt"], 0))) == self.ids(prompt["answer"])[0]
            )
        return bool(self.cache[key])

    def hidden(self, prompt: str, layer: int) -> np.ndarray:
        key = ("hidden", prompt, layer)
        if key not in self.cache:
            self.last_logits(prompt, layer)
            self.cache[key] = self.captured
        return np.asarray(self.cache[key])


def _slow_unit(
    slow: Slow, folder: Path, unit: dict[str, Any], variable: str, metric: str, causal_model: dict[str, Any]
) -> tuple[dict[str, float], dict[str, int]]:
    featurizer_doc = json.loads(
        (folder / _featurizer_path(folder, unit["featurizer"])).read_text(encoding="utf-8")
    )
    weights = {}
    if featurizer_doc.get("weights"):
        from safetensors.numpy import load_file

        stored = load_file(str(folder / featurizer_doc["artifacts"][0]["path"]))
        weights = {name: stored[ref["tensor"]] for name, ref in featurizer_doc["weights"].items()}
    featurizer = NumpyFeaturizer(featurizer_doc, weights)
    layer, spec = unit["location"]["layer"], unit["location"]["position"]
    rows = [json.loads(line) for line in (folder / "dataset.jsonl").read_text(encoding="utf-8").splitlines()]
    params = causal_model["parameters"]
    scores, counts = {}, {}
    for cf_type in unit["scores"]:
        outcomes = []
        for row in rows:
            base, source = row["base"], row["counterfactuals"][cf_type]
            if metric == "mse":
                b, s = base["variables"][variable], source["variables"][variable]
                if s is None:
                    continue
                signal = 1.0 if s == b else -1.0
                target = params["bias"] + params["token_coeff"] + params["position_coeff"]
                coeff = params["position_coeff"] if variable == "output_position" else params["token_coeff"]
                target += coeff * (signal - 1.0)
            elif variable not in row["interventions"][cf_type]:
                continue
            if not (slow.correct(base) and slow.correct(source)):
                continue
            source_vector = slow.hidden(source["prompt"], layer)[_position(spec, source)]
            base_pos = _position(spec, base)

            def edit(
                hidden: Any, source_vector: np.ndarray = source_vector, base_pos: int = base_pos
            ) -> None:
                new = featurizer.interchange(hidden[base_pos].double().numpy()[None], source_vector[None])[0]
                hidden[base_pos] = torch.as_tensor(new, dtype=hidden.dtype)

            logits = slow.last_logits(base["prompt"], layer, edit)
            if metric == "mse":
                names = (base["slots"]["name_a"], base["slots"]["name_b"])
                io = names[base["variables"]["output_position"]]
                subject = names[1 - base["variables"]["output_position"]]
                d = logits[slow.ids(" " + io)[0]] - logits[slow.ids(" " + subject)[0]]
                outcomes.append((d - target) ** 2)
            else:
                expected = slow.ids(row["interventions"][cf_type][variable])
                outcomes.append(float(int(np.argmax(logits)) == expected[0] and len(expected) == 1))
        scores[cf_type] = float(np.mean(outcomes))
        counts[cf_type] = len(outcomes)
    return scores, counts


@pytest.mark.slow
@pytest.mark.parametrize("which", ["arithmetic", "ioi"])
def test_recomputation_equals_the_slow_implementation(reports: dict[str, Path], which: str) -> None:
    folder = reports[which]
    result = mibspec.verify(folder / "report.json", model_roots=[MODELS])
    assert result.valid, _codes(result)
    report = result.documents[0]
    assert report.stages[mibspec.validator.Stage.RECOMPUTE][0].value == "passed"
    recomputed = {c.pointer: c.recomputed for c in report.comparisons}
    data = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    causal_model = json.loads((folder / "causal_model.json").read_text(encoding="utf-8"))
    slow = Slow(MODELS / "tiny-gpt2")
    n_claims = 1
    for v, variable in enumerate(data["claims"]["variables"]):
        n_claims += 2 + len(variable["per_layer"])
        for u, unit in enumerate(variable["units"]):
            scores, counts = _slow_unit(
                slow, folder, unit, variable["name"], variable["metric"], causal_model
            )
            for cf_type in unit["scores"]:
                n_claims += 2
                pointer = f"/claims/variables/{v}/units/{u}"
                assert counts[cf_type] > 0
                assert recomputed[f"{pointer}/n_examples/{cf_type}"] == counts[cf_type]
                if variable["metric"] == "iia":
                    assert recomputed[f"{pointer}/scores/{cf_type}"] == scores[cf_type]
                else:
                    assert recomputed[f"{pointer}/scores/{cf_type}"] == pytest.approx(
                        scores[cf_type], rel=1e-5, abs=1e-4
                    )
    assert len(report.comparisons) == n_claims
    assert all(c.within for c in report.comparisons)


def test_tampered_score_is_not_reproduced(reports: dict[str, Path], tmp_path: Path) -> None:
    folder = _copy(reports["arithmetic"], tmp_path)

    def tamper(doc: dict[str, Any]) -> None:
        variable = doc["claims"]["variables"][0]
        unit = variable["units"][1]
        cf_type = next(iter(unit["scores"]))
        unit["scores"][cf_type] = 1.0 if unit["scores"][cf_type] < 0.5 else 0.0
        # keep the aggregates consistent with the claimed units, so that only recomputation can tell
        table = {
            (cf, u["location"]["layer"], u["id"]): s
            for u in variable["units"]
            for cf, s in u["scores"].items()
        }
        result = aggregate_scores(table, better="higher")
        variable["per_layer"] = {str(k): x for k, x in result.per_layer.items()}
        best = "best" if "best" in variable else "highest"  # spec 1.0 calls it highest
        variable["average"], variable[best] = result.average, result.best

    _edit(folder / "report.json", tamper)
    result = mibspec.verify(folder / "report.json", model_roots=[MODELS])
    assert not result.valid
    codes = _codes(result)
    cf_type = next(
        iter(json.loads((folder / "report.json").read_text())["claims"]["variables"][0]["units"][1]["scores"])
    )
    assert ("R103", f"/claims/variables/0/units/1/scores/{cf_type}") in codes
    assert {code for code, _ in codes} == {"R103"}


def test_unresolvable_position_is_r104(reports: dict[str, Path], tmp_path: Path) -> None:
    folder = _copy(reports["ioi"], tmp_path)
    report = folder / "report.json"
    unit = json.loads(report.read_text())["claims"]["variables"][0]["units"][0]
    featurizer_path = _featurizer_path(folder, unit["featurizer"])
    position = {"rule": "slot", "slot": "name_c", "occurrence": 1}  # the template has one {name_c}
    _edit(folder / featurizer_path, lambda d: d["location"].update(position=position))
    _rehash(report, featurizer_path)
    _edit(report, lambda d: d["claims"]["variables"][0]["units"][0]["location"].update(position=position))
    result = mibspec.verify(report, model_roots=[MODELS])
    assert _codes(result) == [("R104", "/claims/variables/0/units/0/location/position")]
    assert "occurrence 1 does not exist" in result.documents[0].findings[0].message


def test_broken_rotation_fails_the_rules_before_any_model_is_loaded(
    reports: dict[str, Path], tmp_path: Path
) -> None:
    from mibspec.validator import safetensors_bytes

    folder = _copy(reports["arithmetic"], tmp_path)
    report = folder / "report.json"
    unit = json.loads(report.read_text())["claims"]["variables"][0]["units"][0]
    featurizer_path = _featurizer_path(folder, unit["featurizer"])
    featurizer = json.loads((folder / featurizer_path).read_text())
    weights_path = featurizer["artifacts"][0]["path"]
    from safetensors.numpy import load_file

    rotation = load_file(str(folder / weights_path))["rotation"]
    (folder / weights_path).write_bytes(safetensors_bytes({"rotation": rotation * np.float32(1.05)}))
    _rehash(folder / featurizer_path, weights_path)
    _rehash(report, featurizer_path)
    result = mibspec.verify(report)  # no model root: recomputation must not even start
    codes = _codes(result)
    assert ("V101", "/weights/rotation") in codes
    assert ("A107", "/artifacts/2") in codes
    assert result.documents[0].stages[mibspec.validator.Stage.RECOMPUTE][0].value == "not_run"


def test_python_next_to_the_report_is_never_imported(reports: dict[str, Path], tmp_path: Path) -> None:
    folder = _copy(reports["ioi"], tmp_path)
    marker = tmp_path / "imported.txt"
    payload = f"open({str(marker)!r}, 'w').write('imported')\nraise SystemExit('submitted code ran')\n"
    for name in ("featurizer.py", "token_position.py", "causal_model.py", "__init__.py", "sitecustomize.py"):
        (folder / name).write_text(payload, encoding="utf-8")
    before = set(sys.modules)
    result = mibspec.verify(folder / "report.json", model_roots=[MODELS])
    assert result.valid, _codes(result)
    assert not marker.exists()
    assert not {"featurizer", "token_position", "causal_model"} & (set(sys.modules) - before)
    assert str(folder) not in sys.path


def test_producer_is_deterministic(
    reports: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The producer function writes the bytes the command line wrote (trained DAS weights included)."""
    from mibspec.reference_impl.scoring.causal_variable import score_causal_variable

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1748856600")
    score_causal_variable(
        MODELS / "tiny-gpt2",
        reports["arithmetic-data"],
        tmp_path / "again",
        method="das",
        layers=[2],
        positions=["last", "slot:operand_2"],
        counterfactuals=["ones_carry", "tens_digit_operand_1"],
        train_rows=60,
        steps=8,
    )
    first = reports["arithmetic"]
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in (tmp_path / "again").iterdir())
    for name in names:
        assert (first / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name


def test_malformed_rows_are_findings_not_tracebacks(reports: dict[str, Path], tmp_path: Path) -> None:
    folder = _copy(reports["ioi"], tmp_path)
    rows = (folder / "dataset.jsonl").read_text(encoding="utf-8").splitlines()
    broken = json.loads(rows[2])
    broken["counterfactuals"]["io_s1_flip"] = ["not", "a", "prompt"]
    rows[2] = json.dumps(broken, sort_keys=True, separators=(",", ":"))
    (folder / "dataset.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    _rehash(folder / "dataset.json", "dataset.jsonl")
    _rehash(folder / "report.json", "dataset.json")

    # the rules stage reports the row's format (V112), with or without a causal model to
    # derive the rows from; the report's dataset is then not conformant and nothing is recomputed
    def drop_model(doc: dict[str, Any]) -> None:
        del doc["causal_model"]
        doc["artifacts"] = [a for a in doc["artifacts"] if a["id"] != "causal-model"]

    def check() -> None:
        result = mibspec.verify(folder / "report.json", model_roots=[MODELS])
        dataset = next(doc for doc in result.documents if doc.path.endswith("dataset.json"))
        assert [(f.code, f.pointer) for f in dataset.findings] == [("V112", "/examples")]
        assert "row 3" in dataset.findings[0].message
        assert "/counterfactuals/io_s1_flip" in dataset.findings[0].message
        assert not result.valid
        assert not any(doc.comparisons for doc in result.documents)

    check()
    _edit(folder / "dataset.json", drop_model)
    _rehash(folder / "report.json", "dataset.json")
    check()

    # recomputation still reports a row it cannot read (R104) when it runs on one
    from mibspec.reference_impl.recompute._inputs import UnusableInputError
    from mibspec.reference_impl.recompute.circuit import tokenize_pairs

    with pytest.raises(UnusableInputError, match="row 2"):
        tokenize_pairs([json.loads(r) for r in rows], "io_s1_flip", lambda text: [1], "/task/dataset")


# --------------------------------------------------------------------------- IOI units at every token

_SCORE = [
    *("score", "causal-variable", "--method", "full_vector", "--component", "attention_heads"),
    *("--head", "0", "--head", "2", "--layer", "2", "--layer", "3", "--position", "all"),
    *("--variable", "output_token", "-c", "random_names", "-c", "io_s2_flip"),
]


@pytest.fixture(scope="module")
def every_token(tmp_path_factory: pytest.TempPathFactory, small_ioi_dataset: SmallDataset) -> Path:
    """The folder ``score causal-variable`` writes: full-vector featurizers of heads 0 and 2 at
    layers 2 and 3, at every token, scored on 48 rows of the shipped IOI test split."""
    root = tmp_path_factory.mktemp("every-token")
    dataset = small_ioi_dataset(root, 48)
    out = root / "report"
    args = [*_SCORE, "-m", str(MODELS / "tiny-gpt2"), "-d", str(dataset), "-o", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "mibspec", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=root,
        env={**os.environ, "NO_COLOR": "1", "SOURCE_DATE_EPOCH": "1748856600", "HF_HUB_OFFLINE": "1"},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return out


def _copy_changed(source: Path, target: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    shutil.copytree(source, target)
    path = target / "report.json"
    report = json.loads(path.read_text(encoding="utf-8"))
    change(report)
    path.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return path


def _cli_findings(stdout: str) -> dict[tuple[str, str], dict[str, Any]]:
    out = json.loads(stdout)
    return {(f["code"], f["pointer"]): f for d in out["documents"] for f in d["findings"]}


@pytest.mark.slow
def test_the_written_units_read_every_token_of_the_heads(every_token: Path) -> None:
    report = json.loads((every_token / "report.json").read_text(encoding="utf-8"))
    [variable] = report["claims"]["variables"]
    assert [u["location"] for u in variable["units"]] == [
        {"layer": layer, "component": "attention_heads", "position": {"rule": "all"}, "heads": [0, 2]}
        for layer in (2, 3)
    ]
    for unit in variable["units"]:
        featurizer = json.loads((every_token / f"{unit['featurizer'].replace('-', '_')}.json").read_text())
        assert featurizer["type"] == "identity"
        assert featurizer["location"] == unit["location"]
        assert featurizer["input_dim"] == 2 * 16  # two heads of d_model 64 / 4 heads
        assert set(unit["scores"]) == {"random_names", "io_s2_flip"}
        assert all(0 < n <= 48 for n in unit["n_examples"].values())


@pytest.mark.slow
def test_an_honest_report_verifies_with_every_claim_recomputed(
    every_token: Path, mibspec_cli: CliRun
) -> None:
    done = mibspec_cli(
        "verify", str(every_token / "report.json"), "--model-root", str(MODELS), "--format", "json"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    [report] = [d for d in out["documents"] if d["kind"] == "report"]
    assert {s["name"]: s["status"] for s in report["stages"]}["recompute"] == "passed"
    assert not [f for f in report["findings"] if f["severity"] in ("error", "warning")]


@pytest.mark.slow
def test_a_unit_score_moved_beyond_tolerance_is_r103_where_it_is_claimed(
    every_token: Path, tmp_path: Path, mibspec_cli: CliRun
) -> None:
    """The layer-3 unit's score on one set is moved by 0.5 (tolerance about 1e-5 relative) and
    the aggregates are moved with it, so that the claims agree with each other: only
    recomputation can tell."""

    def move(report: dict[str, Any]) -> None:
        variable = report["claims"]["variables"][0]
        unit = variable["units"][1]
        unit["scores"]["io_s2_flip"] += 0.5
        mean = sum(unit["scores"].values()) / len(unit["scores"])
        variable["per_layer"]["3"] = mean
        variable["average"] = (variable["per_layer"]["2"] + mean) / 2
        variable["best"] = min(variable["per_layer"]["2"], mean)  # MSE: lower is better

    path = _copy_changed(every_token, tmp_path / "moved", move)
    done = mibspec_cli("verify", str(path), "--model-root", str(MODELS), "--format", "json")
    assert done.returncode == 1, done.stdout + done.stderr
    found = _cli_findings(done.stdout)
    codes = {code for code, _ in found}
    assert "C112" not in codes  # the tampered claims are consistent with each other
    moved = found[("R103", "/claims/variables/0/units/1/scores/io_s2_flip")]
    assert moved["severity"] == "error"
    assert moved["line"] >= 1
    assert moved["column"] >= 1
    text = path.read_text(encoding="utf-8").splitlines()
    assert '"io_s2_flip"' in text[moved["line"] - 1]
    assert ("R103", "/claims/variables/0/per_layer/3") in found
    assert ("R103", "/claims/variables/0/average") in found
    # the other unit's claims were recomputed and agree
    assert not [p for c, p in found if c == "R103" and p.startswith("/claims/variables/0/units/0")]


@pytest.mark.slow
def test_a_move_within_tolerance_passes(every_token: Path, tmp_path: Path, mibspec_cli: CliRun) -> None:
    def nudge(report: dict[str, Any]) -> None:
        unit = report["claims"]["variables"][0]["units"][0]
        unit["scores"]["random_names"] *= 1 + 1e-9

    path = _copy_changed(every_token, tmp_path / "nudged", nudge)
    done = mibspec_cli("verify", str(path), "--model-root", str(MODELS), "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr


def _pin(entries: list[dict[str, Any]], ident: str, data: bytes) -> None:
    entry = next(a for a in entries if a["id"] == ident)
    entry.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))


@pytest.mark.slow
def test_prompts_of_different_lengths_at_every_token_are_r104_never_skipped(
    every_token: Path, tmp_path: Path, mibspec_cli: CliRun
) -> None:
    """Every random_names counterfactual starts with "So, ": its token i is no longer the base's
    token i. The rows still fill their templates and the files are re-pinned, so only
    recomputation can see it; it stops at the unit's position, naming the row."""
    folder = tmp_path / "longer"
    shutil.copytree(every_token, folder)
    rows = []
    for line in (folder / "dataset.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for key in ("prompt", "template"):
            row["counterfactuals"]["random_names"][key] = "So, " + row["counterfactuals"]["random_names"][key]
        rows.append(json.dumps(row))
    data = ("\n".join(rows) + "\n").encode()
    (folder / "dataset.jsonl").write_bytes(data)
    dataset = json.loads((folder / "dataset.json").read_text(encoding="utf-8"))
    _pin(dataset["artifacts"], "rows", data)
    data = json.dumps(dataset, indent=2).encode()
    (folder / "dataset.json").write_bytes(data)
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    _pin(report["artifacts"], report["task"]["dataset"], data)
    (folder / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    done = mibspec_cli("verify", str(folder / "report.json"), "--model-root", str(MODELS), "--format", "json")
    assert done.returncode == 1, done.stdout + done.stderr
    found = _cli_findings(done.stdout)
    assert set(found) == {("R104", "/claims/variables/0/units/0/location/position")}
    [finding] = found.values()
    assert "rule 'all' writes the counterfactual's token i at the base's token i" in finding["message"]
    assert "random_names prompt" in finding["message"]
    assert finding["line"] >= 1
