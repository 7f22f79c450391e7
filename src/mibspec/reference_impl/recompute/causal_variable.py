"""Recompute a causal-variable report: interchange interventions → IIA (or IOI MSE) per unit.

Normative text: ``spec/v1/SPEC.md`` (R-2, R-3, M-2, CV-*) and
``spec/v1/metrics/causal_variable.md`` (MV-1 to MV-9). Steps:

1. resolve and load the declared model and its tokenizer (no code is run);
2. read the dataset of ``task.dataset`` and the causal model (``settings.causal_model``,
   else the dataset's);
3. per prompt, the model's greedy answer decides the example filter (MV-1): a pair is kept
   when the model is right on the base and on the counterfactual (a prompt whose answer is
   ``null`` has nothing to be right about);
4. per variable, unit and counterfactual set: read the counterfactual's vector at the
   unit's site and position, write its selected features into the base run at the base's
   position (:class:`~mibspec.reference_impl.engine.TorchFeaturizer`), and score
   the intervened output against ``interventions[t][v]`` (IIA, exact tokens or the
   substring rule) or, for ``ioi_linear``, the logit difference against the MV-2 target
   (MSE);
5. aggregate with ``metrics.causal_variable.aggregate_scores`` (the function the C112 rule
   uses) and compare every claimed number.

The same :class:`Evaluator` produces the numbers of ``mibspec score causal-variable``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mibspec.core.comparisons import Comparison, Recomputation, recompute_tolerance
from mibspec.core.conventions import convention
from mibspec.core.pointers import escape_pointer_token
from mibspec.core.progress import Progress
from mibspec.core.recompute_context import RecomputeContext
from mibspec.core.sidecars import SidecarError, load_tensor, tensor_infos
from mibspec.metrics.causal_models import interchange_output, ioi_logit_names, ioi_target
from mibspec.metrics.causal_variable import Better, CellKey, VariableAggregate, aggregate_scores, iia, ioi_mse
from mibspec.metrics.featurizers import unit_sites
from mibspec.metrics.positions import PositionError, resolve_positions
from mibspec.reference_impl.threads import one_thread

from ..devices import example_bytes, wide, with_oom_backoff
from ._inputs import (
    ModelSource,
    UnusableInputError,
    batch_plan,
    check_tokens,
    error_findings,
    load_referenced_document,
    local_tokenizer,
    open_model,
    read_rows,
)
from .declarations import missing_declarations

__all__ = [
    "Evaluator",
    "TextCodec",
    "UnitResult",
    "aggregate_units",
    "build_featurizer",
    "read_featurizer_weights",
    "recompute",
]

_DEFAULT_BATCH = 64


class TextCodec:
    """The model's tokenizer: ids and character offsets without special tokens, and decoding.

    A local ``tokenizer.json`` is read with the tokenizers library; otherwise transformers'
    fast ``AutoTokenizer`` (``trust_remote_code=False``). Nothing a model ships is run.
    """

    def __init__(self, source: ModelSource, pointer: str = "/model") -> None:
        self._cache: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}
        try:
            tokenizer = local_tokenizer(source)
            if tokenizer is not None:

                def encode(text: str) -> tuple[list[int], list[tuple[int, int]]]:
                    out = tokenizer.encode(text, add_special_tokens=False)
                    return list(out.ids), [tuple(o) for o in out.offsets]  # type: ignore[misc]

                self._encode = encode
                self._decode: Callable[[list[int]], str] = lambda ids: tokenizer.decode(ids)
            else:
                from transformers import AutoTokenizer

                auto = AutoTokenizer.from_pretrained(
                    source.location, revision=source.revision, trust_remote_code=False, use_fast=True
                )

                def encode_auto(text: str) -> tuple[list[int], list[tuple[int, int]]]:
                    out = auto(text, add_special_tokens=False, return_offsets_mapping=True)
                    return list(out["input_ids"]), [tuple(o) for o in out["offset_mapping"]]

                self._encode = encode_auto
                self._decode = lambda ids: str(auto.decode(ids))
        except Exception as exc:  # any failure to read a tokenizer is a finding, not a crash
            raise UnusableInputError(
                pointer, f"cannot load the tokenizer of {source.display}: {exc}"
            ) from exc

    def encode_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        if text not in self._cache:
            self._cache[text] = self._encode(text)
        return self._cache[text]

    def encode(self, text: str) -> list[int]:
        return self.encode_offsets(text)[0]

    def decode(self, ids: Sequence[int]) -> str:
        return self._decode(list(ids))


def read_featurizer_weights(doc: Mapping[str, Any], folder: Path, pointer: str) -> dict[str, Any]:
    """The named weight tensors of a featurizer document (numpy; bfloat16 through torch)."""
    out: dict[str, Any] = {}
    for name, ref in (doc.get("weights") or {}).items():
        entry = next((a for a in doc.get("artifacts", []) if a["id"] == ref["artifact"]), None)
        if entry is None:
            raise UnusableInputError(pointer, f"the featurizer declares no artifact {ref['artifact']!r}")
        path = folder / entry["path"]
        try:
            info = tensor_infos(path, entry["media_type"]).get(ref.get("tensor"))
            if info is None:
                raise SidecarError(f"no tensor {ref.get('tensor')!r}")
            if info.dtype == "bfloat16":
                from safetensors.torch import load_file

                out[name] = load_file(str(path))[ref["tensor"]].float()
            else:
                out[name] = np.array(load_tensor(path, info))
        except (SidecarError, OSError) as exc:
            raise UnusableInputError(
                pointer, f"cannot read weight {name!r} from {entry['path']!r}: {exc}"
            ) from exc
    return out


@dataclass
class UnitResult:
    """Per counterfactual set: the score and the number of kept pairs."""

    scores: dict[str, float] = field(default_factory=dict)
    n_examples: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Pair:
    row: int
    base_pos: tuple[int, ...]  # one position, or every token (rule ``all``)
    source_pos: tuple[int, ...]  # as many as base_pos: source_pos[i] is written at base_pos[i]
    expected: str | None
    target: float | None


def _check_answer(
    checker: str, generated: Sequence[int], expected: Sequence[int], text: str, codec: Any
) -> bool:
    if checker == "exact_token":
        return list(generated[: len(expected)]) == list(expected)
    return text.strip() in codec.decode(list(generated[: len(expected)])).strip()


class Evaluator:
    """Interchange interventions of one model on one dataset (recomputation and producers).

    Args:
        model: engine weights (``load_model``).
        codec: the model's tokenizer.
        rows: the dataset rows (datasets.md).
        causal_model: the causal model document (needed for ``ioi_linear`` MSE), or None.
        checker: ``exact_token`` or ``substring`` (MV-1).
        example_filter: ``model_correct_on_base_and_counterfactuals`` or ``none``.
        batch_size: pairs per forward pass.
        dataset_pointer: where a bad row is reported.
    """

    def __init__(
        self,
        model: Any,
        codec: TextCodec,
        rows: Sequence[Mapping[str, Any]],
        causal_model: Mapping[str, Any] | None,
        *,
        checker: str = "exact_token",
        example_filter: str = "model_correct_on_base_and_counterfactuals",
        batch_size: int = _DEFAULT_BATCH,
        dataset_pointer: str = "/task/dataset",
    ) -> None:
        self.model = model
        self.codec = codec
        self.rows = list(rows)
        self.causal_model = causal_model
        self.checker = checker
        self.example_filter = example_filter
        self.batch_size = batch_size
        self.pointer = dataset_pointer
        self._correct: dict[tuple[int, str], bool] = {}
        self._sites: list[Any] = []
        self._sources: dict[str, dict[Any, list[Any]]] = {}

    # -- prompts -------------------------------------------------------------------------

    def prompt(self, row: int, which: str) -> Mapping[str, Any]:
        data = self.rows[row]
        prompt = data["base"] if which == "base" else data.get("counterfactuals", {}).get(which)
        if not isinstance(prompt, Mapping):
            raise UnusableInputError(self.pointer, f"dataset row {row} has no {which!r} prompt")
        return prompt

    def tokens(self, row: int, which: str) -> tuple[list[int], list[tuple[int, int]]]:
        ids, offsets = self.codec.encode_offsets(str(self.prompt(row, which)["prompt"]))
        if not ids:
            raise UnusableInputError(
                self.pointer, f"dataset row {row}: the {which!r} prompt encodes to no token"
            )
        check_tokens(self.model, ids, self.pointer, f"dataset row {row}, {which!r} prompt")
        return ids, offsets

    def answer_ids(self, text: str, row: int) -> list[int]:
        ids = self.codec.encode(text)
        if not ids:
            raise UnusableInputError(self.pointer, f"dataset row {row}: answer {text!r} encodes to no token")
        check_tokens(self.model, ids, self.pointer, f"dataset row {row}, answer {text!r}")
        return ids

    def check_inputs(self, cf_types: Sequence[str]) -> None:
        """Check every prompt and answer the interventions will read against the model,
        before any forward pass (:func:`~._inputs.check_tokens`): ids inside its vocabulary,
        and each prompt, with the longest answer fed back by greedy decoding, inside its
        context (batched decoding appends as many tokens to every prompt of a batch).

        Raises:
            UnusableInputError: at the dataset, naming the row.
        """
        longest = 1
        for row, data in enumerate(self.rows):
            answers = [
                self.prompt(row, which).get("answer")
                for which in ("base", *cf_types)
                if self.example_filter != "none"
            ]
            answers += [
                value
                for cf_type in cf_types
                for value in ((data.get("interventions") or {}).get(cf_type) or {}).values()
            ]
            for text in answers:
                if text is not None:
                    longest = max(longest, len(self.answer_ids(str(text), row)))
            if (self.causal_model or {}).get("mechanism") == "ioi_linear":
                try:
                    names = ioi_logit_names(self.prompt(row, "base"))
                except (ValueError, KeyError, TypeError):
                    continue  # a row without the names has no logit difference to read
                for name in names:
                    self.answer_ids(name, row)
        for row in range(len(self.rows)):
            for which in ("base", *cf_types):
                ids, _ = self.tokens(row, which)
                check_tokens(
                    self.model,
                    ids,
                    self.pointer,
                    f"dataset row {row}, {which!r} prompt",
                    generated=longest - 1,
                )

    def _batch(self, items: Sequence[tuple[int, str]]) -> tuple[Any, Any]:
        import torch

        encoded = [self.tokens(row, which)[0] for row, which in items]
        width = max(len(x) for x in encoded)
        ids = np.zeros((len(encoded), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for i, x in enumerate(encoded):
            ids[i, : len(x)] = x
            mask[i, : len(x)] = 1
        device = self.model.device
        return torch.as_tensor(ids, device=device), torch.as_tensor(mask, device=device)

    # -- the example filter (MV-1) -------------------------------------------------------

    def correct(self, row: int, which: str) -> bool:
        """Whether the model's greedy answer to a prompt passes the checker (True when the prompt
        has no answer, or when no filter is declared)."""
        if self.example_filter == "none":
            return True
        key = (row, which)
        if key not in self._correct:
            self._fill_correct([key])
        return self._correct[key]

    def _fill_correct(self, keys: Sequence[tuple[int, str]]) -> None:
        from ..engine import greedy_tokens

        todo = []
        for row, which in keys:
            answer = self.prompt(row, which).get("answer")
            if answer is None:
                self._correct[(row, which)] = True
            else:
                todo.append((row, which, self.answer_ids(str(answer), row), str(answer)))
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            ids, mask = self._batch([(r, w) for r, w, _, _ in chunk])
            n = max(len(a) for _, _, a, _ in chunk)
            generated = greedy_tokens(self.model, ids, mask, n)
            for (row, which, answer, text), gen in zip(chunk, generated.tolist(), strict=True):
                self._correct[(row, which)] = _check_answer(self.checker, gen, answer, text, self.codec)

    def prefilter(self, cf_types: Sequence[str]) -> None:
        """Compute the filter for every base and the given counterfactual prompts in batches."""
        if self.example_filter == "none":
            return
        keys = [
            (r, w) for r in range(len(self.rows)) for w in ("base", *cf_types) if (r, w) not in self._correct
        ]
        self._fill_correct(keys)

    # -- interventions -------------------------------------------------------------------

    def pairs(
        self, variable: str, metric: str, cf_type: str, position: Mapping[str, Any], position_pointer: str
    ) -> list[_Pair]:
        """The kept (base, counterfactual) pairs of one variable and counterfactual set, with the
        resolved positions and what each pair is scored against."""
        out = []
        for row, data in enumerate(self.rows):
            base = self.prompt(row, "base")
            source = self.prompt(row, cf_type)
            expected = None
            target = None
            if metric == "mse":
                if self.causal_model is None or self.causal_model.get("mechanism") != "ioi_linear":
                    raise UnusableInputError(
                        "/settings/causal_model", "an mse claim needs an ioi_linear causal model"
                    )
                target = ioi_target(self.causal_model["parameters"], base, source, variable)
                if target is None:
                    continue
            else:
                expected = (data.get("interventions", {}).get(cf_type) or {}).get(variable)
                if expected is None:
                    continue
                if self.causal_model is not None:
                    derived = interchange_output(self.causal_model, base, source, variable)
                    if derived != expected:
                        raise UnusableInputError(
                            self.pointer,
                            f"dataset row {row}: interventions[{cf_type}][{variable}] is {expected!r}, the "
                            f"causal model gives {derived!r} (V107)",
                        )
            if not (self.correct(row, "base") and self.correct(row, cf_type)):
                continue
            positions = []
            for which, prompt in (("base", base), (cf_type, source)):
                ids, offsets = self.tokens(row, which)
                try:
                    positions.append(resolve_positions(position, prompt, ids, offsets, self.codec.encode))
                except PositionError as exc:
                    raise UnusableInputError(
                        position_pointer, f"dataset row {row} ({data.get('id')}), {which} prompt: {exc}"
                    ) from exc
            if len(positions[0]) != len(positions[1]):
                raise UnusableInputError(
                    position_pointer,
                    f"dataset row {row} ({data.get('id')}): rule 'all' writes the counterfactual's token i "
                    f"at the base's token i, but the base has {len(positions[0])} tokens and the {cf_type} "
                    f"prompt {len(positions[1])}",
                )
            out.append(_Pair(row, positions[0], positions[1], expected, target))
        return out

    def register_sites(self, sites: Sequence[Any]) -> None:
        """Sites whose source vectors are read: one pass over a counterfactual set records them all."""
        for site in sites:
            if site not in self._sites:
                self._sites.append(site)
                self._sources.clear()

    def _source_vectors(self, site: Any, cf_type: str, pairs: Sequence[_Pair]) -> Any:
        """``(M, D)``: each pair's counterfactual vectors at the site and its positions, pair
        after pair (M = len(pairs) when each pair has one position)."""
        import torch

        from ..engine import forward_sites

        self.register_sites([site])
        if cf_type not in self._sources:
            per_site: dict[Any, list[Any]] = {s: [] for s in self._sites}
            for start in range(0, len(self.rows), self.batch_size):
                chunk = [(row, cf_type) for row in range(start, min(len(self.rows), start + self.batch_size))]
                ids, mask = self._batch(chunk)
                lengths = mask.sum(1).tolist()
                with torch.no_grad():
                    _, recorded = forward_sites(self.model, ids, mask, record=self._sites)
                for s in self._sites:
                    per_site[s].extend(recorded[s][i, : lengths[i]].clone() for i in range(len(chunk)))
            self._sources[cf_type] = per_site
        vectors = self._sources[cf_type][site]
        return torch.stack([vectors[p.row][at] for p in pairs for at in p.source_pos])

    def score_unit(
        self,
        variable: str,
        metric: str,
        location: Mapping[str, Any],
        featurizer: Any,
        cf_types: Sequence[str],
        pointer: str,
        progress: Callable[[], None] | None = None,
        joint: Sequence[tuple[Mapping[str, Any], Any]] = (),
    ) -> UnitResult:
        """IIA (or MSE) of one unit per counterfactual set (MV-1, MV-3); ``joint``: the further
        sites of a joint unit (MV-10), each ``(site without position, featurizer)``.

        Raises:
            UnusableInputError: a position cannot be resolved, a row is unusable, or no pair
                is kept for a set (MV-1: no kept pair is an error, not an IIA of 0).
        """
        import torch

        from ..engine import JointWrite, Site

        site = Site.from_location(location)
        joint_sites = [(Site.from_location(where), feat) for where, feat in joint]
        self.register_sites([site, *(s for s, _ in joint_sites)])
        result = UnitResult()
        for cf_type in cf_types:
            pairs = self.pairs(
                variable, metric, cf_type, location["position"], f"{pointer}/location/position"
            )
            if not pairs:
                raise UnusableInputError(
                    f"{pointer}/scores", f"no example of {cf_type!r} is kept for {variable!r} (MV-1)"
                )
            sources = self._source_vectors(site, cf_type, pairs)
            joint_sources = [self._source_vectors(s, cf_type, pairs) for s, _ in joint_sites]
            hits: list[bool] = []
            diffs: list[float] = []
            taken = 0
            for start in range(0, len(pairs), self.batch_size):
                chunk = pairs[start : start + self.batch_size]
                ids, mask = self._batch([(p.row, "base") for p in chunk])
                flat = [(i, at) for i, p in enumerate(chunk) for at in p.base_pos]
                rows = torch.tensor([i for i, _ in flat], dtype=torch.long, device=ids.device)
                positions = torch.tensor([at for _, at in flat], dtype=torch.long, device=ids.device)
                span = slice(taken, taken + len(flat))
                taken += len(flat)
                writes = [
                    JointWrite(s, feat, vectors[span])
                    for (s, feat), vectors in zip(joint_sites, joint_sources, strict=True)
                ]
                where = (positions, sources[span], rows, writes)
                if metric == "mse":
                    diffs += self._logit_differences(chunk, ids, mask, site, where, featurizer)
                else:
                    hits += self._hits(chunk, ids, mask, site, where, featurizer)
            if metric == "mse":
                targets = [p.target for p in pairs]
                result.scores[cf_type] = ioi_mse(np.asarray(diffs), np.asarray(targets, dtype=np.float64))
            else:
                result.scores[cf_type] = iia(np.asarray(hits, dtype=bool))
            result.n_examples[cf_type] = len(pairs)
            if progress is not None:
                progress()
        return result

    def _logit_differences(
        self, chunk: Sequence[Any], ids: Any, mask: Any, site: Any, where: Any, featurizer: Any
    ) -> list[float]:
        """Per intervened pair, logit(IO) − logit(S) of the base prompt's names (the MSE's inputs).

        ``where``: the base positions, source vectors and base rows of every write, and the
        joint unit's further writes."""
        import torch

        from ..engine import intervened_logits

        positions, src, rows, writes = where
        with torch.no_grad():
            logits = intervened_logits(
                self.model, ids, mask, site, positions, src, featurizer, rows=rows, joint=writes
            )
        diffs = []
        for p, row_logits in zip(chunk, wide(logits), strict=True):
            io, s = ioi_logit_names(self.prompt(p.row, "base"))
            a, b = self.answer_ids(io, p.row)[0], self.answer_ids(s, p.row)[0]
            diffs.append(float(row_logits[a] - row_logits[b]))
        return diffs

    def _hits(
        self, chunk: Sequence[Any], ids: Any, mask: Any, site: Any, where: Any, featurizer: Any
    ) -> list[bool]:
        """Per intervened pair, whether the model's answer is the expected one (greedy decoding
        when an expected answer spans several tokens); ``where`` as in ``_logit_differences``."""
        import torch

        from ..engine import greedy_tokens, intervened_logits

        positions, src, rows, writes = where
        answers = [self.answer_ids(str(p.expected), p.row) for p in chunk]
        n = max(len(a) for a in answers)
        if n == 1:
            with torch.no_grad():
                logits = intervened_logits(
                    self.model, ids, mask, site, positions, src, featurizer, rows=rows, joint=writes
                )
            generated = logits.argmax(-1, keepdim=True).tolist()
        else:
            generated = greedy_tokens(
                self.model,
                ids,
                mask,
                n,
                site=site,
                positions=positions,
                sources=src,
                featurizer=featurizer,
                rows=rows,
                joint=writes,
            ).tolist()
        return [
            _check_answer(self.checker, gen, answer, str(p.expected), self.codec)
            for p, gen, answer in zip(chunk, generated, answers, strict=True)
        ]


