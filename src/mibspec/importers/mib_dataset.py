"""Import the rows of MIB's released datasets as counterfactual-dataset documents.

The released files (hub repositories ``mib-bench/*``, parquet or JSON Lines) hold one row
per base prompt, with one column per counterfactual type, named ``<type>_counterfactual``,
each holding the counterfactual prompt in the same layout as the base. The columns read
per task are the ones the public loaders read:

==========================  ===============================================================
task                        base columns
==========================  ===============================================================
``ioi``                     ``prompt``, ``template``, ``metadata`` (``subject``, …)
``mcqa``                    ``prompt``, ``choices`` (``label``, ``text``), ``answerKey`` (an index)
``arc_easy``                as ``mcqa``
``arc_challenge``           as ``mcqa``
``arithmetic``              ``prompt``, ``label`` (the sum), ``operator`` (``+``)
``arithmetic_subtraction``  as ``arithmetic``, ``operator`` ``-`` (answers only, no variables)
``ravel``                   ``prompt``, ``entity``, ``attribute``; answers from the attribute table
==========================  ===============================================================

Each row becomes a row of ``spec/v1/datasets.md`` (DS-2, DS-3, DS-14): answers with their
leading space, the causal variables of the task (DS-7) computed from the columns, and the
expected output of every interchange intervention the columns determine (DS-6). RAVEL's
answers come, as in the public loader, from an attribute table (entity → attribute → value)
given to the import; without one, from a ``label`` column, and an intervention on the
queried attribute is then known only when the counterfactual queries the same attribute.
Rows whose counterfactual columns are not all present, and rows whose base prompt has no
answer, are dropped and the drops are declared as filters. Rows are streamed (parquet in
record batches, JSON Lines line by line), so memory does not grow with the file. Parquet
needs pyarrow (the ``mib`` extra); JSON Lines needs nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from mibspec.core.folders import NameClashError, OutputPlan, safe_name
from mibspec.core.integers import parse_int
from mibspec.core.outputs import Inputs
from mibspec.core.spec import install_hint
from mibspec.core.strict_json import JsonLinesError, Limits, read_json_lines
from mibspec.core.version import __version__
from mibspec.documents import CounterfactualDataset, document_bytes
from mibspec.validator import catalogue, load_json_file, make_finding

from .eap_ig import ImportResult, _MalformedError, unfit_value
from .mib_results import source_created

__all__ = ["DATASET_TASKS", "MAX_ROW_BYTES", "import_mib_dataset", "released_files", "split_of_name"]

#: Longest JSON Lines row read (bytes); a longer line is refused (I116), never read whole.
MAX_ROW_BYTES = 16 * 1024 * 1024
_ATTRIBUTES = "attributes.json"
#: Rows per parquet record batch: what is held in memory at once.
_BATCH_ROWS = 256
_SUFFIX = "_counterfactual"
#: Longest row template matched against its prompt (characters); a longer one is kept as text.
_MAX_TEMPLATE = 4096

#: MIB's hub repositories → task names of ``spec/v1/datasets.md``.
_HUB_TASKS = {
    "mib-bench/ioi": "ioi",
    "mib-bench/ioi_private_test": "ioi",
    "mib-bench/copycolors_mcqa": "mcqa",
    "mib-bench/copycolors_mcqa_private_test": "mcqa",
    "mib-bench/arc_easy": "arc_easy",
    "mib-bench/arc_easy_private_test": "arc_easy",
    "mib-bench/arc_challenge": "arc_challenge",
    "mib-bench/arc_challenge_private_test": "arc_challenge",
    "mib-bench/arithmetic_addition": "arithmetic",
    "mib-bench/arithmetic_addition_private_test": "arithmetic",
    "mib-bench/arithmetic_subtraction": "arithmetic_subtraction",
    "mib-bench/arithmetic_subtraction_private_test": "arithmetic_subtraction",
    "mib-bench/ravel": "ravel",
    "mib-bench/ravel_private_test": "ravel",
}
_VARIABLES = {
    "ioi": ("output_token", "output_position"),
    "mcqa": ("answer_pointer", "answer"),
    "arc_easy": ("answer_pointer", "answer"),
    "arc_challenge": ("answer_pointer", "answer"),
    "arithmetic": ("ones_carry",),
    "arithmetic_subtraction": (),
    "ravel": ("Country", "Continent", "Language"),
}
#: Task names accepted by :func:`import_mib_dataset`.
DATASET_TASKS: tuple[str, ...] = tuple(_VARIABLES)
_SPLITS = ("train", "validation", "test", "private_test")
_SPLIT_WORDS = (
    ("private_test", "private_test"),
    ("validation", "validation"),
    ("val", "validation"),
    ("train", "train"),
    ("test", "test"),
)


class _LineError(_MalformedError):
    """A problem on a line of a JSON Lines file: the finding is located there."""

    def __init__(self, code: str, line: int, **params: Any) -> None:
        super().__init__(code, "", **params)
        self.line = line


class _UnansweredRowError(Exception):
    """A row the task's causal model gives no output for: dropped and declared as a filter."""


