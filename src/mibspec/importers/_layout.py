"""Which MIB track a submission folder is laid out for (SPEC.md I-3, I-6).

``mibspec import mib-submission DIR`` takes both tracks' folders and reads the layout from
what the folder holds, with the criteria the two importers themselves apply:

- circuit track: ``DIR`` holds graph files (``.json``, ``.pt``) itself, or it has a
  sub-folder named ``<task>_<model>`` (two non-empty parts) or holding graph or results
  (``.pkl``) files;
- causal-variable track: ``DIR`` has a sub-folder named ``<TASK>_<MODEL>_<VARIABLE>`` (a MIB
  task folder name, a model, one of the task's variables) or holding unit files
  (``*_featurizer``, ``*_inverse_featurizer``, ``*_indices``, directly or one level deeper),
  or holds unit files itself.

The two folder names cannot both match (a variable folder's name has at least three parts).
A folder with evidence of both layouts, or of neither, is refused (I107) with what each
layout expects. Only names are listed, at most :data:`MAX_ENTRIES` in all, and only of
folders inside ``DIR`` (a link out of it is judged by its name; the import refuses it, I127):
nothing is read or run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from mibspec.core.folders import InputFolder
from mibspec.core.mib_causal import LISTING_FILE, POSITIONS_FILE, UNIT_FILE_SUFFIXES, mib_cell

__all__ = ["MAX_ENTRIES", "SubmissionLayout", "submission_layout"]

#: Entries listed in all when telling the layouts apart; a real submission has far fewer
#: (MIB's circuit track: 9 files per folder; causal-variable track: 3 files per unit, about
#: 3,000 per variable folder with one unit per attention head of a 32 × 32 model).
MAX_ENTRIES = 1_000_000

_GRAPHS = (".json", ".pt")
#: Files the causal-variable export writes at the top of its folder: they are not graphs.
_CV_FILES = (LISTING_FILE, POSITIONS_FILE)


@dataclass
class SubmissionLayout:
    """The tracks whose layout ``source`` matches, and why (one reason per track)."""

    circuit: list[str] = field(default_factory=list)
    causal_variable: list[str] = field(default_factory=list)
    #: More than :data:`MAX_ENTRIES` entries: not told apart (no track).
    too_large: bool = False

    @property
    def track(self) -> str | None:
        """``"circuit"`` or ``"causal_variable"`` when exactly one layout matched."""
        if self.too_large or bool(self.circuit) == bool(self.causal_variable):
            return None
        return "circuit" if self.circuit else "causal_variable"

    def problem(self, source: Path) -> str:
        """What was found and what was expected, for a folder that matched neither or both."""
        expected = (
            "a MIB circuit-track submission holds <task>_<model>/ folders (or is one) with one "
            "importance file or 9 circuit files (.json or .pt); a causal-variable submission holds "
            "<TASK>_<MODEL>_<VARIABLE>/ folders with <unit>_featurizer, <unit>_inverse_featurizer and "
            "<unit>_indices files"
        )
        if self.too_large:
            return (
                f"{source.name} and its folders hold more than {MAX_ENTRIES} entries, far more than a "
                f"MIB submission; {expected}"
            )
        if self.circuit and self.causal_variable:
            return (
                f"{source.name} mixes the two tracks' layouts "
                f"({self.circuit[0]}; {self.causal_variable[0]}): "
                f"import each track's folders from a folder of their own; {expected}"
            )
        return f"{source.name} matches neither track's layout: {expected}"


class _Lister:
    """Folder listings under one budget of entries, so that telling the layouts apart stays
    bounded however many folders a submission nests; ``exhausted`` once a listing was cut.
    A folder outside ``source`` (through a link) is not listed."""

    def __init__(self, source: Path) -> None:
        self.left = MAX_ENTRIES
        self.exhausted = False
        self.source = InputFolder(source)

    def __call__(self, folder: Path) -> list[Path]:
        if self.exhausted or not self.source.inside(folder):
            return []
        try:
            found = sorted(islice(folder.iterdir(), self.left + 1))
        except OSError:
            return []
        if len(found) > self.left:
            self.exhausted = True
            return []
        self.left -= len(found)
        return found


def _unit_file(path: Path) -> bool:
    name = path.name
    return path.is_file() and any(name.endswith(s) and len(name) > len(s) for s in UNIT_FILE_SUFFIXES)


def _graph_file(path: Path) -> bool:
    return path.is_file() and path.suffix in _GRAPHS and path.name not in _CV_FILES


def submission_layout(source: Path) -> SubmissionLayout:
    """The layouts ``source`` (a folder) matches; see the module docstring for the criteria."""
    layout = SubmissionLayout()
    _entries = _Lister(source)
    entries = _entries(source)
    graphs = [p for p in entries if _graph_file(p)]
    if graphs:
        layout.circuit.append(f"{source.name} holds the graph file {graphs[0].name}")
    if any(_unit_file(p) for p in entries):
        layout.causal_variable.append(f"{source.name} holds unit files")
    for sub in (p for p in entries if p.is_dir()):
        inner = _entries(sub)
        parts = sub.name.split("_")
        named_cell = mib_cell(sub.name) is not None
        if (len(parts) == 2 and all(parts)) or (
            # a variable folder may carry other files; its name already says which track it is
            not named_cell and any(p.is_file() and p.suffix in (*_GRAPHS, ".pkl") for p in inner)
        ):
            layout.circuit.append(f"{sub.name}/ is a <task>_<model> folder")
        if named_cell or any(_unit_file(p) for p in inner):
            layout.causal_variable.append(f"{sub.name}/ is a <TASK>_<MODEL>_<VARIABLE> folder")
        elif any(_unit_file(q) for p in inner if p.is_dir() for q in _entries(p)):
            layout.causal_variable.append(f"{sub.name}/ holds unit files one level deeper")
    layout.too_large = _entries.exhausted
    return layout