# --------------------------------------------------------------------------- recompute stage


def recompute(ctx: RecomputeContext, progress: Progress) -> Recomputation:
    """The report's claims recomputed: its comparisons, findings and the model files used."""
    missing = missing_declarations(ctx.data)
    if missing:
        return Recomputation(
            findings=[ctx.finding("R104", pointer, detail=detail) for pointer, detail in missing]
        )
    with Recomputation().until_stopped() as out:
        try:
            with one_thread():
                out.extend(_recompute(ctx, progress, out))
        except UnusableInputError as exc:
            out.findings.extend(error_findings(ctx, exc))
    return out


def _settings(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report's settings with the schema's defaults; its checker is read through
    ``mibspec.core.conventions`` (the report's, else the profile's)."""
    settings = {
        "intervention": "interchange",
        "example_filter": "model_correct_on_base_and_counterfactuals",
        "batch_size": None,
        "causal_model": None,
    }
    settings.update(report.get("settings") or {})
    return settings


def _prompt_problem(prompt: Any) -> str | None:
    if not isinstance(prompt, Mapping):
        return "is not an object"
    if not isinstance(prompt.get("prompt"), str):
        return "has no prompt text"
    if prompt.get("answer") is not None and not isinstance(prompt["answer"], str):
        return "has an answer that is not a string"
    for key, kind in (("slots", Mapping), ("variables", Mapping), ("template", str)):
        if key in prompt and not isinstance(prompt[key], kind):
            return f"has a malformed {key!r}"
    return None


def check_rows(rows: Sequence[Any], cf_types: Sequence[str], pointer: str = "/task/dataset") -> None:
    """Raise :class:`UnusableInputError` naming the first row that does not have the row format
    (datasets.md DS-2, DS-3) where recomputation reads it."""
    for index, row in enumerate(rows):
        where = f"dataset row {index}"
        if not isinstance(row, Mapping):
            raise UnusableInputError(pointer, f"{where} is not an object")
        problem = _prompt_problem(row.get("base"))
        if problem is None and row["base"].get("answer") is None:
            problem = "has no answer"
        if problem:
            raise UnusableInputError(pointer, f"{where}: the base prompt {problem}")
        counterfactuals, interventions = row.get("counterfactuals"), row.get("interventions", {})
        if not isinstance(counterfactuals, Mapping) or not isinstance(interventions, Mapping):
            raise UnusableInputError(pointer, f"{where}: counterfactuals and interventions must be objects")
        for cf_type in cf_types:
            problem = _prompt_problem(counterfactuals.get(cf_type))
            if problem:
                raise UnusableInputError(pointer, f"{where}: the {cf_type!r} prompt {problem}")
            expected = interventions.get(cf_type, {})
            if not isinstance(expected, Mapping) or not all(isinstance(v, str) for v in expected.values()):
                raise UnusableInputError(
                    pointer, f"{where}: interventions[{cf_type!r}] must map variables to strings"
                )


def _causal_model(
    ctx: RecomputeContext, settings: Mapping[str, Any], dataset: Mapping[str, Any], folder: Path
) -> Any:
    if settings.get("causal_model"):
        doc, _ = load_referenced_document(
            ctx, settings["causal_model"], "/settings/causal_model", "causal_model"
        )
        return doc
    ident = dataset.get("causal_model")
    if not ident:
        return None
    entry = next((a for a in dataset.get("artifacts", []) if a["id"] == ident), None)
    if entry is None:
        raise UnusableInputError("/task/dataset", f"the dataset declares no artifact {ident!r}")
    parsed = ctx.load_json(folder / entry["path"])
    if not parsed.ok or not isinstance(parsed.data, dict) or parsed.data.get("kind") != "causal_model":
        raise UnusableInputError("/task/dataset", f"the dataset's causal model {ident!r} is not readable")
    return parsed.data


def build_featurizer(model: Any, doc: Mapping[str, Any], weights: Mapping[str, Any], pointer: str) -> Any:
    """A :class:`TorchFeaturizer` for a featurizer document, checked against the model's site."""
    import torch

    from ..engine import Site, TorchFeaturizer, check_site, site_dim

    site = Site.from_location(doc["location"])
    try:
        check_site(model, site)
    except ValueError as exc:
        raise UnusableInputError(f"{pointer}/location", str(exc)) from exc
    if doc["input_dim"] != site_dim(model, site):
        raise UnusableInputError(
            pointer, f"the featurizer reads {doc['input_dim']} values, the site holds {site_dim(model, site)}"
        )
    dtype = torch.promote_types(model.dtype, torch.float32)
    return TorchFeaturizer(doc, weights, dtype=dtype, device=model.device)


def aggregate_units(
    units: Iterable[tuple[str, int, Mapping[str, float]]], better: Better
) -> VariableAggregate:
    """Per layer, Average and best of one variable from its units, each given as
    ``(unit id, layer, score per counterfactual set)``: what a producer claims and what
    recomputation compares the claim with (``metrics.causal_variable.aggregate_scores``)."""
    table: dict[CellKey, float] = {
        (cf, layer, ident): value for ident, layer, scores in units for cf, value in scores.items()
    }
    return aggregate_scores(table, better=better)


def _recompute(ctx: RecomputeContext, progress: Progress, out: Recomputation) -> Recomputation:
    """The comparisons; what opening the model and planning batches produce goes into ``out``."""
    report, profile = ctx.data, ctx.profile
    settings = _settings(report)
    claims, task = report["claims"], report["task"]
    dtype = report["model"].get("dtype", "float32")
    abs_tol, rel_tol = recompute_tolerance(profile, dtype)

    source, model = open_model(ctx, progress, dtype, out)
    codec = TextCodec(source)
    dataset, dataset_folder = load_referenced_document(
        ctx, task["dataset"], "/task/dataset", "counterfactual_dataset"
    )
    rows = read_rows(dataset, dataset_folder, "/task/dataset", ctx.limits)
    causal_model = _causal_model(ctx, settings, dataset, dataset_folder)
    evaluator = Evaluator(
        model,
        codec,
        rows,
        causal_model,
        checker=convention(profile, report, "checker").value,
        example_filter=settings["example_filter"],
        batch_size=int(settings.get("batch_size") or _DEFAULT_BATCH),
    )
    batch, halve = batch_plan(
        ctx,
        evaluator.batch_size,
        lambda: example_bytes(model, max(len(evaluator.tokens(r, "base")[0]) for r in range(len(rows)))),
        len(rows),
        out,
    )
    cf_types = sorted({cf for v in claims["variables"] for u in v["units"] for cf in u["scores"]})
    for cf in cf_types:
        if cf not in dataset.get("counterfactual_types", []):
            raise UnusableInputError("/task/dataset", f"the dataset has no counterfactual type {cf!r}")
    from ..engine import Site

    evaluator.register_sites(
        sorted(
            {
                Site.from_location(site.location)
                for v in claims["variables"]
                for u in v["units"]
                for site in unit_sites(u)
            },
            key=repr,
        )
    )
    check_rows(rows, cf_types)
    evaluator.check_inputs(cf_types)
    total = sum(len(u["scores"]) for v in claims["variables"] for u in v["units"])
    featurizers: dict[str, Any] = {}

    def run(size: int) -> _ComparisonList:
        evaluator.batch_size = size
        progress.start(f"interchange interventions: {total} (unit, counterfactual set) scores", total)
        evaluator.prefilter(cf_types)
        add = _ComparisonList(abs_tol, rel_tol)
        if task.get("n_examples") is not None:
            add("/task/n_examples", "dataset rows", task["n_examples"], float(len(rows)), exact=True)
        for v, variable in enumerate(claims["variables"]):
            units = _score_units(
                ctx, model, evaluator, f"/claims/variables/{v}", variable, featurizers, add, progress
            )
            _compare_aggregate(
                f"/claims/variables/{v}", variable, aggregate_units(units, variable["better"]), add
            )
        return add

    add, _ = with_oom_backoff(run, batch, retry=halve)
    return Recomputation(comparisons=add.comparisons)


@dataclass
class _ComparisonList:
    """The comparisons of a recomputation, each within the profile's tolerances unless exact."""

    abs_tol: float
    rel_tol: float
    comparisons: list[Comparison] = field(default_factory=list)

    def __call__(self, pointer: str, quantity: str, claimed: Any, value: float, exact: bool = False) -> None:
        self.comparisons.append(
            Comparison(
                pointer,
                quantity,
                None if claimed is None else float(claimed),
                float(value),
                0.0 if exact else self.abs_tol,
                0.0 if exact else self.rel_tol,
            )
        )


def _score_units(
    ctx: RecomputeContext,
    model: Any,
    evaluator: Evaluator,
    base: str,
    variable: Mapping[str, Any],
    featurizers: dict[str, Any],
    add: _ComparisonList,
    progress: Progress,
) -> list[tuple[str, int, dict[str, float]]]:
    """Score a variable's units, compare each claimed score and kept-pair count, and return
    ``(unit id, layer, scores)`` per unit for :func:`aggregate_units`."""
    scored = []

    def featurizer(ident: str, pointer: str) -> Any:
        if ident not in featurizers:
            doc, folder = load_referenced_document(ctx, ident, pointer, "featurizer")
            weights = read_featurizer_weights(doc, folder, pointer)
            featurizers[ident] = build_featurizer(model, doc, weights, pointer)
        return featurizers[ident]

    for u, unit in enumerate(variable["units"]):
        pointer = f"{base}/units/{u}"
        joint = [
            (site.location, featurizer(site.featurizer, f"{pointer}{site.pointer}/featurizer"))
            for site in unit_sites(unit)[1:]
        ]
        result = evaluator.score_unit(
            variable["name"],
            variable["metric"],
            unit["location"],
            featurizer(unit["featurizer"], f"{pointer}/featurizer"),
            list(unit["scores"]),
            pointer,
            progress=lambda: progress.advance(),
            joint=joint,
        )
        what = "IIA" if variable["metric"] == "iia" else "MSE"
        for cf, claimed in unit["scores"].items():
            token = escape_pointer_token(cf)
            add(
                f"{pointer}/scores/{token}",
                f"{what} {variable['name']} {unit['id']} {cf}",
                claimed,
                result.scores[cf],
            )
            if unit.get("n_examples") and cf in unit["n_examples"]:
                count = float(result.n_examples[cf])
                add(
                    f"{pointer}/n_examples/{token}",
                    f"kept pairs {unit['id']} {cf}",
                    unit["n_examples"][cf],
                    count,
                    exact=True,
                )
        scored.append(
            (unit["id"], unit["location"]["layer"], {cf: result.scores[cf] for cf in unit["scores"]})
        )
    return scored


def _compare_aggregate(
    base: str, variable: Mapping[str, Any], aggregate: VariableAggregate, add: _ComparisonList
) -> None:
    """Compare a variable's claimed per-layer, Average and best values with the recomputed ones."""
    for layer, value in aggregate.per_layer.items():
        claimed_layer = (variable.get("per_layer") or {}).get(str(layer))
        add(f"{base}/per_layer/{layer}", f"{variable['name']} layer {layer}", claimed_layer, value)
    add(f"{base}/average", f"{variable['name']} Average", variable["average"], aggregate.average)
    best = "best" if "best" in variable else "highest"  # spec 1.0 calls it highest
    add(f"{base}/{best}", f"{variable['name']} best", variable[best], aggregate.best)
