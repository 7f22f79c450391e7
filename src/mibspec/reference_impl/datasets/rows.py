"""The row format of a counterfactual dataset (``spec/v1/datasets.md`` DS-2, DS-3), checked as
data: what each row must hold before any causal model, tokenizer or model reads it.

:func:`row_problems` is what the rules stage checks (V112) on every row of a dataset
document; the generators write rows of this shape (``_common.build_row``,
``_common.prompt_object``) and the importers convert released rows into it.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

from mibspec.core.pointers import escape_pointer_token

__all__ = ["fill_template", "row_problems"]

_ROW_KEYS = frozenset({"id", "base", "counterfactuals", "interventions"})
_CHOICE_KEYS = frozenset({"choices", "answer_key"})
_PROMPT_KEYS = frozenset({"prompt", "answer", "variables", "slots", "template"})


def fill_template(template: str, slots: Mapping[str, str]) -> str:
    """``template.format(**slots)`` for the templates DS-3 allows: ``{name}`` placeholders
    (names that are identifiers) and the ``{{``/``}}`` escapes, nothing else.

    Python's ``str.format`` would also take attribute and index lookups (``{a.__class__}``)
    and format specifications (``{a:>1000000000}``, a gigabyte of padding): neither is a
    slot, and neither is evaluated here.

    Raises:
        ValueError: a malformed template, a placeholder that is not a plain name, or a name
            without a slot.
    """
    out: list[str] = []
    for literal, field, spec, conversion in string.Formatter().parse(template):
        out.append(literal)
        if field is None:
            continue
        if spec or conversion or not field.isidentifier():
            raise ValueError(
                f"placeholder {{{field}{'!' + conversion if conversion else ''}…}} is not a slot name"
            )
        if field not in slots:
            raise ValueError(f"placeholder {{{field}}} has no slot")
        out.append(slots[field])
    return "".join(out)


def _difference(expected: set[str] | frozenset[str], keys: set[str]) -> str:
    """ "lacks a, b; has c": how ``keys`` differ from ``expected``."""
    missing, extra = sorted(expected - keys), sorted(keys - expected)
    parts = [f"lacks {', '.join(missing)}" if missing else "", f"has {', '.join(extra)}" if extra else ""]
    return "; ".join(part for part in parts if part)


def _prompt_problems(prompt: Any, where: str, *, base: bool) -> list[tuple[str, str]]:
    if not isinstance(prompt, Mapping):
        return [(where, "a prompt object is missing (DS-3)")]
    keys = set(prompt)
    if keys != _PROMPT_KEYS:
        said = _difference(_PROMPT_KEYS, keys)
        return [
            (where, f"a prompt object holds exactly prompt, answer, variables, slots, template: it {said}")
        ]
    problems: list[tuple[str, str]] = []
    if not isinstance(prompt["prompt"], str):
        problems.append((f"{where}/prompt", "the prompt is not a string"))
    answer = prompt["answer"]
    if not (isinstance(answer, str) or (answer is None and not base)):
        problems.append(
            (f"{where}/answer", "the base answer is a string" if base else "the answer is a string or null")
        )
    if not isinstance(prompt["variables"], Mapping):
        problems.append((f"{where}/variables", "the variables are not an object"))
    slots = prompt["slots"]
    if not isinstance(slots, Mapping) or not all(isinstance(value, str) for value in slots.values()):
        problems.append((f"{where}/slots", "the slots are not an object of strings"))
        return problems
    if not isinstance(prompt["template"], str):
        problems.append((f"{where}/template", "the template is not a string"))
    elif isinstance(prompt["prompt"], str):
        try:
            filled = fill_template(prompt["template"], slots)
        except ValueError as exc:
            problems.append((f"{where}/template", f"the template cannot be filled from the slots: {exc}"))
        else:
            if filled != prompt["prompt"]:
                problems.append((f"{where}/template", "the template filled with the slots is not the prompt"))
    return problems


def _typed_object(value: Any, types: Sequence[str], where: str, what: str) -> list[tuple[str, str]]:
    if not isinstance(value, Mapping):
        return [(where, f"{what} is not an object")]
    keys, declared = set(value), set(types)
    if keys != declared:
        said = _difference(declared, keys)
        return [(where, f"{what} maps exactly the declared counterfactual types: it {said}")]
    return []


def _choice_problems(row: Mapping[str, Any]) -> list[tuple[str, str]]:
    choices, key = row["choices"], row["answer_key"]
    if not isinstance(choices, list) or not all(
        isinstance(c, Mapping) and set(c) == {"label", "text"} and all(isinstance(v, str) for v in c.values())
        for c in choices
    ):
        return [("/choices", 'the choices are not a list of {"label": string, "text": string}')]
    labels = [c["label"] for c in choices]
    if len(set(labels)) != len(labels):
        return [("/choices", "a label is used twice")]
    if not isinstance(key, str) or key not in labels:
        return [("/answer_key", "the answer key is not one of the labels")]
    base = row["base"]
    if isinstance(base, Mapping) and base.get("answer") != " " + key:
        return [("/base/answer", f"the base answer is not ' ' + the answer key {key!r}")]
    return []


def row_problems(row: Any, counterfactual_types: Sequence[str]) -> list[tuple[str, str]]:
    """Where ``row`` departs from DS-2 and DS-3: ``(pointer inside the row, detail)``.

    A row has exactly ``id`` (a string), ``base`` (a prompt object), ``counterfactuals`` (a
    prompt object per declared type, no other), ``interventions`` (an object per declared
    type, no other) and, together or not at all, ``choices`` and ``answer_key`` (the base
    answer is ``" " + answer_key``). A prompt object has exactly ``prompt``, ``answer``
    (``null`` only outside the base), ``variables``, ``slots`` (strings) and ``template``,
    which filled with the slots is the prompt. Unique ids are the caller's to check.
    """
    if not isinstance(row, Mapping):
        return [("", "the row is not an object")]
    keys = set(row)
    allowed = _ROW_KEYS | (_CHOICE_KEYS if keys & _CHOICE_KEYS else frozenset())
    if keys != allowed:
        said = _difference(allowed, keys)
        return [
            (
                "",
                "a row holds exactly id, base, counterfactuals, interventions (and choices with "
                f"answer_key): it {said}",
            )
        ]
    problems: list[tuple[str, str]] = []
    if not isinstance(row["id"], str) or not row["id"]:
        problems.append(("/id", "the id is not a non-empty string"))
    problems += _prompt_problems(row["base"], "/base", base=True)
    found = _typed_object(row["counterfactuals"], counterfactual_types, "/counterfactuals", "counterfactuals")
    problems += found
    if not found:
        for name in counterfactual_types:
            problems += _prompt_problems(
                row["counterfactuals"][name], f"/counterfactuals/{escape_pointer_token(name)}", base=False
            )
    found = _typed_object(row["interventions"], counterfactual_types, "/interventions", "interventions")
    problems += found
    if not found:
        for name in counterfactual_types:
            if not isinstance(row["interventions"][name], Mapping):
                problems.append(
                    (f"/interventions/{escape_pointer_token(name)}", "the expected outputs are not an object")
                )
    if "choices" in row:
        problems += _choice_problems(row)
    return problems
