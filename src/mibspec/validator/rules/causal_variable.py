"""Causal-variable rules: per-layer, Average and best follow from the unit scores (C);
featurizers, token positions, causal models and dataset interventions are well declared (V).
The aggregation, feature maps and mechanisms come from ``mibspec.reference_impl``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mibspec.core.conventions import convention
from mibspec.core.findings import Finding
from mibspec.core.pointers import escape_pointer_token
from mibspec.core.spec import KNOWN_SPEC_VERSIONS
from mibspec.core.strict_json import JsonLinesError, load_json_file, read_json_lines

from .._context import RuleContext
from .._schema_stage import schema_for
from ._referenced import declared_tensor
from ._registry import compare, interval, rule, with_defaults
from .artifacts import resolve_inside, unsafe_reason


@rule("causal-variable-aggregates", track="causal_variable", codes=("C112",))
def causal_variable_aggregates(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Mean over counterfactual sets per unit, best unit per layer, then Average and best."""
    from mibspec.metrics.causal_variable import CellKey, aggregate_scores

    for v, variable in enumerate(doc["claims"]["variables"]):
        base = f"/claims/variables/{v}"
        table: dict[CellKey, float] = {}
        lows: dict[CellKey, float] = {}
        highs: dict[CellKey, float] = {}
        for u, unit in enumerate(variable["units"]):
            for cf_set, score in unit["scores"].items():
                cell = (cf_set, unit["location"]["layer"], unit["id"])
                table[cell] = score
                pointer = f"{base}/units/{u}/scores/{escape_pointer_token(cf_set)}"
                lows[cell], highs[cell] = interval(ctx, pointer, score)
        try:
            result = aggregate_scores(table, better=variable["better"])
            # Every aggregate is a mean or a best of unit means, so it rises with every
            # score: the interval ends bound it (C-10).
            low, high = (aggregate_scores(t, better=variable["better"]) for t in (lows, highs))
        except ValueError as exc:  # e.g. a unit scored on some counterfactual sets only
            yield ctx.finding(
                "C112",
                f"{base}/units",
                what="unit scores",
                claimed="as listed",
                recomputed=f"undefined ({exc})",
            )
            continue
        best = "best" if "best" in variable else "highest"  # spec 1.0 calls it highest
        for key, attribute in (("average", "average"), (best, "best")):
            yield from compare(
                ctx,
                "C112",
                f"{base}/{key}",
                variable[key],
                getattr(result, attribute),
                bounds=(getattr(low, attribute), getattr(high, attribute)),
                what=key,
            )
        claimed_layers = variable.get("per_layer")
        if claimed_layers is None:
            continue
        layers = {str(layer): value for layer, value in result.per_layer.items()}
        if set(claimed_layers) != set(layers):
            yield ctx.finding(
                "C112",
                f"{base}/per_layer",
                what="layers",
                # Canonical decimal keys sort numerically by (length, text), with no int()
                # of an arbitrarily long key.
                claimed=sorted(claimed_layers, key=lambda k: (len(k), k)),
                recomputed=sorted(layers, key=lambda k: (len(k), k)),
            )
            continue
        for layer, value in claimed_layers.items():
            yield from compare(
                ctx,
                "C112",
                f"{base}/per_layer/{layer}",
                value,
                layers[layer],
                bounds=(low.per_layer[int(layer)], high.per_layer[int(layer)]),
                what=f"layer {layer}",
            )


# --------------------------------------------------------------------------- declarations (V)
# Featurizers, token positions, causal models and dataset interventions, checked as data
# (numpy only: the feature maps and mechanisms come from ``mibspec.reference_impl``).


def _read_document(ctx: RuleContext, folder: Path, path: Any, kind: str) -> dict[str, Any] | None:
    """The ``kind`` document at ``folder/path`` when it is a safe path to a file that parses
    and is valid against its schema, else None (the document's own verification says why)."""
    if not isinstance(path, str) or unsafe_reason(path):
        return None
    try:
        target = resolve_inside(folder, path)
        if target is None or not target.is_file():
            return None
        parsed = load_json_file(target, ctx.options.limits)
    except (OSError, RuntimeError):  # unreadable, or a link loop
        return None
    if not parsed.ok or not isinstance(parsed.data, dict) or parsed.data.get("kind") != kind:
        return None
    version = parsed.data.get("spec_version")
    if not isinstance(version, str) or version not in KNOWN_SPEC_VERSIONS:
        return None
    # A document of any known 1.x version is read under its own version: minor versions are
    # compatible, so a 1.1 report may reference a 1.0 featurizer.
    if not schema_for(kind, version).is_valid(parsed.data):
        return None
    return parsed.data