class _RowError(Exception):
    def __init__(self, field_name: str, detail: str) -> None:
        super().__init__(detail)
        self.field, self.detail = field_name, detail


@dataclass
class _Counts:
    read: int = 0
    kept: int = 0
    incomplete: int = 0
    first_incomplete: list[str] = field(default_factory=list)
    unanswered: int = 0
    first_unanswered: list[str] = field(default_factory=list)


def import_mib_dataset(
    sources: list[Path],
    out_dir: Path,
    *,
    task: str | None = None,
    split: str | None = None,
    hub_id: str | None = None,
    revision: str | None = None,
    attributes: Path | None = None,
) -> ImportResult:
    """Write ``out_dir/<stem>.json`` and ``out_dir/<stem>.jsonl`` for every released file.

    ``attributes`` is RAVEL's attribute table (a JSON object: entity → {attribute: value}, the
    layout of the public ``ravel_city_entity.json``), from which the public loader takes RAVEL's
    answers; it is copied beside the documents as ``attributes.json`` and pinned as an artifact.

    Never raises for bad input: problems come back as findings with codes. Nothing is
    written unless every file converts whole (each file's rows are staged under a temporary
    name until then); two files written under one name are I126. The inputs are only read.

    Raises:
        mibspec.core.outputs.OutputPathError: a file to be written is an input (or a link to one).
    """
    cat = catalogue()
    result = ImportResult()
    inputs = Inputs(list(sources))
    plan = OutputPlan(out_dir)
    try:
        for source in sources:
            stem = safe_name(_stem(source))
            for name in (f"{stem}.json", f"{stem}.jsonl"):
                inputs.refuse(plan.claim(name, str(source)), "output")
        if attributes is not None:
            inputs.add(attributes)
            plan.claim(_ATTRIBUTES, f"--attributes {attributes}")
    except NameClashError as exc:
        result.findings.append(make_finding(cat, None, "I126", "", detail=str(exc)).located(1, 1))
        return result
    table: dict[str, dict[str, str]] | None = None
    if attributes is not None:
        try:
            table = _attribute_table(attributes)
        except _MalformedError as exc:
            result.findings.append(make_finding(cat, None, exc.code, exc.pointer, **exc.params).located(1, 1))
            return result
    options = _Options(task, split, hub_id, revision, table, attributes)
    made = not out_dir.exists()
    documents = []
    try:
        for source in sources:
            try:
                documents.append(_import_one(source, plan, options))
            except _MalformedError as exc:
                finding = make_finding(cat, None, exc.code, exc.pointer, **exc.params)
                result.findings.append(finding.located(getattr(exc, "line", 1), 1))
            except ValidationError as exc:  # a value the dataset document cannot hold
                detail = f"{source.name}: {unfit_value(exc)}"
                result.findings.append(make_finding(cat, None, "I116", "", detail=detail).located(1, 1))
        if not result.findings:
            plan.write(inputs)
    finally:
        plan.discard()  # the staged rows of an import that is not written
        if made and out_dir.is_dir() and not any(out_dir.iterdir()):
            out_dir.rmdir()
    if not result.findings:
        result.written = [document for document, _ in documents]
        result.sidecars = [rows for _, rows in documents]
    return result


