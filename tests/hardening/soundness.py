"""The soundness harness: a false number in a bundled example never verifies.

For every bundled example that verifies with recomputation, the harness makes false claims
and must see verification refuse each of them:

* every numeric claim (read from the claim catalogue: the values of its ``recomputed`` and
  ``derived`` rows) moved beyond its tolerance — by 2× and by 10× the tolerance of its row's
  class, and to a plausible wrong value (another claim of the same row, or 10 % off);
* every component set recomputation compares, with a member dropped;
* declarations that could widen what is accepted — a rounding (coarser than the profile
  accepts, at the profile's coarsest with a claim just beyond it), counts, sizes, the
  profile, conventions, settings and the model declaration — each changed together with a
  claim it makes false.

Controls keep the harness honest: the example as shipped verifies, and so does the example
with every rounded claim printed honestly at the profile's coarsest rounding.

Verification is ``mibspec``'s own, run on a copy of the example's folder with one
recomputation session per example (models, activations). A perturbation that changes only
claimed values of rows the catalogue marks ``recomputed``, and roundings, is verified with
the recompute stage replaying the example's recorded recomputation: the recomputer's
comparisons with their claimed values read again from the perturbed report, then the stage's
own code (catalogue checks, rounding, R103, R130). That is the same code path as verify's
wherever the recomputed values do not depend on those claims, which
``test_soundness.py::test_replay_is_the_recomputation`` checks by recomputing every
example with all such claims changed at once. Everything else is verified with real
recomputation.

Run as a script, the harness writes its counts (``--summary FILE``), as in
``benchmarks/RESULTS.md``:

    python tests/hardening/soundness.py [--examples NAME ...] [--summary FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import importlib
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import numpy as np

from mibspec.core.claims import ClaimInstance, claim_catalogue, pointer_tokens
from mibspec.core.comparisons import Recomputation, recompute_tolerance
from mibspec.core.pointers import escape_pointer_token
from mibspec.core.profiles import load_profile
from mibspec.core.rounding import Rounding
from mibspec.core.tracks import TRACKS
from mibspec.validator import Stage, StageStatus, VerifyOptions, verify_paths

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
MODELS = EXAMPLES / "models"

#: The bundled examples that verify with recomputation, cheapest first (examples/recomputed.json).
RECOMPUTED_EXAMPLES: tuple[str, ...] = tuple(
    json.loads((EXAMPLES / "recomputed.json").read_text(encoding="utf-8"))["examples"]
)
#: Examples whose real recomputation, once its session holds the model and activations, takes a
#: fraction of a second: every perturbation of theirs is verified with real recomputation.
ALWAYS_RECOMPUTED = frozenset({"causal_bench", "circuit-ioi"})

Edit = Callable[[dict[str, Any]], None]


# --------------------------------------------------------------------------- JSON pointers


def get_at(doc: Any, pointer: str) -> Any:
    node = doc
    for token in pointer_tokens(pointer):
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node


def set_at(doc: Any, pointer: str, value: Any) -> None:
    *head, last = pointer_tokens(pointer)
    parent = get_at(doc, "".join("/" + escape_pointer_token(t) for t in head))
    if isinstance(parent, list):
        parent[int(last)] = value
    else:
        parent[last] = value


# --------------------------------------------------------------------------- perturbations


@dataclass(frozen=True)
class Perturbation:
    """A change to a report that makes a number false (or, for a control, keeps every number true).

    Attributes:
        name: what is changed, with the pointer.
        kind: ``claim`` (a claimed value), ``set`` (a component set), ``declaration`` (a
            declaration changed together with a claim it makes false) or ``control``.
        edit: changes the report in place.
        replay: only claimed values of ``recomputed`` rows and roundings change, so the recorded
            recomputation may be replayed (see the module's docstring).
        valid: what verification must say (``False``: refused; ``True`` for controls).
    """

    name: str
    kind: str
    edit: Edit
    replay: bool = False
    valid: bool = False


def _tolerance(doc: dict[str, Any], claim: ClaimInstance) -> float:
    """The widest tolerance any check of ``claim`` allows: its row's class under the report's
    profile (the recompute tolerance for the model's dtype where a model is involved)."""
    profile = load_profile(str(doc.get("profile", "default")))
    consistency = float(profile["consistency"]["abs"]), float(profile["consistency"]["rel"])
    tolerances = [consistency]
    if claim.row.tolerance == "exact":
        return 0.0
    if claim.row.tolerance == "recompute" and isinstance(doc.get("model"), dict):
        tolerances.append(recompute_tolerance(profile, doc["model"].get("dtype", "float32")))
    value = abs(float(claim.value))
    return max(a + r * value for a, r in tolerances)


def _away(value: float) -> float:
    """The direction a claim is moved in: towards the middle of [0, 1], where the schema's bounds
    of rates and scores leave room."""
    return -1.0 if value > 0.5 else 1.0


def claims_to_perturb(doc: dict[str, Any]) -> list[ClaimInstance]:
    """The report's numeric claims that a check compares: values of ``recomputed`` and ``derived`` rows."""
    return [
        claim
        for claim in claim_catalogue().instances(doc)
        if claim.row.numeric and claim.row.check in ("recomputed", "derived")
    ]


def claim_perturbations(doc: dict[str, Any], rng: np.random.Generator) -> list[Perturbation]:
    """Each numeric claim at 2× and 10× its tolerance from its value, and at a plausible wrong value."""
    claims = claims_to_perturb(doc)
    by_row: dict[str, list[float]] = {}
    for claim in claims:
        by_row.setdefault(claim.row.pointer, []).append(float(claim.value))
    found = []
    for claim in claims:
        value = float(claim.value)
        replay = claim.row.check == "recomputed"
        if claim.row.type == "integer":
            moves = [("+1", int(value) + 1), ("+10", int(value) + 10)]
            plausible = int(value) + max(2, round(0.1 * value))
        else:
            tolerance = _tolerance(doc, claim)
            sign = _away(value)
            # One tolerance more than named: the claim may already sit a tolerance from the truth.
            moves = [(f"{k}×tolerance", value + sign * (k + 1) * tolerance * 1.01) for k in (2, 10)]
            others = [v for v in by_row[claim.row.pointer] if abs(v - value) > 20 * tolerance + 1e-12]
            plausible = float(rng.choice(others)) if others else value + sign * 0.1 * max(1.0, abs(value))
        moves.append(("plausible", plausible))
        for label, new in moves:
            found.append(
                Perturbation(f"{claim.pointer} {label}", "claim", _setter(claim.pointer, new), replay=replay)
            )
    return found


def _setter(pointer: str, value: Any) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        set_at(doc, pointer, value)

    return edit


def set_perturbations(doc: dict[str, Any]) -> list[Perturbation]:
    """Each component set recomputation compares, with its first member dropped (or, when empty,
    a member of the universe added)."""
    found = []
    for claim in claim_catalogue().instances(doc):
        if claim.row.type != "set" or claim.row.check != "recomputed":
            continue
        members = list(claim.value)
        changed = members[1:] if members else [doc["universe"][0]]
        found.append(Perturbation(f"{claim.pointer} one member off", "set", _setter(claim.pointer, changed)))
    return found


# --------------------------------------------------------------------------- roundings


def _print(value: float, rounding: Rounding) -> float:
    """``value`` printed at ``rounding`` (half to even)."""
    exponent = rounding.unit_exponent(value)
    if exponent is None:
        return value
    return float(Decimal(repr(value)).quantize(Decimal(1).scaleb(exponent), rounding=ROUND_HALF_EVEN))


def _rounded(rounding: Rounding, pointer: str, value: float) -> Edit:
    """Declares ``rounding`` on the report, prints every rounded claim at it, and claims ``value``
    at ``pointer``."""

    def edit(doc: dict[str, Any]) -> None:
        printed_honestly(doc, rounding)
        set_at(doc, pointer, value)

    return edit


def _rounded_claims(doc: dict[str, Any]) -> list[ClaimInstance]:
    return [c for c in claim_catalogue().instances(doc) if c.row.numeric and c.row.rounding is not None]


def finest_accepted(doc: dict[str, Any]) -> Rounding:
    """A decimals rounding the profile accepts for every kind of claim the report holds: the
    most decimals among the kinds' coarsest decimal roundings."""
    profile = load_profile(str(doc.get("profile", "default")))
    kinds = {c.row.rounding for c in _rounded_claims(doc)}
    decimals = [
        bound["decimals"]
        for kind in kinds
        for bound in profile["coarsest_rounding"].get(kind, [])
        if "decimals" in bound
    ]
    return Rounding(decimals=max(decimals))


def printed_honestly(doc: dict[str, Any], rounding: Rounding) -> None:
    """Every rounded claim printed at ``rounding``, declared on the report."""
    if rounding.decimals is not None:
        doc["rounding"] = {"decimals": rounding.decimals}
    else:
        doc["rounding"] = {"significant_digits": rounding.significant_digits}
    for claim in _rounded_claims(doc):
        set_at(doc, claim.pointer, _print(float(claim.value), rounding))


def rounding_perturbations(
    doc: dict[str, Any], recomputed: dict[str, float], rng: np.random.Generator
) -> list[Perturbation]:
    """Roundings that would widen what is accepted, each with a false claim: a coarse rounding on
    the report with a claim printed at it; significant digits; the profile's coarsest rounding
    with one claim just beyond what it allows (every other claim printed honestly)."""
    claims = [c for c in _rounded_claims(doc) if c.pointer in recomputed]
    if not claims:
        return []
    picks = [claims[int(i)] for i in rng.choice(len(claims), size=min(3, len(claims)), replace=False)]
    finest = finest_accepted(doc)
    found = []
    for claim in picks:
        truth = recomputed[claim.pointer]
        for rounding in (Rounding(decimals=0), Rounding(significant_digits=1)):
            # Within the coarse rounding's half-unit of the truth: the lever of a coarse rounding,
            # claimed with all its digits, and as the coarse rounding prints it.
            unit = 10.0 ** (rounding.unit_exponent(truth) or 0)
            wrong = truth + _away(truth) * 0.45 * unit
            for value in dict.fromkeys((wrong, _print(wrong, rounding))):
                if abs(value - truth) <= _tolerance(doc, claim):
                    continue  # printed as it is: not a false claim
                found.append(
                    Perturbation(
                        f"rounding {rounding.describe()}, every other claim printed at it, {claim.pointer} = "
                        f"{value:.6g} (recomputed {truth:.6g})",
                        "declaration",
                        _rounded(rounding, claim.pointer, value),
                        replay=True,
                    )
                )
        tolerance = _tolerance(doc, claim)
        unit = 10.0 ** -(finest.decimals or 0)
        # The printed value nearest the truth whose interval, widened by the tolerance, misses it.
        sign = _away(truth)
        beyond = _print(truth, finest)
        while abs(beyond - truth) <= unit / 2 + tolerance + 1e-12:
            beyond = _print(beyond + sign * unit, finest)

        def edge(d: dict[str, Any], p: str = claim.pointer, v: float = beyond) -> None:
            printed_honestly(d, finest)
            set_at(d, p, v)

        found.append(
            Perturbation(
                f"rounding {finest.describe()} (the profile's coarsest), {claim.pointer} = {beyond} "
                f"(recomputed {truth:.6g})",
                "declaration",
                edge,
                replay=True,
            )
        )
    return found


# --------------------------------------------------------------------------- declarations


def _declarations(example: str, doc: dict[str, Any]) -> list[tuple[str, Edit]]:
    """Per track: a declaration changed together with a claim it makes false."""
    track = doc["track"]
    found: list[tuple[str, Edit]] = []

    def add(name: str) -> Callable[[Edit], Edit]:
        def register(edit: Edit) -> Edit:
            found.append((name, edit))
            return edit

        return register

    @add("profile mib-2025, a claim 10 % off")
    def _(d: dict[str, Any]) -> None:
        d["profile"] = "mib-2025"
        claim = next(c for c in claims_to_perturb(d) if c.row.type == "number" and c.value)
        set_at(d, claim.pointer, float(claim.value) * 0.9)

    @add("profile that does not exist")
    def _(d: dict[str, Any]) -> None:
        d["profile"] = "lenient"

    if isinstance(doc.get("model"), dict) and doc["model"].get("config"):

        @add("model declared with one layer more")
        def _(d: dict[str, Any]) -> None:
            d["model"]["config"]["n_layers"] += 1

        @add("model declared with twice the vocabulary")
        def _(d: dict[str, Any]) -> None:
            d["model"]["config"]["vocab_size"] *= 2

    if isinstance(doc.get("model"), dict) and doc["model"].get("dtype", "float32") == "float32":

        @add("model declared bfloat16 (a wider tolerance), a claim moved beyond float32's")
        def _(d: dict[str, Any]) -> None:
            d["model"]["dtype"] = "bfloat16"
            claim = next(
                c for c in claims_to_perturb(d) if c.row.type == "number" and c.row.tolerance == "recompute"
            )
            value = float(claim.value)
            narrow = recompute_tolerance(load_profile(str(d.get("profile", "default"))), "float32")
            set_at(d, claim.pointer, value + _away(value) * 20 * (narrow[0] + narrow[1] * abs(value)))

    if isinstance(doc.get("model"), dict) and doc["model"].get("files"):

        @add("model file pinned to another hash")
        def _(d: dict[str, Any]) -> None:
            name = sorted(d["model"]["files"])[-1]
            d["model"]["files"][name] = "0" * 64

    if "n_examples" in doc.get("task", {}):

        @add("task declares twice the examples")
        def _(d: dict[str, Any]) -> None:
            d["task"]["n_examples"] *= 2

    if track == "circuit":
        _circuit_declarations(add)
    elif track == "causal_bench":
        _causal_bench_declarations(add, doc)
    elif track == "causal_variable":
        _causal_variable_declarations(add)
    elif track == "saliency":
        _saliency_declarations(add)
    return found


def _circuit_declarations(add: Callable[[str], Callable[[Edit], Edit]]) -> None:
    @add("claims.n_edges × 10^9 (bounds every circuit by k·n_edges)")
    def _(d: dict[str, Any]) -> None:
        d["claims"]["n_edges"] = d["claims"]["n_edges"] * 10**9

    @add("claims.n_edges + 1")
    def _(d: dict[str, Any]) -> None:
        d["claims"]["n_edges"] += 1

    @add("a weighted size of 0 claimed as 0.05")
    def _(d: dict[str, Any]) -> None:
        point = next(
            p for p in d["claims"]["curves"][0]["points"] if p["weighted_size"] == 0 and p["n_edges"]
        )
        point["weighted_size"] = 0.05

    @add("a weighted size claimed one edge larger")
    def _(d: dict[str, Any]) -> None:
        point = next(p for p in d["claims"]["curves"][0]["points"] if 0 < p["weighted_size"] < p["n_edges"])
        point["weighted_size"] += 1.0

    @add("a point's edge count + 1")
    def _(d: dict[str, Any]) -> None:
        d["claims"]["curves"][0]["points"][5]["n_edges"] += 1

    @add("two points' circuits swapped")
    def _(d: dict[str, Any]) -> None:
        points = d["claims"]["curves"][0]["points"]
        points[5]["circuit"], points[6]["circuit"] = points[6]["circuit"], points[5]["circuit"]

    @add("a point's k moved off the grid")
    def _(d: dict[str, Any]) -> None:
        d["claims"]["curves"][0]["points"][5]["k"] = 0.06

    @add("grid declared with one point changed")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["grid"][5] = 0.06

    @add("edge counts rounded up, each point's count one edge more")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["edge_count_rounding"] = "ceil"
        for curve in d["claims"]["curves"]:
            for point in curve["points"][:-1]:
                point["n_edges"] += 1

    @add("CPR ranked by |score|, CPR unchanged")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["ranking"]["cpr"] = "absolute"

    @add("start token prepended, claims unchanged")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["start_token"] = "prepend"

    @add("mean ablation, claims unchanged")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["ablation"] = "mean"

    @add("an AUROC claimed (0.99, rank convention, the circuit document as ground truth)")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["ranking"]["auroc"] = "absolute"
        d["claims"]["auroc"] = {"value": 0.99, "convention": "rank", "ground_truth": d["claims"]["circuit"]}

    @add("an AUROC claimed (0.01)")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["ranking"]["auroc"] = "absolute"
        d["claims"]["auroc"] = {"value": 0.01, "convention": "rank", "ground_truth": d["claims"]["circuit"]}


def _causal_bench_declarations(add: Callable[[str], Callable[[Edit], Edit]], doc: dict[str, Any]) -> None:
    @add("p-value convention paper (default binds plus_one)")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["p_convention"] = "paper"
        conv = d["claims"]["convergence"]
        conv["p"] = round(conv["p"] * (conv["n_permutations"] + 1)) - 1
        conv["p"] /= conv["n_permutations"]

    @add("B = 2000 declared everywhere, statistics unchanged")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["n_permutations"] = 2000
        for conv in _convergences(d):
            conv["n_permutations"] = 2000

    @add("convergence seed changed, statistics unchanged")
    def _(d: dict[str, Any]) -> None:
        d["claims"]["convergence"]["seed"] += 1

    @add("z with ddof 1, statistics unchanged")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["z_ddof"] = 1

    @add("composite weights changed, composites unchanged")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["weights"]["F"] = 2.0

    @add("COS threshold changed, claims unchanged")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["cos_threshold"] = 0.5

    @add("two seed runs share a seed")
    def _(d: dict[str, Any]) -> None:
        runs = d["claims"]["methods"][0]["runs"]
        runs[1]["seed"] = runs[0]["seed"]

    if doc["behaviour"]["kind"] == "planted":

        @add("behaviour seed changed, claims unchanged")
        def _(d: dict[str, Any]) -> None:
            d["behaviour"]["seed"] += 1

    if any(m.get("procedure") for m in doc["claims"]["methods"]):

        @add("a procedure's threshold changed, its sets unchanged")
        def _(d: dict[str, Any]) -> None:
            method = next(m for m in d["claims"]["methods"] if m.get("procedure"))
            method["procedure"]["threshold"] *= 3


def _convergences(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if doc["claims"].get("convergence"):
        yield doc["claims"]["convergence"]
    for config in doc["claims"].get("scaling") or []:
        if config.get("convergence"):
            yield config["convergence"]


def _causal_variable_declarations(add: Callable[[str], Callable[[Edit], Edit]]) -> None:
    @add("a unit moved to the next layer, its scores unchanged")
    def _(d: dict[str, Any]) -> None:
        unit = d["claims"]["variables"][0]["units"][0]
        unit["location"]["layer"] += 1

    @add("substring answer checking (default binds exact tokens)")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["checker"] = "substring"


def _saliency_declarations(add: Callable[[str], Callable[[Edit], Edit]]) -> None:
    @add("dominance threshold lowered, claims unchanged")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["dominance_threshold"] = 0.5

    @add("WIoU weights changed, WIoU unchanged")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["wiou_weights"][0] = 50.0

    @add("Shapley trials below the profile's minimum")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["shapley_trials"] = 1

    @add("Shapley seed changed, ground truth unchanged")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["shapley_seed"] += 1

    @add("curve steps changed, areas unchanged")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["curve_steps"] = 12

    @add("areas under the unit-step convention, areas unchanged")
    def _(d: dict[str, Any]) -> None:
        d["settings"]["auc_convention"] = "unit_step_sum"


def declaration_perturbations(example: str, doc: dict[str, Any]) -> list[Perturbation]:
    return [Perturbation(name, "declaration", edit) for name, edit in _declarations(example, doc)]


def controls(doc: dict[str, Any]) -> list[Perturbation]:
    """What must verify: the example as shipped, and every rounded claim printed honestly at the
    profile's coarsest rounding."""
    finest = finest_accepted(doc)

    def honest(d: dict[str, Any]) -> None:
        printed_honestly(d, finest)

    return [
        Perturbation("as shipped", "control", lambda d: None, replay=True, valid=True),
        Perturbation(
            f"every rounded claim printed at {finest.describe()}", "control", honest, replay=True, valid=True
        ),
    ]


# --------------------------------------------------------------------------- verification


@dataclass(frozen=True)
class Outcome:
    valid: bool
    codes: tuple[str, ...]


def _recomputer(track: str) -> tuple[Any, str]:
    module_name, function = TRACKS[track].recomputer.split(":")
    return importlib.import_module(module_name), function


@contextlib.contextmanager
def _recomputer_replaced(track: str, replacement: Callable[[Any, Any], Recomputation]) -> Iterator[None]:
    module, function = _recomputer(track)
    original = getattr(module, function)
    setattr(module, function, replacement)
    try:
        yield
    finally:
        setattr(module, function, original)


def _claimed(doc: dict[str, Any], pointer: str) -> float | None:
    try:
        value = get_at(doc, pointer)
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def replayed(recorded: Recomputation, document: dict[str, Any]) -> Recomputation:
    """The recorded recomputation with each numeric claim read again from ``document``, as the
    recomputers read it (``float`` of the value at the pointer, ``None`` when absent); component
    sets and tensors keep their comparison (the numeric perturbations leave them unchanged)."""
    catalogue = claim_catalogue()
    comparisons = []
    for c in recorded.comparisons:
        row = catalogue.row(document.get("track"), c.pointer)
        if row is not None and row.numeric:
            c = dataclasses.replace(c, claimed=_claimed(document, c.pointer))
        comparisons.append(c)
    return Recomputation(comparisons=comparisons, findings=list(recorded.findings))


@dataclass
class Workbench:
    """One example copied into a folder of its own, with its recomputation session and its
    recorded recomputation."""

    example: str
    folder: Path
    document: dict[str, Any]
    options: VerifyOptions
    recorded: Recomputation = field(default_factory=Recomputation)
    seconds: float = 0.0

    @classmethod
    def create(cls, example: str, root: Path) -> Workbench:
        from mibspec.reference_impl.recompute import RecomputeSession

        folder = root / example
        shutil.copytree(EXAMPLES / example, folder)
        document = json.loads((folder / "report.json").read_text(encoding="utf-8"))
        session = RecomputeSession()
        options = VerifyOptions(model_roots=(MODELS,), session=session)
        bench = cls(example, folder, document, options)
        started = time.perf_counter()
        bench._record()
        bench.seconds = time.perf_counter() - started
        return bench

    @property
    def track(self) -> str:
        return str(self.document["track"])

    @property
    def replays(self) -> bool:
        return self.example not in ALWAYS_RECOMPUTED

    def _record(self) -> None:
        module, function = _recomputer(self.track)
        original = getattr(module, function)

        def record(ctx: Any, progress: Any) -> Recomputation:
            result: Recomputation = original(ctx, progress)
            self.recorded = result
            return result

        with _recomputer_replaced(self.track, record):
            outcome = self._verify(self.document)
        if not outcome.valid:
            raise AssertionError(f"{self.example} does not verify as shipped: {outcome.codes}")

    @property
    def recomputed(self) -> dict[str, float]:
        """The recorded recomputed value of each compared number."""
        return {c.pointer: c.recomputed for c in self.recorded.comparisons if c.claimed is not None}

    def verify(self, perturbation: Perturbation) -> Outcome:
        doc = copy.deepcopy(self.document)
        perturbation.edit(doc)
        if perturbation.replay and self.replays:
            with _recomputer_replaced(self.track, lambda ctx, progress: replayed(self.recorded, ctx.data)):
                return self._verify(doc)
        return self._verify(doc)

    def _verify(self, doc: dict[str, Any]) -> Outcome:
        path = self.folder / "perturbed.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        result = verify_paths([path], self.options)
        report = result.documents[0]
        failed = [stage.value for stage, (status, _) in report.stages.items() if status is StageStatus.FAILED]
        codes = sorted({f.code for f in report.errors} | {f"stage:{name}" for name in failed})
        return Outcome(report.valid and report.stages[Stage.SCHEMA][0] is StageStatus.PASSED, tuple(codes))

    def perturbations(self, seed: int = 0) -> list[Perturbation]:
        """Every perturbation of the example, controls first."""
        rng = np.random.default_rng(seed)
        return [
            *controls(self.document),
            *claim_perturbations(self.document, rng),
            *set_perturbations(self.document),
            *rounding_perturbations(self.document, self.recomputed, rng),
            *declaration_perturbations(self.example, self.document),
        ]


@dataclass
class Tally:
    """What a run of perturbations gave, by kind: tried and refused, and what was accepted."""

    example: str
    tried: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    accepted: list[str] = field(default_factory=list)
    failed_controls: list[str] = field(default_factory=list)

    def add(self, perturbation: Perturbation, outcome: Outcome) -> None:
        if perturbation.kind == "control":
            if not outcome.valid:
                self.failed_controls.append(f"{perturbation.name}: {', '.join(outcome.codes)}")
            return
        self.tried[perturbation.kind] = self.tried.get(perturbation.kind, 0) + 1
        if outcome.valid:
            self.accepted.append(perturbation.name)
        else:
            self.refused[perturbation.kind] = self.refused.get(perturbation.kind, 0) + 1

    def to_json(self) -> dict[str, Any]:
        return {
            "example": self.example,
            "tried": self.tried,
            "refused": self.refused,
            "accepted": self.accepted,
            "failed_controls": self.failed_controls,
        }


def run(bench: Workbench, perturbations: list[Perturbation]) -> Tally:
    tally = Tally(bench.example)
    for perturbation in perturbations:
        tally.add(perturbation, bench.verify(perturbation))
    return tally


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", nargs="*", default=list(RECOMPUTED_EXAMPLES))
    parser.add_argument("--summary", type=Path, help="write the counts as JSON")
    args = parser.parse_args(argv)
    tallies = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as root:
        for example in args.examples:
            bench = Workbench.create(example, Path(root))
            tally = run(bench, bench.perturbations())
            tallies.append(tally)
            tried, refused = sum(tally.tried.values()), sum(tally.refused.values())
            print(f"{example}: {refused} of {tried} refused {tally.tried} {tally.refused}", flush=True)
            for name in tally.accepted:
                print(f"  accepted: {name}")
            for name in tally.failed_controls:
                print(f"  control failed: {name}")
    summary = {"seconds": round(time.perf_counter() - started, 1), "examples": [t.to_json() for t in tallies]}
    if args.summary:
        args.summary.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 1 if any(t.accepted or t.failed_controls for t in tallies) else 0


if __name__ == "__main__":
    sys.exit(main())
