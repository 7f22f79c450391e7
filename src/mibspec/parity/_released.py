"""Released rows for the public loader: where a report's dataset came from, how the public
circuit-track loader names and reads its task, and the rows that compare what it read with
what mibspec read.

The public evaluation reads a task's rows with ``HFEAPDataset`` (its filter, its prompts,
its answer tokens); mibspec reads the document ``mibspec import mib-dataset`` wrote from the
same released file. The import records that file (``source.file``, ``source.sha256``); when
the file lies beside the document with those bytes, the harness hands it to the public
loader, so each side reads the released rows its own way.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = [
    "PUBLIC_ANSWER_TOKEN",
    "hub_column",
    "loader_rows",
    "public_task_name",
    "released_job",
    "released_rows",
    "task_ref_name",
]

#: How the public circuit-track loader reads each task's answer tokens: IOI's answers are
#: written with their leading space (``f" {name}"``), the other tasks' labels without one
#: (``tokenizer(label)``, ``tokenizer(str(label))``).
PUBLIC_ANSWER_TOKEN: dict[str, str] = {
    "ioi": "as_written",
    "mcqa": "without_leading_space",
    "arc_easy": "without_leading_space",
    "arc_challenge": "without_leading_space",
    "arithmetic_addition": "without_leading_space",
    "arithmetic_subtraction": "without_leading_space",
}
#: mibspec's dataset task names → the public loader's (``TASKS_TO_HF_NAMES`` keys).
_PUBLIC_NAMES = {"arithmetic": "arithmetic_addition"}


def public_task_name(task: str) -> str:
    """The public loader's name of a mibspec task (``arithmetic`` → ``arithmetic_addition``)."""
    return _PUBLIC_NAMES.get(task, task)


def task_ref_name(report: dict[str, Any]) -> str:
    return str((report.get("task") or {}).get("name", ""))


def hub_column(task: str, counterfactual_type: str) -> str | None:
    """The released column the public loader reads the counterfactual from: arithmetic always
    ``random_counterfactual`` (it takes no type), the others ``<type>_counterfactual``."""
    return None if task.startswith("arithmetic") else f"{counterfactual_type}_counterfactual"


def released_rows(dataset: dict[str, Any], folder: Path) -> list[dict[str, Any]] | None:
    """The rows of the released file a dataset document was imported from, when that file
    lies in ``folder`` with the SHA-256 the document records; ``None`` otherwise. JSON Lines
    only (a parquet release is read by the import, not here)."""
    source = dataset.get("source") or {}
    name, digest = source.get("file"), source.get("sha256")
    if not isinstance(name, str) or not isinstance(digest, str) or Path(name).name != name:
        return None
    path = Path(folder) / name
    if not path.is_file() or path.suffix == ".parquet":
        return None
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != digest:
        return None
    return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]


def released_job(inputs: Any) -> dict[str, Any]:
    """The peer job's fields that make the public loader read the released rows."""
    if inputs.hub_rows is None:
        return {}
    return {"task": inputs.task, "hub_rows": inputs.hub_rows, "hub_counterfactual": inputs.hub_counterfactual}


def loader_rows(rows: Any, inputs: Any, loader: dict[str, Any], ours: dict[str, Any]) -> None:
    """What the public loader read against what mibspec read: the number of rows kept (always
    promised: both must patch the same pairs) and the answer token ids that differ (promised
    when mibspec reads the answers as the public loader does)."""
    public_n, mine_n = int(loader["n_rows"]), len(inputs.rows)
    rows.add("rows the loader keeps", public_n, mine_n, rows.model_difference is None)
    public, mine = loader["answers"], ours.get("answers", [])
    differ = len(mine) if len(public) != len(mine) else sum(a != b for a, b in zip(public, mine, strict=True))
    note = "" if rows.answers_match else "named difference: answer tokens (answer_token)"
    rows.add("answer ids unlike the public loader's", 0, differ, rows.answers_match, note)