def _document(ctx: RuleContext, ident: Any, kind: str) -> dict[str, Any] | None:
    """The referenced document behind an artifact id, or None when it cannot be read or is not
    valid (other rules report that: A102/A103/A107/A109)."""
    artifact = ctx.artifacts.get(ident) if isinstance(ident, str) else None
    if artifact is None or ident in ctx.broken_artifacts or artifact.get("kind") != kind:
        return None
    return _read_document(ctx, ctx.folder, artifact["path"], kind)


def task_dataset(ctx: RuleContext, ident: Any) -> dict[str, Any] | None:
    """The task's dataset document (a counterfactual or a shortcut dataset), or ``None`` when
    the report names none or it cannot be read (its own checks say why)."""
    artifact = ctx.artifacts.get(ident) if isinstance(ident, str) else None
    kind = (artifact or {}).get("kind")
    if kind not in ("counterfactual_dataset", "shortcut_dataset"):
        return None
    return _document(ctx, ident, kind)


def declared_examples(ctx: RuleContext, ident: Any) -> tuple[int, str] | None:
    """The number of examples the task's dataset document declares, and what they are: the
    rows of a counterfactual dataset's JSON Lines artifact, the images of a shortcut
    dataset. ``None`` when the document cannot be read (its own checks say why)."""
    artifact = ctx.artifacts.get(ident) if isinstance(ident, str) else None
    kind = (artifact or {}).get("kind")
    if kind == "counterfactual_dataset":
        dataset = _document(ctx, ident, kind)
        if dataset is None:
            return None
        entry: dict[str, Any] = next((a for a in dataset["artifacts"] if a["id"] == dataset["examples"]), {})
        rows = entry.get("rows")
        return (rows, "rows") if isinstance(rows, int) else None
    if kind == "shortcut_dataset":
        dataset = _document(ctx, ident, kind)
        if dataset is None:
            return None
        return dataset["clean_images"]["shape"][0], "images"
    return None


def _weight(ctx: RuleContext, ref: dict[str, Any]) -> Any | None:
    """A weight tensor as a numpy array (bfloat16 widened to float32), or None when A10x/A110
    already report why it cannot be read."""
    return declared_tensor(ctx, ref, bfloat16_as_float32=True)


def _location_problems(location: dict[str, Any]) -> list[tuple[str, str]]:
    from mibspec.metrics.positions import position_problems

    problems = [(f"/position{p}", detail) for p, detail in position_problems(location["position"])]
    heads = location.get("heads")
    if location["component"] == "attention_heads":
        if not heads:
            problems.append(("/heads", "an attention_heads location lists the heads it reads"))
        elif len(set(heads)) != len(heads):
            problems.append(("/heads", f"heads repeat: {heads}"))
    elif heads is not None:
        problems.append(("/heads", f"heads apply to attention_heads locations, not {location['component']}"))
    return problems