@dataclass(frozen=True)
class _Options:
    """The options of one :func:`import_mib_dataset` call, shared by every file it imports."""

    task: str | None
    split: str | None
    hub_id: str | None
    revision: str | None
    table: Mapping[str, Mapping[str, str]] | None  # RAVEL's attribute table, read
    attributes: Path | None  # the file the table was read from

    def check(self) -> None:
        """Raises _MalformedError (I117) for a malformed option."""
        hub_id, revision, task, split = self.hub_id, self.revision, self.task, self.split
        if hub_id is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9_.-]+)?", hub_id):
            raise _MalformedError("I117", "", detail=f"--hub-id {hub_id!r} is not a hub repository id")
        if revision is not None and not re.fullmatch(r"[0-9a-f]{40}", revision):
            raise _MalformedError("I117", "", detail=f"--revision {revision!r} is not a full commit hash")
        if task is not None and task not in DATASET_TASKS:
            raise _MalformedError(
                "I117", "", detail=f"--task {task!r} is not one of {', '.join(DATASET_TASKS)}"
            )
        if split is not None and split not in _SPLITS:
            raise _MalformedError("I117", "", detail=f"--split {split!r} is not one of {', '.join(_SPLITS)}")


@dataclass(frozen=True)
class _Rows:
    """The rows file written for one released file: what its document declares about it."""

    path: Path
    staged: Path  # the rows, written under a temporary name beside ``path``
    task: str
    cf_types: list[str]
    sha256: str
    size: int
    counts: _Counts


def _import_one(source: Path, plan: OutputPlan, options: _Options) -> tuple[Path, Path]:
    """Convert one released file: its rows staged beside the output, its document planned;
    the two paths."""
    options.check()
    fmt = _format(source)
    rows = _parquet_rows(source) if fmt == "parquet" else _jsonl_rows(source)
    stem = safe_name(_stem(source))
    split = options.split or _split_from_name(source.name)
    pin = _file_hash(source)
    written = _write_rows(source, pin, rows, plan.out_dir / f"{stem}.jsonl", options, split)
    rows_path = plan.add_staged(f"{stem}.jsonl", written.staged, source=str(source))
    document = _document(source, fmt, pin, written, options, split)
    if written.task == "ravel" and options.attributes is not None:
        document["artifacts"].append(_copy_attributes(options.attributes, plan))
    model = CounterfactualDataset.model_validate(document)
    return plan.add(f"{stem}.json", document_bytes(model), source=str(source)), rows_path


def _write_rows(
    source: Path,
    pin: tuple[str, int],
    rows: Iterator[tuple[int, dict[str, Any]]],
    rows_path: Path,
    options: _Options,
    split: str,
) -> _Rows:
    """Convert ``rows`` into a temporary file beside ``rows_path`` (``staged`` in the result),
    kept only when every row converted and ``source`` still has the bytes ``pin`` (SHA-256,
    size) names; on failure the temporary file goes."""
    out_dir = rows_path.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = _Counts()
    fd, temporary = tempfile.mkstemp(dir=out_dir, prefix=f".{rows_path.name[:64]}.", suffix=".tmp")
    digest, size = hashlib.sha256(), 0
    try:
        with os.fdopen(fd, "wb") as handle:
            cf_types, task = _convert(
                rows, options.task, options.hub_id, split, counts, handle, digest, options.table
            )
            size = handle.tell()
            handle.flush()
            os.fsync(handle.fileno())
        if _file_hash(source) != pin:
            # The pin must be of the bytes the rows were read from.
            raise _MalformedError("I101", "", detail=f"{source.name} changed while it was read")
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return _Rows(rows_path, Path(temporary), task, cf_types, digest.hexdigest(), size, counts)


def _filters(counts: _Counts) -> list[dict[str, Any]]:
    """The declared filters: rows dropped for a missing counterfactual column, then for no answer."""
    filters = []
    if counts.incomplete:
        filters.append(
            {
                "name": "other",
                "kept": counts.read - counts.incomplete,
                "dropped": counts.incomplete,
                "detail": "rows lacking a counterfactual column were dropped "
                f"(first: {', '.join(counts.first_incomplete)})",
            }
        )
    if counts.unanswered:
        filters.append(
            {
                "name": "other",
                "kept": counts.kept,
                "dropped": counts.unanswered,
                "detail": "rows without an answer were dropped "
                f"(first: {'; '.join(counts.first_unanswered)})",
            }
        )
    return filters


