"""The report tracks: one descriptor per track, naming where each layer keeps its part.

A track is a ``report``'s ``track`` value. Its rules, its recomputer, its ``mibspec score``
command and its figures live in different layers (the validator, the reference
implementation, the command line); each layer finds its part of a track here and imports
it by name only when it needs it, so this module imports nothing and validating a report
never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TRACKS", "Track"]


@dataclass(frozen=True)
class Track:
    """Where one track's parts live.

    Attributes:
        name: the ``track`` value of its reports.
        rules: modules whose ``@rule`` functions check the track's documents, in the order
            they run (a rule declares the track it applies to, see ``rules._registry.rule``).
        recomputer: ``module:function`` of the recompute stage's entry point for its reports.
        recompute_needs: the optional packages the recomputer needs before it can run (a
            missing one is R101); the recomputer may check further ones itself.
        work: ``module:function`` estimating, from the report alone, the work its
            recomputation will do (:class:`mibspec.core.work.Work` items, checked against the
            limits before the recomputer runs; R125 over them).
        gaps: ``module:function`` listing, from the report alone, the declarations without
            which its recomputation cannot run, as ``(pointer, detail)`` (R104 when
            recomputation is asked for, R112 without it).
        score_command: ``module:function`` of its ``mibspec score <command>``, as the command
            table (``mibspec.cli.table``) names it.
        figures: the figure kinds ``mibspec html`` draws for its reports, in order.
    """

    name: str
    rules: tuple[str, ...]
    recomputer: str
    recompute_needs: tuple[str, ...]
    work: str
    gaps: str
    score_command: str
    figures: tuple[str, ...]


_MODEL_EXTRA = ("torch", "safetensors", "transformers", "tokenizers")

#: Every track, in the order the command line lists them.
TRACKS: dict[str, Track] = {
    track.name: track
    for track in (
        Track(
            name="circuit",
            rules=("mibspec.validator.rules.circuit", "mibspec.validator.rules.circuit_document"),
            recomputer="mibspec.reference_impl.recompute.circuit:recompute",
            recompute_needs=_MODEL_EXTRA,
            work="mibspec.reference_impl.recompute.work:circuit",
            gaps="mibspec.reference_impl.recompute.declarations:circuit_gaps",
            score_command="mibspec.cli.score_circuit:score_circuit_command",
            figures=("faithfulness",),
        ),
        Track(
            name="causal_variable",
            rules=("mibspec.validator.rules.causal_variable",),
            recomputer="mibspec.reference_impl.recompute.causal_variable:recompute",
            recompute_needs=_MODEL_EXTRA,
            work="mibspec.reference_impl.recompute.work:causal_variable",
            gaps="mibspec.reference_impl.recompute.declarations:causal_variable_gaps",
            score_command="mibspec.cli.score_causal_variable:score_causal_variable_command",
            figures=("layer_position",),
        ),
        Track(
            name="saliency",
            rules=("mibspec.validator.rules.saliency",),
            recomputer="mibspec.reference_impl.recompute.saliency:recompute",
            recompute_needs=("torch",),
            work="mibspec.reference_impl.recompute.work:saliency",
            gaps="mibspec.reference_impl.recompute.declarations:saliency_gaps",
            score_command="mibspec.cli.score_saliency:score_saliency_command",
            figures=("saliency",),
        ),
        Track(
            name="causal_bench",
            rules=("mibspec.validator.rules.causal_bench",),
            # A planted behaviour needs numpy only; the recomputer checks for torch itself when
            # the report's behaviour is a transformer (R104 if it is missing).
            recomputer="mibspec.reference_impl.recompute.causal_bench:recompute",
            recompute_needs=(),
            work="mibspec.reference_impl.recompute.work:causal_bench",
            gaps="mibspec.reference_impl.recompute.declarations:causal_bench_gaps",
            score_command="mibspec.cli.score_causal_bench:score_causal_bench_command",
            figures=("radar", "null", "jaccard"),
        ),
    )
}
