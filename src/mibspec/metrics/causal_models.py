"""The built-in causal-model mechanisms, as data-driven functions (no torch, no submitted code).

Normative text: ``spec/v1/datasets.md`` (DS-6, DS-7) and
``spec/v1/metrics/causal_variable.md`` (MV-2, MV-9). A ``causal_model`` document names one
mechanism and its parameters; this module runs it on the prompt objects of a dataset row:

* ``ioi_linear``: ``output_position`` = index in (name_a, name_b) of the name that is not
  name_c; ``output_token`` = ``" " +`` that name; the output is ``output_token``. Its
  logit-difference model (MV-2): target = bias + token_coeff·token signal +
  position_coeff·position signal, a signal being +1 when the interchanged variable keeps
  the base's value and −1 otherwise;
* ``answer_pointer``: ``answer_pointer`` = position of the option equal to the stated
  colour; ``answer`` = ``" " +`` the label at that position;
* ``two_digit_carry``: ``ones_carry`` = 1 when the ones digits sum to 10 or more;
  output ``" " + str(10·(x₁₀ + y₁₀ + ones_carry) + (x₁ + y₁) mod 10)``;
* ``attribute_lookup``: the attribute values of the entity are inputs (the prompt's
  ``variables``); the output is the value of the queried attribute.

An interchange intervention on variable v runs the mechanism on the base prompt with v
fixed to the value it takes on the counterfactual prompt. The mechanisms are written from
the spec text, independently of the dataset generators in ``reference_impl.datasets``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

#: The mechanisms a causal model document names.
Mechanism = Literal["ioi_linear", "answer_pointer", "two_digit_carry", "attribute_lookup"]

__all__ = [
    "INTERVENED",
    "MECHANISMS",
    "TASK_MECHANISMS",
    "causal_model_document",
    "check_causal_model",
    "check_row",
    "interchange_output",
    "ioi_logit_names",
    "ioi_target",
    "run_mechanism",
]

MECHANISMS: tuple[str, ...] = ("ioi_linear", "answer_pointer", "two_digit_carry", "attribute_lookup")

#: Variables each mechanism can intervene on (the ones a dataset row carries interventions for).
INTERVENED: dict[str, tuple[str, ...]] = {
    "ioi_linear": ("output_token", "output_position"),
    "answer_pointer": ("answer_pointer", "answer"),
    "two_digit_carry": ("ones_carry",),
    "attribute_lookup": ("Country", "Continent", "Language"),
}

#: Variables a causal model document must declare, per mechanism.
_REQUIRED_VARIABLES: dict[str, tuple[str, ...]] = {
    "ioi_linear": ("output_token", "output_position"),
    "answer_pointer": ("answer_pointer", "answer"),
    "two_digit_carry": ("ones_carry",),
    "attribute_lookup": (),
}
_IOI_PARAMETERS = ("bias", "token_coeff", "position_coeff")


def _finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_causal_model(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Problems of a causal model document as ``(pointer, detail)`` pairs (empty when usable).

    Each mechanism needs its variables declared; ``ioi_linear`` needs finite ``bias``,
    ``token_coeff`` and ``position_coeff`` parameters; ``two_digit_carry`` supports the
    operator ``+`` only; ``answer_pointer``'s ``n_choices`` is a positive integer;
    ``attribute_lookup`` declares at least one attribute variable besides
    ``queried_attribute``.
    """
    mechanism = doc.get("mechanism")
    names = [v.get("name") for v in doc.get("variables", []) if isinstance(v, Mapping)]
    parameters = doc.get("parameters") or {}
    problems: list[tuple[str, str]] = []
    for required in _REQUIRED_VARIABLES.get(str(mechanism), ()):
        if required not in names:
            problems.append(("/variables", f"mechanism {mechanism} needs the variable {required!r}"))
    if mechanism == "ioi_linear":
        for key in _IOI_PARAMETERS:
            if not _finite_number(parameters.get(key)):
                problems.append(
                    (
                        f"/parameters/{key}" if key in parameters else "/parameters",
                        f"ioi_linear needs a finite number {key!r}; got {parameters.get(key)!r}",
                    )
                )
    elif mechanism == "two_digit_carry":
        if parameters.get("operator", "+") != "+":
            problems.append(
                ("/parameters/operator", f"two_digit_carry supports '+' only; got {parameters['operator']!r}")
            )
    elif mechanism == "answer_pointer":
        n = parameters.get("n_choices", 4)
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            problems.append(("/parameters/n_choices", f"n_choices must be a positive integer; got {n!r}"))
    elif mechanism == "attribute_lookup" and not [name for name in names if name != "queried_attribute"]:
        problems.append(("/variables", "attribute_lookup needs at least one attribute variable"))
    return problems


