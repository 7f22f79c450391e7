"""Does recomputation work on a GPU, and does it give the CPU's numbers? One script, minutes.

On a machine with CUDA it:

1. verifies every bundled example that recomputes (``RECOMPUTED``) on the CPU and on the GPU
   (`mibspec verify --device …`), each with its verdict, time and recomputed values, and
   compares every value the two recomputed within the tolerance the report's profile gives
   its dtype (the larger of the two runs' tolerances);
2. scores the IOI circuit example's model in float16 and bfloat16 on the GPU (`score circuit
   --dtype … --device cuda`) and verifies each report on the GPU and on the CPU;
3. runs `--batch-size auto` on the GPU, once as is and once with an out-of-memory error induced
   in the first batch (the engine must halve the batch and reach the same verdict);
4. verifies the reports of 1–2 together on the GPU, grouped in one process and through Ray
   (``--executor ray``, one GPU per task) when Ray is installed;
5. times the circuit engine on the GPU against the CPU at GPT-2-small shape
   (``bench_circuit_engine.py``'s workload, random weights, 100 examples × 16 tokens).

Without CUDA it runs the CPU half of 1 (every example verified on the CPU, which must pass),
prints that the GPU half was skipped and why, and exits 0. Everything goes into one JSON
(``--json``, default ``gpu_check.json``); the exit code is 1 when any check failed.

    python benchmarks/gpu_check.py [--json OUT] [--device cuda:0] [--skip-timing]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "examples" / "models"
#: The bundled examples that verify with recomputation (examples/recomputed.json).
RECOMPUTED = tuple(
    json.loads((REPO / "examples" / "recomputed.json").read_text(encoding="utf-8"))["examples"]
)


def _verify(
    reports: list[Path], device: str, *extra: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """`mibspec verify` of ``reports`` on ``device``: exit code, time, and per report the
    verdict and recomputed values (pointer → (value, tolerance))."""
    # the bundled models, and the 16-bit copies _dtype_reports writes beside its reports
    roots = [
        MODELS,
        *sorted({r.parent.parent / "models" for r in reports if (r.parent.parent / "models").is_dir()}),
    ]
    command = [sys.executable, "-m", "mibspec", "verify", *map(str, reports)]
    command += [arg for root in roots for arg in ("--model-root", str(root))]
    command += ["--device", device, "-f", "json", *extra]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    run: dict[str, Any] = {"exit_code": done.returncode, "seconds": round(elapsed, 3), "reports": {}}
    try:
        output = json.loads(done.stdout)
    except ValueError:
        run["error"] = done.stderr[-2000:]
        return run
    for document in output["documents"]:
        if document["kind"] != "report":
            continue
        values = {
            row["pointer"]: [row["recomputed"], row["tolerance"]] for row in document.get("recomputed") or []
        }
        codes = sorted({f["code"] for f in document["findings"] if f["severity"] == "error"})
        run["reports"][document["path"]] = {"valid": document["valid"], "errors": codes, "recomputed": values}
    return run


def _agreement(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Every value both runs recomputed, compared within the larger of their tolerances."""
    worst, compared, outside = 0.0, 0, []
    for path, report in a["reports"].items():
        other = b["reports"].get(path, {}).get("recomputed", {})
        for pointer, (value, tolerance) in report["recomputed"].items():
            if pointer not in other:
                continue
            bound = max(tolerance, other[pointer][1])
            gap = abs(value - other[pointer][0])
            compared += 1
            worst = max(worst, gap / bound if bound else (0.0 if gap == 0 else float("inf")))
            if gap > bound:
                outside.append(f"{path}{pointer}: {value} vs {other[pointer][0]} (tolerance {bound})")
    return {"values_compared": compared, "largest_gap_over_tolerance": worst, "outside": outside[:20]}


def _passed(run: dict[str, Any]) -> bool:
    return run["exit_code"] == 0 and bool(run["reports"]) and all(r["valid"] for r in run["reports"].values())


