"""What every importer accepts besides its source (SPEC.md I-4): the model revision, the
dataset (a counterfactual-dataset document or a pinned hub id) and the split.

A dataset document is copied beside each report it is given to, with the files it
declares, and referenced as ``task.dataset``; a hub id is recorded as ``task.hub_dataset``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from mibspec.core.folders import InputFolder, name_problem
from mibspec.core.profiles import load_profile, model_dtype
from mibspec.documents.common import model_ref

__all__ = [
    "KNOWN_MODELS",
    "SPLITS",
    "DatasetCopy",
    "ImportOptions",
    "OptionError",
    "checked_options",
    "hub_model",
    "mib_model",
]

#: MIB model ids → (architecture, n_layers, n_heads). Edge totals follow from the graph universe.
KNOWN_MODELS: dict[str, tuple[str, int, int]] = {
    "gpt2": ("GPT2LMHeadModel", 12, 12),
    "qwen2.5": ("Qwen2ForCausalLM", 24, 14),
    "gemma2": ("Gemma2ForCausalLM", 26, 8),
    "llama3": ("LlamaForCausalLM", 32, 32),
    "interpbench": ("HookedTransformer", 6, 4),
}
SPLITS = ("train", "validation", "test", "private_test")
_REVISION = re.compile(r"^[0-9a-f]{40}$")
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9_.-]+)?$")
DATASET_ID = "dataset"
DATASET_FILE = "dataset.json"


class OptionError(Exception):
    """A malformed import option (I111): the detail says which and why."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True)
class DatasetCopy:
    """A counterfactual-dataset document to copy beside a report: its bytes and its files'."""

    document: bytes
    files: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class ImportOptions:
    """The options of SPEC.md I-4 (all optional)."""

    model_revision: str | None = None
    dataset: str | None = None
    split: str | None = None

    def check(self) -> DatasetCopy | dict[str, str] | None:
        """Validate the options; return the dataset to record (a copy or a hub reference).

        Raises:
            OptionError: a malformed option.
            mibspec.core.folders.OutsideFolderError: a file of the dataset leads out of its folder.
        """
        if self.model_revision is not None and not _REVISION.match(self.model_revision):
            raise OptionError(
                f"--model-revision {self.model_revision!r} is not a full 40-hex commit (lower-case)"
            )
        if self.split is not None and self.split not in SPLITS:
            raise OptionError(f"--split {self.split!r} is not one of {', '.join(SPLITS)}")
        if self.dataset is None:
            return None
        path = Path(self.dataset)
        if path.is_file():
            copy = _dataset_copy(path)
            held = json.loads(copy.document).get("split")
            if self.split is not None and held != self.split:
                # a report names the split its claims were computed on: the document's (D106)
                raise OptionError(
                    f"--split {self.split} and --dataset {path}, which holds the {held!r} split: the "
                    f"report would claim one split and point at rows of another; pass --split {held} "
                    "or the dataset document of the split you mean"
                )
            return copy
        hub_id, at, revision = self.dataset.rpartition("@")
        if at and _HUB_ID.match(hub_id) and _REVISION.match(revision):
            return {"id": hub_id, "revision": revision}
        raise OptionError(
            f"--dataset {self.dataset!r} is neither a counterfactual-dataset document nor a hub id "
            "pinned to a commit (<id>@<40-hex revision>)"
        )

    def apply(self, report: dict[str, Any], dataset: DatasetCopy | dict[str, str] | None) -> dict[str, Any]:
        """``report`` with the options recorded (a new dict; the dataset's files are written by
        :meth:`files`)."""
        report = {**report, "task": dict(report["task"]), "model": dict(report["model"])}
        if self.model_revision is not None and report["model"].get("source") == "hub":
            report["model"]["revision"] = self.model_revision
        if self.split is not None:
            report["task"]["split"] = self.split
        if isinstance(dataset, DatasetCopy):
            from mibspec.reference_impl.scoring.folder import artifact_entry

            report["task"]["dataset"] = DATASET_ID
            entry = artifact_entry(
                dataset.document,
                DATASET_ID,
                "dataset",
                DATASET_FILE,
                "application/json",
                kind="counterfactual_dataset",
            )
            report["artifacts"] = [*report.get("artifacts", []), entry]
        elif dataset is not None:
            report["task"]["hub_dataset"] = dataset
        given = [
            what
            for what, value in (
                ("the model revision", self.model_revision),
                ("the dataset", dataset),
                ("the split", self.split),
            )
            if value is not None
        ]
        if given and "description" in report:
            report["description"] += f" Given at import: {', '.join(given)}."
        return report

    @staticmethod
    def files(dataset: DatasetCopy | dict[str, str] | None) -> list[tuple[str, bytes]]:
        """The files to write beside a report: the dataset document and its artifacts."""
        if not isinstance(dataset, DatasetCopy):
            return []
        return [(DATASET_FILE, dataset.document), *dataset.files]


