"""The bundled planted CAUSAL-BENCH report: verify recomputes every number, each number agrees
with a slow baseline written from the paper and the spec, tampered claims give R103, unusable
declarations give R104, and the producer rewrites the example byte for byte."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

import mibspec
from mibspec_dev.compare_trees import compare_values

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "causal-bench-planted"
CREATED_EPOCH = "1779494400"  # 2026-05-23T00:00:00Z, the example's creation time


def _load(path: Path = EXAMPLE / "report.json") -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _codes(result: Any) -> list[tuple[str, str]]:
    return [(f.code, f.pointer) for doc in result.documents for f in doc.findings]


def _claimed_numbers(report: dict[str, Any]) -> int:
    """Every number and every set the claims state, counted independently of the recomputer."""
    claims = report["claims"]
    count = 0
    for method in claims["methods"]:
        count += 1 + len(method["runs"]) + 1  # identified set, seed-run sets, reduced set
        count += len(method["metrics"])
    conv = claims["convergence"]
    count += sum(key in conv for key in ("j_obs", "null_mean", "null_std", "z", "p"))
    count += 2 + sum(len(row) for row in claims["jaccard"]["matrix"])  # consensus, majority, matrix
    for point in claims["threshold_sensitivity"]["points"]:
        count += 1 + len(point["metrics"])
    count += sum(len(s["composites"]) for s in claims["weight_robustness"])
    for config in claims["scaling"]:
        count += 4 * len(config["methods"])  # set, precision, recall, f1
        count += sum(key in config["convergence"] for key in ("j_obs", "null_mean", "null_std", "z", "p"))
    return count


@pytest.fixture(scope="module")
def verified() -> Any:
    return mibspec.verify(EXAMPLE / "report.json")


@pytest.fixture(scope="module")
def recomputed(verified: Any) -> dict[str, float]:
    return {c.pointer: c.recomputed for c in verified.documents[0].comparisons}


def test_bundled_example_verifies_with_one_comparison_per_claim(verified: Any) -> None:
    assert verified.valid, _codes(verified)
    doc = verified.documents[0]
    assert doc.stages[mibspec.validator.Stage.RECOMPUTE][0].value == "passed"
    assert len(doc.comparisons) == _claimed_numbers(_load())
    assert all(c.within and c.claimed is not None for c in doc.comparisons)


def test_method_metrics_against_slow_baselines(slow: Any, recomputed: dict[str, float]) -> None:
    report = _load()
    behaviour, truth = report["behaviour"], set(report["ground_truth"])
    comps, beta = slow.planted_beta(behaviour, truth)
    contrib = slow.contributions(behaviour, comps, truth)
    weights = report["settings"]["weights"]
    for m, method in enumerate(report["claims"]["methods"]):
        base = f"/claims/methods/{m}/metrics"
        members = set(method["components"])
        # the identified set and every seed run are what the procedure gives (slow loops)
        assert method["components"] == slow.identify(method["procedure"], beta, comps, contrib, 0)
        for run in method["runs"]:
            assert run["components"] == slow.identify(method["procedure"], beta, comps, contrib, run["seed"])
        reduced = slow.greedy(beta, comps, members, report["settings"]["cos_threshold"])
        assert method["reduced"] == reduced
        values = {
            "F": slow.faithfulness(beta, comps, members),
            "C": slow.completeness(beta, comps, members),
            "M": 1 - len(members) / len(comps),
            "S": sum(
                slow.jaccard(set(a["components"]), set(b["components"]))
                for i, a in enumerate(method["runs"])
                for b in method["runs"][i + 1 :]
            )
            / math.comb(len(method["runs"]), 2),
            "COS": len(reduced) / len(members),
        }
        values["composite"] = slow.composite(values, weights)
        values["precision"], values["recall"], values["f1"] = slow.prf(members, truth)
        for key, value in values.items():
            assert recomputed[f"{base}/{key}"] == pytest.approx(value, rel=1e-12, abs=1e-12), (
                method["name"],
                key,
            )


def test_convergence_against_slow_permutation_loop(slow: Any, recomputed: dict[str, float]) -> None:
    report = _load()
    conv = report["claims"]["convergence"]
    sets = [set(m["components"]) for m in report["claims"]["methods"]]
    n = len(report["universe"])
    null = slow.null_statistics([len(s) for s in sets], n, conv["n_permutations"], conv["seed"])
    j_obs = slow.mean_pairwise(sets)
    mean = sum(null) / len(null)
    std = math.sqrt(sum((x - mean) ** 2 for x in null) / len(null))
    exceed = sum(1 for x in null if x >= j_obs - 1e-12)
    assert recomputed["/claims/convergence/j_obs"] == pytest.approx(j_obs, rel=1e-12)
    assert recomputed["/claims/convergence/null_mean"] == pytest.approx(mean, rel=1e-12)
    assert recomputed["/claims/convergence/null_std"] == pytest.approx(std, rel=1e-9)
    assert recomputed["/claims/convergence/z"] == pytest.approx((j_obs - mean) / std, rel=1e-9)
    assert recomputed["/claims/convergence/p"] == (1 + exceed) / (conv["n_permutations"] + 1)
    # the null mean of 1000 draws is near its exact hypergeometric expectation
    assert mean == pytest.approx(slow.expected_null([len(s) for s in sets], n), abs=4 * std / math.sqrt(1000))


def test_studies_against_slow_baselines(slow: Any, recomputed: dict[str, float]) -> None:
    report = _load()
    behaviour, truth = report["behaviour"], set(report["ground_truth"])
    comps, beta = slow.planted_beta(behaviour, truth)
    contrib = slow.contributions(behaviour, comps, truth)
    claims = report["claims"]
    study = claims["threshold_sensitivity"]
    method = next(m for m in claims["methods"] if m["name"] == study["method"])
    main = slow.scores(method["procedure"]["kind"], method["procedure"], beta, comps, contrib, 0)
    runs = [
        slow.scores(method["procedure"]["kind"], method["procedure"], beta, comps, contrib, run["seed"])
        for run in method["runs"]
    ]
    for p, point in enumerate(study["points"]):
        tau = point["threshold"]
        assert point["components"] == [c for c, v in zip(comps, main, strict=True) if v > tau]
        at_tau = [{c for c, v in zip(comps, scores, strict=True) if v > tau} for scores in runs]
        assert recomputed[f"/claims/threshold_sensitivity/points/{p}/metrics/S"] == pytest.approx(
            slow.mean_pairwise(at_tau), rel=1e-12
        )
    for s, scenario in enumerate(claims["weight_robustness"]):
        for method in claims["methods"]:
            parts = {key: method["metrics"][key] for key in scenario["weights"]}
            pointer = f"/claims/weight_robustness/{s}/composites/{method['name']}"
            assert recomputed[pointer] == pytest.approx(slow.composite(parts, scenario["weights"]), rel=1e-12)
        order = sorted(claims["methods"], key=lambda m: -scenario["composites"][m["name"]])
        assert scenario["ranking"] == [m["name"] for m in order]
    for config in claims["scaling"]:
        L, H = config["n_layers"], config["n_heads"]
        scaled = {**behaviour, "n_layers": L, "n_heads": H}
        truth_lh = slow.default_truth(L, H)
        comps_lh, beta_lh = slow.planted_beta(scaled, truth_lh)
        contrib_lh = slow.contributions(scaled, comps_lh, truth_lh)
        if L * H + L > 42:
            continue  # the slow greedy loop is quadratic in N; 2L/2H to 6L/6H cover the recipe
        for entry in config["methods"]:
            procedure = next(m["procedure"] for m in claims["methods"] if m["name"] == entry["name"])
            assert entry["components"] == slow.identify(
                procedure, beta_lh, comps_lh, contrib_lh, procedure["seed"]
            )
            assert (entry["precision"], entry["recall"], entry["f1"]) == pytest.approx(
                slow.prf(set(entry["components"]), truth_lh), rel=1e-12
            )


def test_paper_claims_that_hold_on_the_example() -> None:
    """§3.3, Table 1, Table 3 statements reproduced by the bundled run (measured, not forced)."""
    claims = _load()["claims"]
    by_name = {m["name"]: m for m in claims["methods"]}
    assert set(claims["majority"]) == set(_load()["ground_truth"])  # majority recovers S*
    assert by_name["circuit_discovery"]["metrics"]["S"] == 1.0
    assert by_name["circuit_discovery"]["metrics"]["precision"] == 1.0
    assert len(by_name["ablation_scanning"]["components"]) == 16  # Table 1: 16 of 20
    assert all(s["ranking"][0] == "circuit_discovery" for s in claims["weight_robustness"])
    assert claims["convergence"]["z"] > 1.96


@pytest.mark.slow
def test_producer_rewrites_the_example_up_to_float_rounding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mibspec.reference_impl.scoring.causal_bench import CausalBenchOptions, score_causal_bench

    monkeypatch.setenv("SOURCE_DATE_EPOCH", CREATED_EPOCH)
    run = score_causal_bench(CausalBenchOptions(tmp_path / "planted"))
    fresh = _load(run.report)
    shipped = _load()
    for data in (fresh, shipped):  # the tool version moves with releases
        data["provenance"].pop("tool")
        data["provenance"]["libraries"].pop("python")
    # Equal up to the last bits of a float: the shipped file was written on another machine.
    assert compare_values(shipped, fresh) == []
    with pytest.raises(FileExistsError):
        score_causal_bench(CausalBenchOptions(tmp_path / "planted"))


def _tampered(tmp_path: Path, change: Any) -> Path:
    folder = tmp_path / "planted"
    shutil.copytree(EXAMPLE, folder)
    data = _load(folder / "report.json")
    change(data)
    (folder / "report.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return folder / "report.json"


def test_tampered_claims_give_r103(tmp_path: Path) -> None:
    from mibspec.metrics import causal_bench as cb

    def tamper(data: dict[str, Any]) -> None:
        metrics = data["claims"]["methods"][0]["metrics"]
        metrics["F"] += 0.01  # keep the composite consistent, so that only recomputation can tell
        metrics["composite"] = cb.composite({k: metrics[k] for k in cb.COMPOSITE_KEYS})
        method = data["claims"]["methods"][1]
        run = method["runs"][0]["components"]
        extra = next(c for c in data["universe"] if c not in run)
        method["runs"][0]["components"] = [c for c in data["universe"] if c in {*run, extra}]
        method["metrics"]["S"] = cb.stability([set(r["components"]) for r in method["runs"]])
        method["metrics"]["composite"] = cb.composite({k: method["metrics"][k] for k in cb.COMPOSITE_KEYS})
        methods = data["claims"]["methods"]
        for scenario in data["claims"]["weight_robustness"]:
            for m in methods:
                parts = {k: m["metrics"][k] for k in scenario["weights"]}
                scenario["composites"][m["name"]] = cb.composite(parts, scenario["weights"])
            scenario["ranking"] = [
                m["name"] for m in sorted(methods, key=lambda m: -scenario["composites"][m["name"]])
            ]
        conv = data["claims"]["convergence"]
        conv["null_mean"] -= 0.01
        conv["z"] = (conv["j_obs"] - conv["null_mean"]) / conv["null_std"]

    result = mibspec.verify(_tampered(tmp_path, tamper))
    codes = _codes(result)
    assert not result.valid
    assert {code for code, _ in codes} == {"R103"}, codes
    pointers = {pointer for _, pointer in codes}
    assert {
        "/claims/methods/0/metrics/F",
        "/claims/methods/0/metrics/composite",
        "/claims/weight_robustness/0/composites/activation_patching",
        "/claims/methods/1/runs/0/components",  # S follows from the declared runs: not flagged
        "/claims/convergence/null_mean",
        "/claims/convergence/z",
    } <= pointers
    assert "/claims/methods/1/metrics/S" not in pointers
    finding = next(f for f in result.documents[0].findings if f.pointer == "/claims/methods/0/metrics/F")
    assert finding.data["claimed"] - finding.data["recomputed"] == pytest.approx(0.01, abs=1e-12)
    run_finding = next(f for f in result.documents[0].findings if f.pointer.endswith("/runs/0/components"))
    assert run_finding.data["recomputed"] == 1.0  # one component differs from the re-run


@pytest.mark.parametrize(
    ("change", "pointer"),
    [
        (
            lambda d: d["settings"].update({"perturbation": {"kind": "subsample", "subsample_size": 3}}),
            "/settings/perturbation/kind",
        ),
        (lambda d: d["behaviour"].pop("n_heads"), "/behaviour"),
        (
            lambda d: d["claims"]["methods"][2]["procedure"].update(
                {"kind": "circuit_discovery", "noise_sd": 0.5}
            ),
            "/claims/methods/2/procedure",
        ),
    ],
)
def test_unusable_declarations_give_r104(tmp_path: Path, change: Any, pointer: str) -> None:
    result = mibspec.verify(_tampered(tmp_path, change))
    assert ("R104", pointer) in _codes(result)
    assert result.documents[0].stages[mibspec.validator.Stage.RECOMPUTE][0].value == "failed"