def _document(
    source: Path, fmt: str, pin: tuple[str, int], rows: _Rows, options: _Options, split: str
) -> dict[str, Any]:
    """The counterfactual-dataset document of ``source`` and its written rows."""
    task, hub_id, revision = rows.task, options.hub_id, options.revision
    source_hash, source_bytes = pin
    pinned = f"{hub_id}@{revision}" if hub_id and revision else hub_id or "an unnamed repository"
    return {
        "task": task,
        "split": split,
        "examples": "examples",
        "counterfactual_types": rows.cf_types,
        "variables": list(_VARIABLES[task]),
        "filters": _filters(rows.counts),
        "description": (
            f"Rows of MIB's released {task} dataset ({source.name}, from {pinned}), imported by "
            f"mibspec {__version__}: prompts, answers and choices as released; causal variables and "
            "intervention outputs derived from the columns (datasets.md DS-6, DS-7); slots from the "
            "row's template where it has one."
        ),
        "source": {
            "file": source.name,
            "format": fmt,
            "sha256": source_hash,
            "bytes": source_bytes,
            "rows": rows.counts.read,
            **({"hub_id": hub_id} if hub_id else {}),
            **({"revision": revision} if revision else {}),
        },
        "artifacts": [
            {
                "id": "examples",
                "role": "dataset",
                "path": rows.path.name,
                "sha256": rows.sha256,
                "bytes": rows.size,
                "media_type": "application/jsonl",
                "rows": rows.counts.kept,
            }
        ],
        "provenance": {
            "tool": {"name": "mibspec", "version": __version__},
            "created": source_created(source),
            "libraries": {},
            "command": f"mibspec import mib-dataset {source.name}",
        },
    }


def _copy_attributes(attributes: Path, plan: OutputPlan) -> dict[str, Any]:
    """Plan the copy of RAVEL's attribute table beside the documents (once); its artifact entry."""
    data = attributes.read_bytes()
    if not any(path.name == _ATTRIBUTES for path in plan.paths):
        plan.add(_ATTRIBUTES, data, source=f"--attributes {attributes}")
    return {
        "id": "attributes",
        "role": "attributes",
        "path": _ATTRIBUTES,
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "media_type": "application/json",
    }


# --------------------------------------------------------------------------- reading


def _format(source: Path) -> str:
    try:
        with source.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise _MalformedError("I101", "", detail=f"{source.name} cannot be read: {exc.strerror}") from None
    return "parquet" if magic == b"PAR1" or source.suffix == ".parquet" else "jsonl"