# --------------------------------------------------------------------------- mechanisms


def _ioi(prompt: Mapping[str, Any], fixed: Mapping[str, Any]) -> dict[str, Any]:
    slots = prompt["slots"]
    names = (str(slots["name_a"]), str(slots["name_b"]))
    matches = [i for i in (0, 1) if names[i] == str(slots["name_c"])]
    position = 1 - matches[0] if len(matches) == 1 else None
    if "output_position" in fixed:
        position = fixed["output_position"]
    token = f" {names[position]}" if position in (0, 1) else None
    if "output_token" in fixed:
        token = fixed["output_token"]
    return {"output_position": position, "output_token": token, "output": token}


def _answer_pointer(prompt: Mapping[str, Any], fixed: Mapping[str, Any], n: int) -> dict[str, Any]:
    slots = prompt["slots"]
    options = [str(slots[f"option_{i}"]) for i in range(n)]
    labels = [str(slots[f"label_{i}"]) for i in range(n)]
    hits = [i for i in range(n) if options[i] == str(slots["color"])]
    pointer = hits[0] if len(hits) == 1 else None
    if "answer_pointer" in fixed:
        pointer = fixed["answer_pointer"]
    answer = f" {labels[pointer]}" if isinstance(pointer, int) and 0 <= pointer < n else None
    if "answer" in fixed:
        answer = fixed["answer"]
    return {"answer_pointer": pointer, "answer": answer, "output": answer}


