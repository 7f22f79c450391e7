"""The names of MIB's causal-variable track that its importers and its exporter share.

MIB's task folders and their variables, the model-unit ids of its result files and
submission folders (``ResidualStream(Layer:3,Token:last_token)``), the featurizer classes a
submission saves, and the files of a submission folder, both those MIB defines (three per
unit) and those mibspec's export adds beside them. Standard library only.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = [
    "FEATURIZER_CLASSES",
    "LISTING_FILE",
    "MIB_POSITION_RULES",
    "MIB_TASKS",
    "POSITIONS_FILE",
    "TASK_FOLDERS",
    "UNIT_COMPONENTS",
    "UNIT_FILE_SUFFIXES",
    "UNIT_RECORD",
    "mib_cell",
    "parse_unit_id",
    "result_key",
    "result_key_units",
]

#: MIB's task folder names → (mibspec task, variables of the task).
MIB_TASKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ioi_task": ("ioi", ("output_token", "output_position")),
    "4_answer_MCQA": ("mcqa", ("answer_pointer", "answer")),
    "ARC_easy": ("arc_easy", ("answer_pointer", "answer")),
    "arithmetic": ("arithmetic", ("ones_carry",)),
    "ravel_task": ("ravel", ("Country", "Continent", "Language")),
}

#: mibspec task → MIB's task folder name.
TASK_FOLDERS = {task: folder for folder, (task, _) in MIB_TASKS.items()}

#: Token-position names of MIB's task code read as declared rules when nothing maps them:
#: ``all`` is the IOI task's position, every token of the prompt (its attention-head units,
#: ``AttentionHead(Layer:l,Head:h,Token:all)``). A declared mapping of the name wins.
MIB_POSITION_RULES: dict[str, dict[str, str]] = {"all": {"rule": "all"}}

#: The kind of a MIB model unit → the location component it reads.
UNIT_COMPONENTS = {"ResidualStream": "residual_post", "AttentionHead": "attention_heads", "MLP": "mlp_output"}

#: MIB featurizer classes a submission can hold as data → (featurizer type, inverse class).
FEATURIZER_CLASSES: dict[str, tuple[Literal["subspace", "identity"], str]] = {
    "SubspaceFeaturizerModule": ("subspace", "SubspaceInverseFeaturizerModule"),
    "IdentityFeaturizerModule": ("identity", "IdentityInverseFeaturizerModule"),
}

#: The three files of a unit in a submission folder, each named ``<unit id><suffix>``
#: (the inverse first: ``_featurizer`` is a suffix of ``_inverse_featurizer``).
UNIT_FILE_SUFFIXES = ("_inverse_featurizer", "_featurizer", "_indices")

#: What mibspec's export lists it wrote, at the top of the submission folder.
LISTING_FILE = "mibspec_submission.json"

#: The declared token-position rules, at the top of the submission folder (written by the
#: export, read by the import).
POSITIONS_FILE = "token_positions.json"

#: The extension in which a featurizer document imported from a submission records its
#: folder and unit id.
UNIT_RECORD = "org.mibspec:mib_unit"

_UNIT = re.compile(r"^(?P<kind>[A-Za-z_]+)\((?P<params>[^()]*)\)$")
# A parameter is a name, then ``-`` or ``:`` (both forms are written by the public code), then
# the value; the first separator after the name splits, so a value may itself hold either.
_PARAM = re.compile(r"^(?P<name>[A-Za-z_]+)[-:](?P<value>.*)$")


def mib_cell(name: str) -> tuple[str, str, str] | None:
    """(MIB task folder, model, variable) of a ``<TASK>_<MODEL>_<VARIABLE>`` folder name;
    None when ``name`` is not one.

    Example:
        >>> mib_cell("ioi_task_GPT2LMHeadModel_output_token")
        ('ioi_task', 'GPT2LMHeadModel', 'output_token')
    """
    for folder, (_, variables) in MIB_TASKS.items():
        if not name.startswith(folder + "_"):
            continue
        rest = name[len(folder) + 1 :]
        for variable in sorted(variables, key=len, reverse=True):
            if rest.endswith("_" + variable) and len(rest) > len(variable) + 1:
                return folder, rest[: -len(variable) - 1], variable
    return None


def parse_unit_id(unit_id: str) -> tuple[str, dict[str, str]] | None:
    """The kind and parameters of a model-unit id in either form the public code writes,
    ``ResidualStream(Layer-3,Token-last_token)`` or ``ResidualStream(Layer:3,Token:last_token)``;
    None when ``unit_id`` has neither form.

    Example:
        >>> parse_unit_id("AttentionHead(Layer:2,Head:5,Token:all)")
        ('AttentionHead', {'Layer': '2', 'Head': '5', 'Token': 'all'})
    """
    match = _UNIT.match(unit_id)
    if match is None:
        return None
    params: dict[str, str] = {}
    for part in match["params"].split(","):
        found = _PARAM.match(part.strip())
        if found is not None:
            params[found["name"]] = found["value"]
    return match["kind"], params


_ATOMIC = re.compile(r"AtomicModelUnit\(id='([^']*)'\)")


def result_key_units(key: str) -> list[str]:
    """The model-unit ids a result file's key lists, in its order (the key itself when it is
    a bare unit id).

    Example:
        >>> result_key_units("[[AtomicModelUnit(id='MLP(Layer:1)'), AtomicModelUnit(id='MLP(Layer:2)')]]")
        ['MLP(Layer:1)', 'MLP(Layer:2)']
    """
    return _ATOMIC.findall(key) or [key]


def result_key(unit_ids: list[str]) -> str:
    """The key a result file scores the model units ``unit_ids`` under, together as one unit,
    as the public code writes it (the text of the list of their lists).

    Example:
        >>> result_key(["MLP(Layer:1,Token:all)"])
        "[[AtomicModelUnit(id='MLP(Layer:1,Token:all)')]]"
    """
    return "[[" + ", ".join(f"AtomicModelUnit(id='{unit}')" for unit in unit_ids) + "]]"