@rule("featurizer-declaration", codes=("V101", "V102", "V103", "V104"), kinds=("featurizer",))
def featurizer_declaration(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Weights fit the type and dimensions, rotations are orthonormal, feature indices exist,
    and the location's token position is completely declared."""
    from mibspec.metrics.featurizers import (
        ORTHONORMAL_TOLERANCE,
        expected_weights,
        orthonormal_weights,
        orthonormality_error,
    )

    for pointer, detail in _location_problems(doc["location"]):
        yield ctx.finding("V104", f"/location{pointer}", detail=detail)
    _, problems = expected_weights(doc)
    for pointer, detail in problems:
        yield ctx.finding("V102", pointer, detail=detail)
    indices = doc.get("feature_indices")
    if indices is not None:
        n = doc["n_features"]
        for i, index in enumerate(indices):
            if index >= n:
                yield ctx.finding(
                    "V103", f"/feature_indices/{i}", detail=f"index {index} is outside [0, {n}) (n_features)"
                )
        if len(set(indices)) != len(indices):
            yield ctx.finding("V103", "/feature_indices", detail="an index is listed twice")
    bad = {pointer.split("/")[2] for pointer, _ in problems if pointer.startswith("/weights/")}
    for name in orthonormal_weights(doc):
        ref = doc.get("weights", {}).get(name)
        if ref is None or name in bad:
            continue
        matrix = _weight(ctx, ref)
        if matrix is None:  # A110 / A10x report why the tensor cannot be read
            continue
        error = orthonormality_error(matrix)
        tolerance = ORTHONORMAL_TOLERANCE[ref["dtype"]]
        if not error <= tolerance:
            yield ctx.finding(
                "V101",
                f"/weights/{name}",
                detail=f"max |R·Rᵀ − I| = {error:.3g} exceeds {tolerance:g} for {ref['dtype']} weights",
                data={"error": error, "tolerance": tolerance},
            )


@rule("causal-model-mechanism", codes=("V106",), kinds=("causal_model",))
def causal_model_mechanism(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """The mechanism's variables and parameters are declared."""
    from mibspec.metrics.causal_models import check_causal_model

    for pointer, detail in check_causal_model(doc):
        yield ctx.finding("V106", pointer, detail=detail)


_MAX_ROW_FINDINGS = 10


@rule("dataset-origin", codes=("V111",), kinds=("counterfactual_dataset",))
def dataset_origin(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """A dataset declares where its rows come from: its generator, or the released file it was
    imported from (datasets.md DS-10)."""
    if "generator" not in doc and "source" not in doc:
        yield ctx.finding("V111", "")


@rule("dataset-rows", codes=("V107", "V112"), kinds=("counterfactual_dataset",))
def dataset_rows(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Every row has the row format (DS-2, DS-3), a unique id, and variables, answers and
    expected outputs that follow from the declared causal model (CV-5)."""
    from mibspec.metrics.causal_models import INTERVENED, check_causal_model, check_row
    from mibspec.reference_impl.datasets.rows import row_problems

    model = _document(ctx, doc.get("causal_model"), "causal_model")
    if model is not None and check_causal_model(model):
        model = None
    variables = list(doc.get("variables", []))
    if model is not None:
        mechanism = model["mechanism"]
        for i, name in enumerate(variables):
            if name not in INTERVENED[mechanism]:
                yield ctx.finding(
                    "V107",
                    f"/variables/{i}",
                    detail=f"{name!r} is not a variable the {mechanism} mechanism can intervene on "
                    f"({', '.join(INTERVENED[mechanism])})",
                )
                model = None
                break
    artifact = ctx.artifacts.get(doc["examples"])
    if artifact is None or doc["examples"] in ctx.broken_artifacts:
        return
    cf_types = doc["counterfactual_types"]
    reported = {"V107": 0, "V112": 0}
    ids: set[str] = set()
    try:
        with (ctx.folder / artifact["path"]).open("rb") as handle:
            for number, row in read_json_lines(handle, ctx.options.limits):
                problems = [("V112", pointer, detail) for pointer, detail in row_problems(row, cf_types)]
                ident = row.get("id")
                if isinstance(ident, str):
                    if ident in ids:
                        problems.append(("V112", "/id", f"the id {ident!r} is used by an earlier row"))
                    ids.add(ident)
                if not problems and model is not None:
                    try:
                        found = check_row(model, row, variables, cf_types)
                    except (AttributeError, KeyError, TypeError, ValueError) as exc:
                        found = [("", f"the row cannot be run through the causal model ({exc!r})")]
                    problems = [("V107", pointer, detail) for pointer, detail in found]
                for code, pointer, detail in problems:
                    reported[code] += 1
                    if reported[code] <= _MAX_ROW_FINDINGS:
                        yield ctx.finding(
                            code,
                            "/examples",
                            detail=f"row {number} ({_short_id(ident)}) at {pointer or '/'}: {detail}",
                        )
    except (OSError, JsonLinesError):
        return  # A106 reports unreadable rows
    for code, count in reported.items():
        if count > _MAX_ROW_FINDINGS:
            yield ctx.finding(
                code, "/examples", detail=f"{count - _MAX_ROW_FINDINGS} more problem(s) not listed"
            )


def _short_id(ident: Any) -> str:
    text = repr(ident)
    return text if len(text) <= 80 else text[:79] + "…"


def _filled_location(ctx: RuleContext, location: dict[str, Any]) -> dict[str, Any]:
    filled = with_defaults(ctx, location, "Location")
    filled["position"] = with_defaults(ctx, location["position"], "TokenPosition")
    return {key: value for key, value in filled.items() if value is not None}


@rule("causal-variable-declarations", track="causal_variable", codes=("V104", "V105", "V108", "V109", "V113"))
def causal_variable_declarations(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Units are declared completely and sit inside the model where their featurizer reads;
    variables and counterfactual sets are the dataset's; the metric fits the causal model; the
    checker is the profile's."""
    settings = with_defaults(ctx, doc.get("settings", {}), "CausalVariableSettings")
    # A report that names no checker uses its profile's; one that names another is refused.
    for pointer, declared, required in convention(ctx.profile, doc, "checker").conflicts():
        yield ctx.finding(
            "V108",
            pointer,
            detail=f"the report checks answers with {declared!r}, its profile "
            f"{ctx.profile['name']!r} with {required!r}",
        )
    config = doc["model"].get("config") or {}
    dataset = _document(ctx, doc["task"].get("dataset"), "counterfactual_dataset")
    model_ref = settings.get("causal_model") or (dataset or {}).get("causal_model")
    causal_model = None
    if settings.get("causal_model"):
        causal_model = _document(ctx, settings["causal_model"], "causal_model")
    elif dataset is not None and model_ref:
        artifact = next((a for a in dataset.get("artifacts", []) if a.get("id") == model_ref), None)
        if artifact is not None:
            dataset_folder = (ctx.folder / ctx.artifacts[doc["task"]["dataset"]]["path"]).parent
            causal_model = _read_document(ctx, dataset_folder, artifact.get("path"), "causal_model")
    for v, variable in enumerate(doc["claims"]["variables"]):
        base = f"/claims/variables/{v}"
        if dataset is not None and variable["name"] not in dataset.get("variables", []):
            yield ctx.finding(
                "V109",
                f"{base}/name",
                detail=f"{variable['name']!r} is not a variable of the dataset "
                f"({dataset.get('variables', [])})",
            )
        if causal_model is not None:
            wants_mse = causal_model.get("mechanism") == "ioi_linear"
            if (variable["metric"] == "mse") != wants_mse:
                yield ctx.finding(
                    "V109",
                    f"{base}/metric",
                    detail=f"metric {variable['metric']!r} with the {causal_model.get('mechanism')} causal "
                    "model; IOI's ioi_linear model is scored by mse, the others by iia",
                )
        for u, unit in enumerate(variable["units"]):
            upointer = f"{base}/units/{u}"
            if dataset is not None:
                for cf_set in unit["scores"]:
                    if cf_set not in dataset.get("counterfactual_types", []):
                        yield ctx.finding(
                            "V109",
                            f"{upointer}/scores/{escape_pointer_token(cf_set)}",
                            detail=f"{cf_set!r} is not a counterfactual type of the dataset",
                        )
            for cf_set in unit.get("n_examples") or {}:
                if cf_set not in unit["scores"]:
                    yield ctx.finding(
                        "V109",
                        f"{upointer}/n_examples/{escape_pointer_token(cf_set)}",
                        detail=f"an example count for {cf_set!r}, which the unit has no score for",
                    )
            yield from _unit_location(ctx, unit, upointer, config)


@rule("causal-variable-recomputable", track="causal_variable", codes=("V110",))
def causal_variable_recomputable(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """What recomputation will need and the report does not declare (a warning: the claims
    can still be checked against each other; recomputation fails with R104)."""
    from mibspec.reference_impl.recompute.declarations import missing_declarations

    for pointer, detail in missing_declarations(doc):
        yield ctx.finding("V110", pointer, detail=detail)


def _unit_location(
    ctx: RuleContext, unit: dict[str, Any], pointer: str, config: dict[str, Any]
) -> Iterator[Finding]:
    """V104, V105 and V113 of a unit: its location and every joint site (MV-10) declared
    completely, inside the model, where its featurizer reads; the sites of a joint unit apart."""
    location = unit["location"]
    # A unit without a featurizer (imported results) is declared by its location alone: an
    # ``all`` position that also sets an index is checked here, not only in featurizers.
    for at, detail in _location_problems(location):
        yield ctx.finding("V104", f"{pointer}/location{at}", detail=detail)
    yield from _site_in_model(ctx, location, f"{pointer}/location", config)
    yield from _site_featurizer(ctx, unit.get("featurizer"), location, pointer, "/location", config)
    from mibspec.metrics.featurizers import unit_sites

    for site in unit_sites(unit)[1:]:
        at = f"{pointer}{site.pointer}"
        for below, detail in _location_problems(site.location):
            if not below.startswith("/position"):  # the unit's position is reported once, above
                yield ctx.finding("V104", f"{at}{below}", detail=detail)
        yield from _site_in_model(ctx, site.location, at, config)
        yield from _site_featurizer(ctx, site.featurizer, site.location, at, "", config)
    yield from _joint_sites_apart(ctx, location, unit.get("joint_sites") or [], pointer)


def _site_in_model(
    ctx: RuleContext, location: dict[str, Any], pointer: str, config: dict[str, Any]
) -> Iterator[Finding]:
    if not config:
        return
    n_layers, n_heads = config["n_layers"], config["n_heads"]
    if location["layer"] >= n_layers:
        yield ctx.finding(
            "V105", f"{pointer}/layer", detail=f"layer {location['layer']} of a {n_layers}-layer model"
        )
    for h, head in enumerate(location.get("heads") or []):
        if head >= n_heads:
            yield ctx.finding("V105", f"{pointer}/heads/{h}", detail=f"head {head} of a {n_heads}-head model")


def _site_featurizer(
    ctx: RuleContext, ident: Any, location: dict[str, Any], pointer: str, at: str, config: dict[str, Any]
) -> Iterator[Finding]:
    """A site's featurizer reads where the site is (V105 at ``pointer + at``) and as many
    values as the site holds (V105 at its ``featurizer``)."""
    if ident is None:
        return  # imported results do not record featurizers; recomputation reports it (R104)
    featurizer = _document(ctx, ident, "featurizer")
    if featurizer is None:
        return
    if _filled_location(ctx, featurizer["location"]) != _filled_location(ctx, location):
        yield ctx.finding(
            "V105",
            f"{pointer}{at}",
            detail=f"the {'unit' if at else 'joint site'}'s location differs from its featurizer's ({ident})",
        )
    if config:
        from mibspec.metrics.featurizers import location_width

        n_heads, d_model = config["n_heads"], config["d_model"]
        expected = location_width(location, d_model, n_heads)
        if location["component"] == "attention_heads":
            what = f"{len(location.get('heads') or [])} heads of {d_model // n_heads} values"
        else:
            what = f"d_model {d_model}"
        if featurizer["input_dim"] != expected:
            yield ctx.finding(
                "V105",
                f"{pointer}/featurizer",
                detail=f"featurizer {ident} reads {featurizer['input_dim']} values, "
                f"the location holds {expected} ({what})",
            )


def _joint_sites_apart(
    ctx: RuleContext, location: dict[str, Any], sites: list[dict[str, Any]], pointer: str
) -> Iterator[Finding]:
    """V113: a joint unit's location is a site of its lowest layer (the layer it counts
    under, MV-4), and no two of its sites write the same values."""
    seen = [(f"{pointer}/location", location)]
    for j, site in enumerate(sites):
        at = f"{pointer}/joint_sites/{j}"
        if site["layer"] < location["layer"]:
            yield ctx.finding(
                "V113",
                f"{at}/layer",
                detail=f"a joint site at layer {site['layer']}, below the unit's location (layer "
                f"{location['layer']}): the location is the site of lowest layer, the layer the unit "
                "counts under",
            )
        for other_at, other in seen:
            shared = _overlap(site, other)
            if shared:
                yield ctx.finding("V113", at, detail=f"writes {shared}, which {other_at} writes too")
                break
        seen.append((at, site))


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> str:
    """What two sites both write ("" when nothing): one layer and component, and for
    attention heads a head of both lists."""
    if a["layer"] != b["layer"] or a["component"] != b["component"]:
        return ""
    if a["component"] != "attention_heads":
        return f"{a['component']} of layer {a['layer']}"
    common = sorted(set(a.get("heads") or []) & set(b.get("heads") or []))
    return f"head(s) {common} of layer {a['layer']}" if common else ""


@rule("unit-example-counts", track="causal_variable", codes=("D105",))
def unit_example_counts(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """No unit counts more scored pairs than the task's dataset has examples."""
    declared = declared_examples(ctx, doc["task"].get("dataset"))
    if declared is None:
        return
    count, what = declared
    for v, variable in enumerate(doc["claims"]["variables"]):
        for u, unit in enumerate(variable["units"]):
            for name, n in (unit.get("n_examples") or {}).items():
                if n > count:
                    yield ctx.finding(
                        "D105",
                        f"/claims/variables/{v}/units/{u}/n_examples/{escape_pointer_token(name)}",
                        detail=f"{n} pairs scored on a dataset of {count} {what}",
                    )