def _carry(prompt: Mapping[str, Any], fixed: Mapping[str, Any]) -> dict[str, Any]:
    slots = prompt["slots"]
    x, y = int(slots["operand_1"]), int(slots["operand_2"])
    carry = 1 if (x % 10) + (y % 10) >= 10 else 0
    if "ones_carry" in fixed:
        carry = fixed["ones_carry"]
    result = None if carry is None else 10 * (x // 10 + y // 10 + carry) + (x % 10 + y % 10) % 10
    return {
        "operand_1": x,
        "operand_2": y,
        "ones_carry": carry,
        "result": result,
        "output": None if result is None else f" {result}",
    }


def _lookup(prompt: Mapping[str, Any], fixed: Mapping[str, Any], attributes: Sequence[str]) -> dict[str, Any]:
    declared = prompt.get("variables") or {}
    values = {name: declared.get(name) for name in attributes}
    values.update({k: v for k, v in fixed.items() if k in values})
    queried = str((prompt.get("slots") or {}).get("attribute", "")) or None
    return {**values, "queried_attribute": queried, "output": values.get(queried) if queried else None}


def run_mechanism(
    model: Mapping[str, Any], prompt: Mapping[str, Any], fixed: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The causal model's variables and ``output`` on one prompt, with ``fixed`` variables set.

    Args:
        model: a causal model document (``mechanism``, ``variables``, ``parameters``).
        prompt: a prompt object of a dataset row (``slots``, ``variables``, ...).
        fixed: variables set by an intervention instead of being computed.

    Raises:
        ValueError: the prompt lacks the slots the mechanism reads (naming them).
    """
    mechanism = model.get("mechanism")
    fixed = fixed or {}
    try:
        if mechanism == "ioi_linear":
            return _ioi(prompt, fixed)
        if mechanism == "answer_pointer":
            return _answer_pointer(prompt, fixed, int((model.get("parameters") or {}).get("n_choices", 4)))
        if mechanism == "two_digit_carry":
            return _carry(prompt, fixed)
        if mechanism == "attribute_lookup":
            names = [v["name"] for v in model.get("variables", []) if v.get("name") != "queried_attribute"]
            return _lookup(prompt, fixed, names)
    except KeyError as exc:
        raise ValueError(
            f"prompt: mechanism {mechanism} needs slot {exc.args[0]!r}, which is missing"
        ) from exc
    except (TypeError, ValueError) as exc:
        raise ValueError(f"prompt: mechanism {mechanism} cannot read the slots: {exc}") from exc
    raise ValueError(f"model: expected a mechanism among {list(MECHANISMS)}, got {mechanism!r}")


def interchange_output(
    model: Mapping[str, Any], base: Mapping[str, Any], source: Mapping[str, Any], variable: str
) -> Any:
    """H_{v ← get(H(source), v)}(base): the output with ``variable`` taken from the source run."""
    value = run_mechanism(model, source)[variable]
    return run_mechanism(model, base, {variable: value})["output"]


def ioi_logit_names(base: Mapping[str, Any]) -> tuple[str, str]:
    """``(IO, S)`` answer texts of an IOI base prompt: the indirect object and the subject.

    The logit difference of MV-2 is logit(first token of IO) − logit(first token of S), both
    read on the base prompt's names whatever the intervention.
    """
    slots = base["slots"]
    names = (str(slots["name_a"]), str(slots["name_b"]))
    position = _ioi(base, {})["output_position"]
    if position is None:
        raise ValueError("base: the IOI base prompt has no defined indirect object")
    return f" {names[position]}", f" {names[1 - position]}"


def ioi_target(
    parameters: Mapping[str, Any], base: Mapping[str, Any], source: Mapping[str, Any], variable: str
) -> float | None:
    """MV-2 target logit difference after interchanging ``variable`` from ``source`` into ``base``.

    The interchanged variable's signal is +1 when the source's value equals the base's and −1
    otherwise; the other signal is +1. ``None`` when the source leaves the variable undefined.
    """
    if variable not in ("output_token", "output_position"):
        raise ValueError(f"variable: expected output_token or output_position, got {variable!r}")
    base_value = _ioi(base, {})[variable]
    source_value = _ioi(source, {})[variable]
    if source_value is None:
        return None
    signal = 1.0 if source_value == base_value else -1.0
    token, position = (signal, 1.0) if variable == "output_token" else (1.0, signal)
    return (
        float(parameters["bias"])
        + float(parameters["token_coeff"]) * token
        + float(parameters["position_coeff"]) * position
    )


# --------------------------------------------------------------------------- dataset rows


def check_row(
    model: Mapping[str, Any], row: Mapping[str, Any], variables: Sequence[str], cf_types: Sequence[str]
) -> list[tuple[str, str]]:
    """Where a dataset row disagrees with the causal model: ``(pointer inside the row, detail)``.

    Checks (datasets.md DS-3, DS-6): every prompt's declared ``variables`` and ``answer``
    equal the mechanism's on its slots (for ``attribute_lookup`` the attribute values are
    inputs and only the queried attribute is derived); for every counterfactual type and
    every dataset variable, ``interventions[t][v]`` is the interchange output, absent
    exactly when that output is undefined.
    """
    problems: list[tuple[str, str]] = []
    prompts = {"/base": row.get("base")}
    prompts.update({f"/counterfactuals/{t}": row.get("counterfactuals", {}).get(t) for t in cf_types})
    derived: dict[str, dict[str, Any]] = {}
    for pointer, prompt in prompts.items():
        if not isinstance(prompt, Mapping):
            problems.append((pointer, "the prompt is missing"))
            continue
        try:
            values = run_mechanism(model, prompt)
        except ValueError as exc:
            problems.append((pointer, str(exc)))
            continue
        derived[pointer] = values
        declared = prompt.get("variables") or {}
        for name, value in declared.items():
            if name in values and values[name] != value:
                problems.append(
                    (
                        f"{pointer}/variables/{name}",
                        f"declared {value!r}, the causal model gives {values[name]!r}",
                    )
                )
        if prompt.get("answer") != values["output"]:
            problems.append(
                (
                    f"{pointer}/answer",
                    f"declared {prompt.get('answer')!r}, the causal model gives {values['output']!r}",
                )
            )
    base = row.get("base")
    interventions = row.get("interventions") or {}
    for t in cf_types:
        source = row.get("counterfactuals", {}).get(t)
        if f"/counterfactuals/{t}" not in derived or "/base" not in derived:
            continue
        declared_t = interventions.get(t)
        if not isinstance(declared_t, Mapping):
            problems.append((f"/interventions/{t}", "the counterfactual type has no interventions"))
            continue
        for variable in variables:
            assert isinstance(base, Mapping)
            assert isinstance(source, Mapping)
            try:
                expected = interchange_output(model, base, source, variable)
            except (KeyError, ValueError) as exc:
                problems.append((f"/interventions/{t}", f"variable {variable!r}: {exc}"))
                continue
            got = declared_t.get(variable)
            if got != expected:
                problems.append(
                    (
                        f"/interventions/{t}/{variable}",
                        f"declared {got!r}, the causal model gives {expected!r}",
                    )
                )
        extra = sorted(set(declared_t) - set(variables))
        if extra:
            problems.append((f"/interventions/{t}", f"variables {extra} are not declared by the dataset"))
    return problems


# --------------------------------------------------------------------------- documents

#: The built-in mechanism of each generated task (datasets.md DS-7).
TASK_MECHANISMS: dict[str, str] = {
    "ioi": "ioi_linear",
    "arithmetic": "two_digit_carry",
    "mcqa": "answer_pointer",
    "ravel": "attribute_lookup",
}

_VARIABLES: dict[str, list[dict[str, Any]]] = {
    "ioi_linear": [
        {"name": "output_token", "description": "the indirect object's name, the expected answer"},
        {"name": "output_position", "values": [0, 1], "description": "position of the indirect object"},
    ],
    "answer_pointer": [
        {"name": "answer_pointer", "values": [0, 1, 2, 3], "description": "position of the correct choice"},
        {"name": "answer", "description": "the label the pointer selects"},
    ],
    "two_digit_carry": [
        {"name": "operand_1", "description": "an integer from 0 to 99"},
        {"name": "operand_2", "description": "an integer from 0 to 99"},
        {"name": "ones_carry", "values": [0, 1], "description": "1 when the ones digits sum to 10 or more"},
        {"name": "result", "description": "operand_1 + operand_2"},
    ],
    "attribute_lookup": [
        {"name": "Country", "description": "the city's country"},
        {"name": "Continent", "description": "the city's continent"},
        {"name": "Language", "description": "the city's language"},
        {"name": "queried_attribute", "description": "the attribute the prompt asks for"},
    ],
}
_OUTPUTS = {
    "ioi_linear": ["output_token"],
    "answer_pointer": ["answer"],
    "two_digit_carry": ["result"],
    "attribute_lookup": ["queried_attribute"],
}
_DESCRIPTIONS = {
    "ioi_linear": "IOI: the answer is the name that is not the subject of the second clause; the logit "
    "difference logit(IO) - logit(S) is predicted as bias + token_coeff * token signal + position_coeff * "
    "position signal (MIB App. G.5.4).",
    "answer_pointer": "Four-choice colour questions: the answer is the label at the position of the option "
    "equal to the stated colour.",
    "two_digit_carry": "Addition of two operands below 100 with an explicit carry from the ones digits.",
    "attribute_lookup": "Attribute retrieval: the output is the value of the queried attribute of the city.",
}


def causal_model_document(task: str, parameters: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The causal model document of a generated task (without provenance).

    Args:
        task: ``ioi``, ``arithmetic``, ``mcqa`` or ``ravel``.
        parameters: the mechanism's parameters (``ioi_linear``: ``bias``, ``token_coeff``,
            ``position_coeff``); defaults: the MIB fit for IOI, ``+`` for addition, four
            choices for MCQA.
    """
    if task not in TASK_MECHANISMS:
        raise ValueError(f"task: expected one of {sorted(TASK_MECHANISMS)}, got {task!r}")
    mechanism = TASK_MECHANISMS[task]
    defaults: dict[str, dict[str, Any]] = {
        "ioi_linear": {"bias": 0.069, "token_coeff": 0.687, "position_coeff": 2.018},
        "two_digit_carry": {"operator": "+"},
        "answer_pointer": {"n_choices": 4},
        "attribute_lookup": {},
    }
    # pydantic only when a document is built: validation reads causal models without it
    from mibspec.documents import dump
    from mibspec.documents.kinds import CausalModel, CausalVariable

    document = CausalModel(
        description=_DESCRIPTIONS[mechanism],
        task=task,
        mechanism=cast(Mechanism, mechanism),
        variables=[CausalVariable.model_validate(v) for v in _VARIABLES[mechanism]],
        outputs=list(_OUTPUTS[mechanism]),
        parameters=dict(parameters) if parameters is not None else defaults[mechanism],
    )
    return dump(document)