def _stored_in(folder: Path, dtype: str) -> Path:
    """A copy of the IOI example's model at ``folder`` with its floating weights in ``dtype``."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(MODELS / "tiny-gpt2", folder)
    tensors = load_file(str(folder / "model.safetensors"))
    cast = {k: v.to(getattr(torch, dtype)) if v.is_floating_point() else v for k, v in tensors.items()}
    save_file(cast, str(folder / "model.safetensors"))
    return folder


def _dtype_reports(device: str, work: Path) -> tuple[list[Path], dict[str, Any]]:
    """The IOI example's model, its weights stored in float16 and in bfloat16 (a float32 model
    declared 16-bit is refused: SPEC.md M-6), scored in that dtype on ``device``; the copies
    are written under ``work/models``, which verification is given as a model root."""
    reports, runs = [], {}
    for dtype in ("float16", "bfloat16"):
        out = work / f"ioi-{dtype}"
        model = _stored_in(work / "models" / f"tiny-gpt2-{dtype}", dtype)
        command = [sys.executable, "-m", "mibspec", "score", "circuit", "--model", str(model)]
        command += ["--dataset", str(REPO / "examples" / "datasets" / "ioi" / "test.meta.json")]
        command += [
            "-c",
            "io_s2_flip",
            "--method",
            "eap",
            "--dtype",
            dtype,
            "--device",
            device,
            "-o",
            str(out),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        runs[f"score {dtype}"] = {
            "exit_code": done.returncode,
            "output": done.stdout[-500:] + done.stderr[-500:],
        }
        if done.returncode == 0:
            reports.append(out / "report.json")
    return reports, runs


#: Run in a child process: the first circuit batch raises CUDA's out-of-memory error, once.
_INDUCED_OOM = """
import sys, torch, mibspec
from mibspec.reference_impl import devices
real, calls = devices.with_oom_backoff, []
def induced(run, batch_size, **kwargs):
    def once(size):
        calls.append(size)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory (induced by gpu_check.py)")
        return run(size)
    return real(once, batch_size, **kwargs)