def _dataset_copy(path: Path) -> DatasetCopy:
    from mibspec.validator.rules.artifacts import unsafe_reason
    from mibspec.verification import verify

    result = verify(path, recompute=False)
    main = result.documents[0]
    if main.kind != "counterfactual_dataset":
        raise OptionError(
            f"--dataset {path}: a {main.kind or 'unreadable'} document, not a counterfactual dataset"
        )
    if not result.valid:
        codes = sorted({f.code for f in result.findings if f.severity.value == "error"})
        raise OptionError(f"--dataset {path}: the dataset document does not verify ({', '.join(codes)})")
    raw = path.read_bytes()
    document = json.loads(raw)
    files = []
    reader = InputFolder(path.parent)
    for artifact in document.get("artifacts", []):
        name = artifact["path"]
        parts = PurePosixPath(name).parts
        unsafe = unsafe_reason(name) is not None or any(name_problem(part) for part in parts)
        if unsafe or PurePosixPath(name).as_posix() == DATASET_FILE:
            raise OptionError(
                f"--dataset {path}: its artifact path {name!r} cannot be copied beside a report"
            )
        files.append((PurePosixPath(name).as_posix(), reader.check(path.parent / name).read_bytes()))
    return DatasetCopy(raw, tuple(files))


def mib_model(block: Mapping[str, Any], track: str) -> Any:
    """The ``model`` of a report imported under ``mib-2025``: ``block`` with the dtype the
    public code evaluates the model in for ``track`` (the profile's ``model_dtypes``: bfloat16
    for the circuit track's Qwen2, Gemma-2 and Llama models, float16 on the causal-variable
    track), so that recomputation runs as MIB's did and compares with its tolerance."""
    names = {str(block[key]) for key in ("id", "architecture") if block.get(key)}
    dtype = model_dtype(load_profile("mib-2025"), track, names)
    return model_ref({**block, "dtype": dtype} if dtype != "float32" else dict(block))


def hub_model(model: str, revision: str | None) -> dict[str, Any]:
    """The ``model`` block of a MIB model id, pinned when ``revision`` is given.

    Raises:
        OptionError: an unknown MIB model id.
    """
    if model not in KNOWN_MODELS:
        raise OptionError(f"unknown MIB model id {model!r}; known: {', '.join(KNOWN_MODELS)}")
    block: dict[str, Any] = {"source": "hub", "id": model, "architecture": KNOWN_MODELS[model][0]}
    if revision is not None:
        block["revision"] = revision
    return block


def checked_options(options: Any) -> tuple[Any, list[Any]]:
    """``options.check()``'s dataset and no finding, or ``None`` and the finding its refusal is:
    I111 for a malformed option, I127 for a dataset file leading out of its folder."""
    from mibspec.core.folders import OutsideFolderError
    from mibspec.validator import catalogue, make_finding

    try:
        return options.check(), []
    except OptionError as exc:
        code, detail = "I111", exc.detail
    except OutsideFolderError as exc:
        code, detail = "I127", str(exc)
    return None, [make_finding(catalogue(), None, code, "", detail=detail).located(1, 1)]
