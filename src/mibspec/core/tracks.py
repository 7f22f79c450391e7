"""The report tracks: one descriptor per track, naming where each layer keeps its part.

A track is a ``report``'s ``track`` value. Its rules, its recomputer, its ``mibspec score``
command, the conventions its reports state, its claims table and its figures live in
different layers (the validator, the reference implementation, the pages, the command
line); each layer finds its part of a track here and imports it by name only when it needs
it, so this module imports nothing and validating a report never imports torch.

What is derived from :data:`TRACKS` rather than listed again: the ``mibspec score``
commands (``mibspec.cli.table``), the rules that run on a report and the ones it leaves
unchecked (``mibspec.validator``), where a report states each convention
(``mibspec.core.conventions``), the ``track`` values a profile may name
(``mibspec.documents.profile``), the report union and its check (``mibspec.documents.report``
builds the union from its report models and refuses one without a track here, or a track
without one), the claims table and the figures of ``mibspec html`` (``mibspec.pages``). The
numbers a report of a track may carry are rows of the claim catalogue
(``spec/v1/claims.json``), keyed by track. ``CONTRIBUTING.md`` lists what a new track adds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["TRACKS", "Track", "track_of_case"]


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
        score_command: ``module:function`` of its ``mibspec score <word>`` command; the
            command table (``mibspec.cli.table``) lists it under that name.
        score_summary: the command's summary in ``mibspec score --help``: the first paragraph
            of the command function's docstring (a test checks that they agree).
        claims_table: ``module:function`` rendering the claims of its reports as HTML for
            ``mibspec html`` (a function of the ``claims`` object, see ``mibspec.pages.claims``).
        figures: the figure kinds ``mibspec html`` draws for its reports, in order.
        conventions: where its reports state a convention of their profile, as
            ``{profile key: JSON pointer}`` (``mibspec.core.conventions``), in the order they
            are listed.
    """

    name: str
    rules: tuple[str, ...]
    recomputer: str
    recompute_needs: tuple[str, ...]
    work: str
    gaps: str
    score_command: str
    score_summary: str
    claims_table: str
    figures: tuple[str, ...]
    conventions: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def word(self) -> str:
        """The track's name as the command line and the conformance case ids write it
        (``causal-bench``): ``mibspec score <word>``, case ids ``<word>-…``."""
        return self.name.replace("_", "-")


_MODEL_EXTRA = ("torch", "safetensors", "transformers", "tokenizers")
_CLI = "mibspec.cli"
_CLAIMS = "mibspec.pages.claims"

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
            score_command=f"{_CLI}.score_circuit:score_circuit_command",
            score_summary="Score edges, evaluate the circuits of the k-grid and write a report that verify "
            "recomputes.",
            claims_table=f"{_CLAIMS}:circuit_claims",
            figures=("faithfulness",),
            conventions={
                "grid": "/settings/grid",
                "ranking": "/settings/ranking",
                "edge_count_rounding": "/settings/edge_count_rounding",
                "auroc_convention": "/claims/auroc/convention",
                "start_token": "/settings/start_token",
                "answer_token": "/settings/answer_token",
            },
        ),
        Track(
            name="causal_variable",
            rules=("mibspec.validator.rules.causal_variable",),
            recomputer="mibspec.reference_impl.recompute.causal_variable:recompute",
            recompute_needs=_MODEL_EXTRA,
            work="mibspec.reference_impl.recompute.work:causal_variable",
            gaps="mibspec.reference_impl.recompute.declarations:causal_variable_gaps",
            score_command=f"{_CLI}.score_causal_variable:score_causal_variable_command",
            score_summary="Learn featurizers, score them by interchange interventions, write a report "
            "verify recomputes.",
            claims_table=f"{_CLAIMS}:causal_variable_claims",
            figures=("layer_position",),
            conventions={"checker": "/settings/checker"},
        ),
        Track(
            name="saliency",
            rules=("mibspec.validator.rules.saliency",),
            recomputer="mibspec.reference_impl.recompute.saliency:recompute",
            recompute_needs=("torch",),
            work="mibspec.reference_impl.recompute.work:saliency",
            gaps="mibspec.reference_impl.recompute.declarations:saliency_gaps",
            score_command=f"{_CLI}.score_saliency:score_saliency_command",
            score_summary="Compute saliency maps and the Shapley ground truth, score them, write a report "
            "verify recomputes.",
            claims_table=f"{_CLAIMS}:saliency_claims",
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
            score_command=f"{_CLI}.score_causal_bench:score_causal_bench_command",
            score_summary="Run activation patching, gradient attribution, ablation scanning and circuit "
            "discovery on a behaviour and write a CAUSAL-BENCH report (Tables 1–3) that verify recomputes.",
            claims_table=f"{_CLAIMS}:causal_bench_claims",
            figures=("radar", "null", "jaccard"),
            conventions={"p_convention": "/settings/p_convention"},
        ),
    )
}


def track_of_case(case_id: str) -> str | None:
    """The track a report case of the conformance suite is about: the one whose word starts its
    id (``causal-bench-…`` → ``causal_bench``); ``None`` when none does. An invalid case may
    declare a wrong track; its id still names the track it tests."""
    return next((track.name for track in TRACKS.values() if case_id.startswith(f"{track.word}-")), None)