def _parquet_rows(source: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise _MalformedError(
            "I104", "", detail=f"{source.name} is parquet, which needs pyarrow: {install_hint('mib')}"
        ) from None
    try:
        handle = pq.ParquetFile(source)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise _MalformedError(
            "I101", "", detail=f"{source.name} is not a readable parquet file: {exc}"
        ) from None

    def rows() -> Iterator[tuple[int, dict[str, Any]]]:
        index = 0
        try:
            for batch in handle.iter_batches(batch_size=_BATCH_ROWS):
                for row in batch.to_pylist():
                    yield index, row
                    index += 1
        except _MalformedError:
            raise
        except Exception as exc:  # a damaged row group
            raise _MalformedError(
                "I101", f"/{index}", detail=f"{source.name}: row {index} cannot be read: {exc}"
            ) from None
        finally:
            handle.close()

    return rows()


def _jsonl_rows(source: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    limits = Limits(max_bytes=MAX_ROW_BYTES)
    with source.open("rb") as handle:
        try:
            for index, (_, row) in enumerate(read_json_lines(handle, limits)):
                yield index, row
        except JsonLinesError as exc:
            raise _LineError("I116", exc.number, detail=f"{source.name}: {exc}") from None


def _file_hash(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 16), b""):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _attribute_table(path: Path) -> dict[str, dict[str, str]]:
    parsed = load_json_file(path, Limits())
    data = parsed.data
    if parsed.problems or not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise _MalformedError(
            "I117",
            "",
            detail=f"--attributes {path.name} is not a JSON object of entity → {{attribute: value}}",
        )
    return {
        entity: {k: v for k, v in values.items() if isinstance(v, str) and v}
        for entity, values in data.items()
    }


def _stem(source: Path) -> str:
    return source.name.split(".")[0] or "dataset"


def split_of_name(name: str) -> str | None:
    """The split a released file's name says (``ioi_test.parquet``, ``data/validation-00000-of-00001.parquet``
    → ``test``, ``validation``), or ``None``."""
    words = re.split(r"[^A-Za-z]+", name.lower())
    text = "_".join(words)
    for word, split in _SPLIT_WORDS:
        if word in words or (word == "private_test" and "private_test" in text):
            return split
    return None


def released_files(folder: Path, split: str) -> list[Path]:
    """The released files of a dataset repository's snapshot ``folder`` that hold ``split``:
    parquet files, else JSON Lines files, whose name (or folder) names the split, sorted."""
    for suffix in (".parquet", ".jsonl"):
        found = sorted(
            path
            for path in folder.rglob(f"*{suffix}")
            if path.is_file() and split_of_name(path.relative_to(folder).as_posix()) == split
        )
        if found:
            return found
    return []


def _split_from_name(name: str) -> str:
    split = split_of_name(name)
    if split is not None:
        return split
    raise _MalformedError(
        "I117", "", detail=f"no split (train, validation, test) in the name {name!r}; pass --split"
    )


# --------------------------------------------------------------------------- conversion


def _convert(
    rows: Iterator[tuple[int, dict[str, Any]]],
    task: str | None,
    hub_id: str | None,
    split: str,
    counts: _Counts,
    handle: BinaryIO,
    digest: Any,
    table: Mapping[str, Mapping[str, str]] | None,
) -> tuple[list[str], str]:
    cf_types: list[str] | None = None
    for index, row in rows:
        counts.read += 1
        if cf_types is None:
            # As the public loader does, the first row names the counterfactual columns.
            columns = sorted(k for k in row if k.endswith(_SUFFIX) and k != _SUFFIX)
            if not columns:
                raise _MalformedError("I116", "/0", detail=f"no column ends in {_SUFFIX!r}")
            cf_types = [c.removesuffix(_SUFFIX) for c in columns]
            task = task or _task_from(row, hub_id)
        convert = partial(_ravel, table=table) if task == "ravel" else _CONVERTERS[str(task)]
        missing = [t for t in cf_types if not isinstance(row.get(t + _SUFFIX), Mapping)]
        if missing:
            counts.incomplete += 1
            if len(counts.first_incomplete) < 3:
                counts.first_incomplete.append(f"row {index} lacks {missing[0]}{_SUFFIX}")
            continue
        try:
            converted = convert(row, cf_types)
        except _UnansweredRowError as exc:
            counts.unanswered += 1
            if len(counts.first_unanswered) < 3:
                counts.first_unanswered.append(f"row {index}: {exc}")
            continue
        except _RowError as exc:
            raise _MalformedError(
                "I116", f"/{index}/{exc.field}", detail=f"row {index}: {exc.detail}"
            ) from None
        converted["id"] = f"{task}-{split}-{index:06d}"
        line = (
            json.dumps(converted, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            + "\n"
        ).encode("utf-8")
        handle.write(line)
        digest.update(line)
        counts.kept += 1
    if cf_types is None or task is None:
        raise _MalformedError("I116", "", detail="the file holds no rows")
    if counts.kept == 0:
        raise _MalformedError(
            "I116",
            "",
            detail=f"no row was kept: {counts.incomplete} lack a counterfactual column, "
            f"{counts.unanswered} have no answer"
            + (
                " (RAVEL answers come from the attribute table: pass --attributes)" if task == "ravel" else ""
            ),
        )
    return cf_types, task


def _task_from(row: Mapping[str, Any], hub_id: str | None) -> str:
    if hub_id in _HUB_TASKS:
        return _HUB_TASKS[hub_id]
    if "metadata" in row and "template" in row:
        return "ioi"
    if "entity" in row and "attribute" in row:
        return "ravel"
    if "label" in row and "operator" in row:
        return "arithmetic_subtraction" if row["operator"] == "-" else "arithmetic"
    if "choices" in row and "answerKey" in row:
        if any(k.startswith(("noun", "color")) for k in row if k.endswith(_SUFFIX)):
            return "mcqa"
        raise _MalformedError(
            "I117", "/0", detail="the columns fit mcqa, arc_easy and arc_challenge; pass --task or --hub-id"
        )
    raise _MalformedError(
        "I117",
        "/0",
        detail=f"the columns {sorted(row)} fit no MIB task; pass --task ({', '.join(DATASET_TASKS)})",
    )


def _text(row: Mapping[str, Any], key: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value:
        raise _RowError(key, f"{key!r} must be a non-empty string, got {type(value).__name__}")
    return value


def _escaped(prompt: str) -> str:
    return prompt.replace("{", "{{").replace("}", "}}")


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _template_slots(template: Any, prompt: str) -> tuple[str, dict[str, str]]:
    """The row's template and the fillers that reproduce ``prompt``; the prompt itself (braces
    escaped) with no slots when the template does not reproduce it exactly.

    Each filler runs up to the next occurrence of the literal text that follows its
    placeholder (one left-to-right scan, so time is linear in the prompt per placeholder); a
    repeated placeholder must repeat its first filler.
    """
    if isinstance(template, str) and len(template) <= _MAX_TEMPLATE:
        parts = _PLACEHOLDER.split(template)  # literal, name, literal, name, ..., literal
        literals, names = parts[0::2], parts[1::2]
        if not any("{" in text or "}" in text for text in literals) and prompt.startswith(literals[0]):
            slots: dict[str, str] = {}
            pos = len(literals[0])
            for name, literal in zip(names, literals[1:], strict=True):
                end = prompt.find(literal, pos + 1) if literal else len(prompt)
                if end < 0:
                    break
                value = prompt[pos:end]
                if slots.setdefault(name, value) != value:
                    break
                pos = end + len(literal)
            else:
                if pos == len(prompt) and template.format(**slots) == prompt:
                    return template, slots
    return _escaped(prompt), {}


def _prompt(text: str, answer: str | None, variables: dict[str, Any], template: Any = None) -> dict[str, Any]:
    template_text, slots = _template_slots(template, text)
    return {
        "prompt": text,
        "answer": answer,
        "variables": variables,
        "slots": slots,
        "template": template_text,
    }


def _ioi_names(prompt: Mapping[str, Any], where: str) -> tuple[str, list[str], int] | None:
    """(indirect object, the two names in order of first mention, position of the indirect
    object among them), or None when the metadata does not name an indirect object and a
    subject mentioned twice in the prompt."""
    meta = prompt.get("metadata")
    if not isinstance(meta, Mapping):
        raise _RowError(f"{where}metadata", "'metadata' must be an object")
    io, subject, text = meta.get("indirect_object"), meta.get("subject"), prompt.get("prompt")
    if not (isinstance(io, str) and isinstance(subject, str) and isinstance(text, str)):
        return None
    if not io or not subject or io == subject:
        return None
    first = {}
    for name, times in ((io, 1), (subject, 2)):
        # The subject is named twice (S1, S2), the indirect object once: an ``abc`` prompt,
        # whose third name is neither, has no output position.
        mentions = [m.start() for m in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", text)]
        if len(mentions) < times:
            return None
        first[name] = mentions[0]
    order = sorted((io, subject), key=lambda n: first[n])
    return io, order, order.index(io)


def _ioi(row: Mapping[str, Any], cf_types: list[str]) -> dict[str, Any]:
    text = _text(row, "prompt")
    names = _ioi_names(row, "")
    if names is None:
        raise _RowError(
            "metadata", "the metadata's subject and indirect_object are not two names of the prompt"
        )
    io, order, position = names
    base = _prompt(
        text, f" {io}", {"output_token": f" {io}", "output_position": position}, row.get("template")
    )
    counterfactuals: dict[str, Any] = {}
    interventions: dict[str, dict[str, str]] = {}
    for cf_type in cf_types:
        cf = row[cf_type + _SUFFIX]
        cf_text = _text(cf, "prompt") if isinstance(cf.get("prompt"), str) else ""
        if not cf_text:
            raise _RowError(cf_type + _SUFFIX, "the counterfactual has no prompt")
        cf_names = _ioi_names(cf, f"{cf_type}{_SUFFIX}/")
        expected: dict[str, str] = {}
        if cf_names is None:
            variables: dict[str, Any] = {"output_token": None, "output_position": None}
            answer = None
        else:
            variables = {"output_token": f" {cf_names[0]}", "output_position": cf_names[2]}
            answer = f" {cf_names[0]}"
            expected = {"output_token": answer, "output_position": f" {order[cf_names[2]]}"}
        counterfactuals[cf_type] = _prompt(cf_text, answer, variables, cf.get("template"))
        interventions[cf_type] = expected
    return {"base": base, "counterfactuals": counterfactuals, "interventions": interventions}


def _choice(prompt: Mapping[str, Any], where: str) -> tuple[list[str], list[str], int]:
    choices = prompt.get("choices")
    if not isinstance(choices, Mapping):
        raise _RowError(f"{where}choices", "'choices' must be an object with 'label' and 'text'")
    labels, texts = choices.get("label"), choices.get("text")
    if not isinstance(labels, list) or not isinstance(texts, list) or len(labels) != len(texts) or not labels:
        raise _RowError(f"{where}choices", "'choices' needs lists 'label' and 'text' of one length")
    key = prompt.get("answerKey")
    labels = [str(label) for label in labels]
    if isinstance(key, str) and key in labels:  # some releases write the label, not its index
        key = labels.index(key)
    if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key < len(labels):
        raise _RowError(f"{where}answerKey", f"'answerKey' must index the {len(labels)} choices, got {key!r}")
    return labels, [str(t) for t in texts], key


def _multiple_choice(row: Mapping[str, Any], cf_types: list[str]) -> dict[str, Any]:
    text = _text(row, "prompt")
    labels, texts, key = _choice(row, "")
    answer = f" {labels[key]}"
    base = _prompt(text, answer, {"answer_pointer": key, "answer": answer}, row.get("template"))
    counterfactuals: dict[str, Any] = {}
    interventions: dict[str, dict[str, str]] = {}
    for cf_type in cf_types:
        cf = row[cf_type + _SUFFIX]
        where = f"{cf_type}{_SUFFIX}/"
        cf_labels, _, cf_key = _choice(cf, where)
        cf_answer = f" {cf_labels[cf_key]}"
        counterfactuals[cf_type] = _prompt(
            _text(cf, "prompt"),
            cf_answer,
            {"answer_pointer": cf_key, "answer": cf_answer},
            cf.get("template"),
        )
        expected = {"answer": cf_answer}
        if cf_key < len(labels):
            expected["answer_pointer"] = f" {labels[cf_key]}"
        interventions[cf_type] = expected
    return {
        "base": base,
        "counterfactuals": counterfactuals,
        "interventions": interventions,
        "choices": [{"label": label, "text": t} for label, t in zip(labels, texts, strict=True)],
        "answer_key": labels[key],
    }


def _operands(prompt: Mapping[str, Any], where: str) -> tuple[int, int, int] | None:
    """(x, y, label) of an addition prompt: the last two numbers of the prompt, as the public
    loader reads them, and the released sum; None for another operator."""
    text = prompt.get("prompt")
    if not isinstance(text, str):
        raise _RowError(f"{where}prompt", "'prompt' must be a string")
    if prompt.get("operator", "+") != "+":
        return None
    numbers = re.findall(r"[0-9]+", text[-4096:])
    label = prompt.get("label")
    if isinstance(label, str):
        label = parse_int(label.strip())
    if len(numbers) < 2 or isinstance(label, bool) or not isinstance(label, int) or abs(label) >= 10**18:
        raise _RowError(
            f"{where}label",
            "an addition row needs two numbers in its prompt and an integer 'label' "
            "(at most 18 ASCII digits)",
        )
    return int(numbers[-2][-6:]), int(numbers[-1][-6:]), label


def _arithmetic(row: Mapping[str, Any], cf_types: list[str]) -> dict[str, Any]:
    text = _text(row, "prompt")
    base_ops = _operands(row, "")
    if base_ops is None:
        raise _RowError("operator", "only addition rows have the ones_carry causal model")
    x, y, total = base_ops

    def variables(a: int, b: int, s: int) -> dict[str, Any]:
        return {"operand_1": a, "operand_2": b, "ones_carry": int(a % 10 + b % 10 >= 10), "result": s}

    base_vars = variables(x, y, total)
    base = _prompt(text, f" {total}", base_vars, row.get("template"))
    counterfactuals: dict[str, Any] = {}
    interventions: dict[str, dict[str, str]] = {}
    for cf_type in cf_types:
        cf = row[cf_type + _SUFFIX]
        ops = _operands(cf, f"{cf_type}{_SUFFIX}/")
        if ops is None:
            counterfactuals[cf_type] = _prompt(_text(cf, "prompt"), None, {}, cf.get("template"))
            interventions[cf_type] = {}
            continue
        cf_vars = variables(*ops)
        counterfactuals[cf_type] = _prompt(_text(cf, "prompt"), f" {ops[2]}", cf_vars, cf.get("template"))
        shifted = total + 10 * (cf_vars["ones_carry"] - base_vars["ones_carry"])
        interventions[cf_type] = {"ones_carry": f" {shifted}"}
    return {"base": base, "counterfactuals": counterfactuals, "interventions": interventions}


def _difference_prompt(prompt: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A subtraction prompt object: its answer is the released ``label`` after a space (no
    causal variables: the track localises none for subtraction)."""
    label = prompt.get("label")
    if isinstance(label, str):
        label = parse_int(label.strip())
    if isinstance(label, bool) or not isinstance(label, int) or abs(label) >= 10**18:
        raise _RowError(
            f"{where}label", "a subtraction row needs an integer 'label' (at most 18 ASCII digits)"
        )
    return _prompt(_text(prompt, "prompt"), f" {label}", {}, prompt.get("template"))


def _subtraction(row: Mapping[str, Any], cf_types: list[str]) -> dict[str, Any]:
    if row.get("operator", "-") != "-":
        raise _RowError("operator", "a subtraction dataset holds rows of operator '-' only")
    base = _difference_prompt(row, "")
    counterfactuals = {t: _difference_prompt(row[t + _SUFFIX], f"{t}{_SUFFIX}/") for t in cf_types}
    return {"base": base, "counterfactuals": counterfactuals, "interventions": {t: {} for t in cf_types}}


_RAVEL_ATTRIBUTES = ("Country", "Continent", "Language")


def _ravel_prompt(
    prompt: Mapping[str, Any], where: str, table: Mapping[str, Mapping[str, str]] | None
) -> tuple[dict[str, Any], str | None, Any, Mapping[str, str] | None]:
    """The prompt object, its answer, its queried attribute and its entity's attribute values
    (from the attribute table; None without one or for an entity it does not list)."""
    text = prompt.get("prompt")
    if not isinstance(text, str) or not text:
        raise _RowError(f"{where}prompt", "'prompt' must be a non-empty string")
    attribute, entity = prompt.get("attribute"), prompt.get("entity")
    values = table.get(entity) if table is not None and isinstance(entity, str) else None
    if values is not None:
        found = values.get(attribute) if attribute in _RAVEL_ATTRIBUTES else None
        answer = f" {found}" if found else None
        variables: dict[str, Any] = {
            a: (f" {values[a]}" if values.get(a) else None) for a in _RAVEL_ATTRIBUTES
        }
    else:
        label = prompt.get("label", prompt.get("answer"))
        answer = (
            None if not isinstance(label, str) or not label else label if label[0].isspace() else f" {label}"
        )
        variables = {a: (answer if a == attribute else None) for a in _RAVEL_ATTRIBUTES}
    variables["queried_attribute"] = attribute if isinstance(attribute, str) else None
    return _prompt(text, answer, variables, prompt.get("template")), answer, attribute, values


def _ravel(
    row: Mapping[str, Any], cf_types: list[str], table: Mapping[str, Mapping[str, str]] | None = None
) -> dict[str, Any]:
    base, answer, attribute, _ = _ravel_prompt(row, "", table)
    if answer is None:
        raise _UnansweredRowError(
            "the base prompt has no answer (no label, or its entity and attribute are not in the table)"
        )
    counterfactuals: dict[str, Any] = {}
    interventions: dict[str, dict[str, str]] = {}
    for cf_type in cf_types:
        cf = row[cf_type + _SUFFIX]
        counterfactuals[cf_type], cf_answer, cf_attribute, cf_values = _ravel_prompt(
            cf, f"{cf_type}{_SUFFIX}/", table
        )
        # Interchanging another attribute than the queried one leaves the output unchanged;
        # the queried one gives the counterfactual entity's value of it (DS-7).
        expected = {a: answer for a in _RAVEL_ATTRIBUTES if a != attribute}
        if cf_values is not None and attribute in _RAVEL_ATTRIBUTES and cf_values.get(attribute):
            expected[attribute] = f" {cf_values[attribute]}"
        elif attribute in _RAVEL_ATTRIBUTES and cf_attribute == attribute and cf_answer is not None:
            expected[attribute] = cf_answer
        interventions[cf_type] = expected
    return {"base": base, "counterfactuals": counterfactuals, "interventions": interventions}


_CONVERTERS = {
    "ioi": _ioi,
    "mcqa": _multiple_choice,
    "arc_easy": _multiple_choice,
    "arc_challenge": _multiple_choice,
    "arithmetic": _arithmetic,
    "arithmetic_subtraction": _subtraction,
    "ravel": _ravel,
}