devices.with_oom_backoff = induced
result = mibspec.verify(sys.argv[1], model_roots=[sys.argv[2]], device=sys.argv[3], batch_size="auto")
print(result.valid, calls[:4])
"""


def _gpu_half(
    device: str, cpu: dict[str, Any], reports: list[Path], work: Path, timing: bool
) -> dict[str, Any]:
    checks: dict[str, Any] = {}
    gpu = _verify(reports, device)
    checks["examples on the GPU"] = {
        "passed": _passed(gpu),
        "run": gpu,
        "against the CPU": _agreement(gpu, cpu),
    }
    dtype_reports, scored = _dtype_reports(device, work)
    on_gpu, on_cpu = _verify(dtype_reports, device), _verify(dtype_reports, "cpu")
    checks["float16 and bfloat16"] = {
        "passed": len(dtype_reports) == 2 and _passed(on_gpu) and _passed(on_cpu),
        "scored": scored,
        "gpu": on_gpu,
        "cpu": on_cpu,
        "gpu against cpu": _agreement(on_gpu, on_cpu),
    }
    ioi = REPO / "examples" / "circuit-ioi" / "report.json"
    auto = _verify([ioi], device, "--batch-size", "auto")
    induced = subprocess.run(
        [sys.executable, "-c", _INDUCED_OOM, str(ioi), str(MODELS), device], capture_output=True, text=True
    )
    halved = induced.stdout.split(None, 1)
    checks["--batch-size auto"] = {
        "passed": _passed(auto) and induced.returncode == 0 and halved[:1] == ["True"],
        "run": auto,
        "induced out-of-memory": {
            "exit_code": induced.returncode,
            "output": induced.stdout + induced.stderr[-1000:],
        },
    }
    together = [*reports, *dtype_reports]
    grouped = _verify(together, device)
    checks["grouped"] = {
        "passed": _passed(grouped),
        "run": grouped,
        "against one by one": _agreement(grouped, gpu),
    }
    try:
        import ray  # noqa: F401

        on_ray = _verify(together, device, "--executor", "ray")
        checks["ray"] = {
            "passed": _passed(on_ray),
            "run": on_ray,
            "against grouped": _agreement(on_ray, grouped),
        }
    except ImportError:
        checks["ray"] = {"passed": None, "skipped": 'ray is not installed (pip install ".[ray]")'}
    if timing:
        checks["engine timing"] = _timing(device)
    return checks


def _timing(device: str) -> dict[str, Any]:
    """The circuit engine's curve at GPT-2-small shape on ``device`` and on the CPU."""
    code = """
import sys, time, torch
from mibspec.reference_impl.engine import evaluate_circuits, graph_universe, random_model, load_model
import tempfile, numpy as np
folder = random_model("gpt2", tempfile.mkdtemp(), n_layers=12, n_heads=12, d_model=768, vocab_size=50257,
                      n_positions=64)
model = load_model(folder, device=sys.argv[1])
gen = np.random.default_rng(0)
ids, cids = gen.integers(0, 50257, (100, 16)), gen.integers(0, 50257, (100, 16))
mask = np.ones((100, 16), dtype=np.int64)
universe = graph_universe(model)
scores = gen.standard_normal(universe.n_edges)
order = np.argsort(-scores)
circuits = np.zeros((10, universe.n_edges), dtype=bool)
for i, k in enumerate(np.linspace(0.1, 1.0, 10)):
    circuits[i, order[: int(k * universe.n_edges)]] = True
answers = gen.integers(0, 50257, 100)
start = time.perf_counter()
evaluate_circuits(model, ids, cids, mask, answers, answers[::-1].copy(), circuits, batch_size=20)
if sys.argv[1].startswith("cuda"):
    torch.cuda.synchronize()
print(time.perf_counter() - start)
"""
    times = {}
    for where in (device, "cpu"):
        done = subprocess.run(
            [sys.executable, "-c", code, where], capture_output=True, text=True, check=False
        )
        times[where] = float(done.stdout.split()[-1]) if done.returncode == 0 else done.stderr[-1000:]
    ratio = times["cpu"] / times[device] if all(isinstance(t, float) for t in times.values()) else None
    return {
        "passed": ratio is not None,
        "seconds": times,
        "cpu / gpu": ratio,
        "public evaluator": "not run: bench_public_evaluator.py runs the public code on the CPU only",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=Path("gpu_check.json"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--skip-timing", action="store_true", help="leave out the engine timing (5)")
    args = parser.parse_args()
    import torch

    results: dict[str, Any] = {"torch": torch.__version__, "cuda_build": torch.version.cuda}
    reports = [REPO / "examples" / name / "report.json" for name in RECOMPUTED]
    cpu = _verify(reports, "cpu")
    results["examples on the CPU"] = {"passed": _passed(cpu), "run": cpu}
    print(f"CPU: {len(cpu['reports'])} example reports verified, {'PASS' if _passed(cpu) else 'FAIL'}")
    if not torch.cuda.is_available():
        reason = f"no CUDA device (torch {torch.__version__}, built with CUDA {torch.version.cuda})"
        results["gpu"] = {"status": "skipped", "reason": reason}
        print(f"GPU half skipped: {reason}")
    else:
        os.environ.setdefault("CUDA_LAUNCH_BLOCKING", "0")
        with tempfile.TemporaryDirectory() as scratch:
            results["gpu"] = _gpu_half(args.device, cpu, reports, Path(scratch), not args.skip_timing)
        for name, check in results["gpu"].items():
            state = {True: "PASS", False: "FAIL", None: "skipped"}[check.get("passed")]
            print(f"GPU, {name}: {state}")
    args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(f"results: {args.json}")
    checks = [
        results["examples on the CPU"],
        *(results["gpu"].values() if "status" not in results["gpu"] else []),
    ]
    return 0 if all(c.get("passed") is not False for c in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
