"""Token positions declared as data, resolved per prompt from its tokens (no torch).

Normative text: ``spec/v1/metrics/causal_variable.md`` (MV-8). A featurizer's location names
its token position as a rule (``TokenPosition`` in ``mibspec.documents.kinds``):

* ``last``: the prompt's last token;
* ``index``: a fixed 0-based index, negative counting from the end;
* ``first_occurrence`` / ``last_occurrence``: the first or last place where the token
  sequence of ``token`` (encoded without special tokens) occurs in the prompt;
* ``slot``: a template slot. With ``match = "placeholder"`` the ``occurrence``-th
  ``{slot}`` placeholder of the prompt's template (0-based, −1 the last); with
  ``match = "value"`` the ``occurrence``-th mention of the slot's value in the prompt, as a
  whole word. ``{variable}`` inside the slot name is replaced by the prompt's value of that
  causal variable (``label_{answer_pointer}`` is the label of the correct choice);
* ``all``: every token of the prompt (MIB's IOI ``Token:all``); :func:`resolve_positions`
  resolves it, and the base's token i receives the counterfactual's token i, so both prompts
  must have the same number of tokens;
* ``named``: a position known only by the name the producing code gave it (imported
  results); it never resolves.

A match covering several tokens resolves to its first or last token (``subtoken``). A
slot's characters are mapped to tokens through the tokenizer's character offsets: the
tokens whose span overlaps the slot's. Anything that cannot be resolved raises
:class:`PositionError` (a recomputation reports it as R104).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["PositionError", "position_problems", "resolve_position", "resolve_positions", "slot_spans"]


class PositionError(ValueError):
    """A declared token position cannot be resolved on a prompt."""


#: The parameter each rule needs (``last`` and ``all`` need none).
_NEEDS = {
    "index": "index",
    "first_occurrence": "token",
    "last_occurrence": "token",
    "slot": "slot",
    "named": "name",
}


def position_problems(position: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What is incomplete or out of place in a declared position, as (pointer below the
    position, detail): a parameter its rule needs and lacks, or one of another rule (an
    ``all`` that also names an ``index``). Empty when the position is completely declared.

    >>> position_problems({"rule": "all", "index": 3})
    [('/index', "'index' does not apply to rule 'all' (it belongs to rule 'index')")]
    >>> position_problems({"rule": "last", "token": " Mary"})[0][1]
    "'token' does not apply to rule 'last' (it belongs to rules 'first_occurrence', 'last_occurrence')"
    """
    rule_name = position.get("rule")
    problems = []
    wanted = _NEEDS.get(str(rule_name))
    if wanted is not None and position.get(wanted) in (None, ""):
        problems.append(("", f"rule {rule_name!r} needs {wanted!r}"))
    for key in ("index", "token", "slot", "occurrence", "name"):
        if key != wanted and position.get(key) is not None and not (key == "occurrence" and wanted == "slot"):
            owners = [
                rule for rule, needs in _NEEDS.items() if needs == ("slot" if key == "occurrence" else key)
            ]
            named = f"rule {owners[0]!r}" if len(owners) == 1 else "rules " + ", ".join(map(repr, owners))
            problems.append(
                (f"/{key}", f"{key!r} does not apply to rule {rule_name!r} (it belongs to {named})")
            )
    if rule_name != "slot" and "match" in position:
        problems.append(("/match", f"'match' does not apply to rule {rule_name!r}"))
    return problems


def _pick(items: Sequence[Any], occurrence: int, what: str) -> Any:
    if not items:
        raise PositionError(f"{what} does not occur in the prompt")
    if not -len(items) <= occurrence < len(items):
        raise PositionError(f"{what} occurs {len(items)} time(s); occurrence {occurrence} does not exist")
    return items[occurrence]


def _slot_name(name: str, variables: Mapping[str, Any]) -> str:
    """``name`` with ``{variable}`` fields replaced by the prompt's variable values."""
    fields = [field for _, field, _, _ in string.Formatter().parse(name) if field is not None]
    for field in fields:
        if variables.get(field) is None:
            raise PositionError(
                f"slot {name!r} needs causal variable {field!r}, which the prompt does not define"
            )
    try:
        return name.format_map({field: variables[field] for field in fields})
    except (ValueError, IndexError, KeyError) as exc:
        raise PositionError(f"slot name {name!r} is not a valid template: {exc}") from exc


def slot_spans(prompt: Mapping[str, Any], slot: str) -> list[tuple[int, int]]:
    """Character spans ``[start, end)`` in ``prompt["prompt"]`` of each ``{slot}`` placeholder.

    The template is expanded with the prompt's slots; the expansion must equal the prompt.
    """
    template, slots, text = prompt.get("template"), prompt.get("slots"), prompt.get("prompt")
    if not isinstance(template, str) or not isinstance(slots, Mapping) or not isinstance(text, str):
        raise PositionError("the prompt has no template and slots to resolve a slot position")
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    length = 0
    try:
        for literal, field, spec, conversion in string.Formatter().parse(template):
            out.append(literal)
            length += len(literal)
            if field is None:
                continue
            if field not in slots:
                raise PositionError(f"template placeholder {{{field}}} has no slot value")
            value = str(slots[field])
            if conversion == "r":
                value = repr(slots[field])
            value = format(value, spec or "")
            if field == slot:
                spans.append((length, length + len(value)))
            out.append(value)
            length += len(value)
    except ValueError as exc:
        raise PositionError(f"the template is not a valid format string: {exc}") from exc
    if "".join(out) != text:
        raise PositionError("the template filled with the slots differs from the prompt")
    return spans


def _value_spans(text: str, value: str) -> list[tuple[int, int]]:
    """Whole-word occurrences of ``value`` in ``text`` (not inside a longer word or number)."""
    if not value:
        return []
    pattern = r"(?<![\w])" + re.escape(value) + r"(?![\w])"
    return [(m.start(), m.end()) for m in re.finditer(pattern, text)]


def _tokens_in_span(offsets: Sequence[tuple[int, int]], span: tuple[int, int]) -> list[int]:
    start, end = span
    return [i for i, (a, b) in enumerate(offsets) if b > a and a < end and b > start]


def resolve_position(
    position: Mapping[str, Any],
    prompt: Mapping[str, Any],
    ids: Sequence[int],
    offsets: Sequence[tuple[int, int]],
    encode: Callable[[str], Sequence[int]],
) -> int:
    """The token index a declared position names on one prompt.

    Args:
        position: a ``TokenPosition`` object (``rule`` and its parameters).
        prompt: the prompt object of a dataset row (``prompt``, ``slots``, ``template``,
            ``variables``).
        ids: the prompt's token ids (no special tokens).
        offsets: per token, its ``[start, end)`` character span in the prompt.
        encode: text → token ids without special tokens (for the ``*_occurrence`` rules).

    Raises:
        PositionError: the position does not exist on this prompt (the message says why).
    """
    n = len(ids)
    if n == 0:
        raise PositionError("the prompt has no tokens")
    rule = position.get("rule")
    last = position.get("subtoken", "last") == "last"
    if rule == "last":
        return n - 1
    if rule == "index":
        index = position.get("index")
        if not isinstance(index, int):
            raise PositionError("rule 'index' needs an integer index")
        resolved = index if index >= 0 else n + index
        if not 0 <= resolved < n:
            raise PositionError(f"index {index} is outside the prompt's {n} tokens")
        return resolved
    if rule in ("first_occurrence", "last_occurrence"):
        token = position.get("token")
        if not isinstance(token, str):
            raise PositionError(f"rule {rule!r} needs a token text")
        pattern = list(encode(token))
        if not pattern:
            raise PositionError(f"token text {token!r} encodes to no token")
        k = len(pattern)
        starts = [s for s in range(n - k + 1) if list(ids[s : s + k]) == pattern]
        start = _pick(starts, 0 if rule == "first_occurrence" else -1, f"token text {token!r}")
        return start + k - 1 if last else start
    if rule == "slot":
        raw = position.get("slot")
        if not isinstance(raw, str) or not raw:
            raise PositionError("rule 'slot' needs a slot name")
        occurrence = position.get("occurrence")
        occurrence = 0 if occurrence is None else occurrence
        name = _slot_name(raw, prompt.get("variables") or {})
        if position.get("match", "placeholder") == "value":
            slots = prompt.get("slots") or {}
            if name not in slots:
                raise PositionError(f"the prompt has no slot {name!r}")
            spans = _value_spans(str(prompt.get("prompt", "")), str(slots[name]))
            what = f"the value {slots[name]!r} of slot {name!r}"
        else:
            spans = slot_spans(prompt, name)
            what = f"placeholder {{{name}}}"
        span = _pick(spans, occurrence, what)
        tokens = _tokens_in_span(offsets, span)
        if not tokens:
            raise PositionError(f"{what} covers no token")
        return tokens[-1] if last else tokens[0]
    if rule == "all":
        raise PositionError("rule 'all' names every token, not one: it is resolved by resolve_positions")
    if rule == "named":
        raise PositionError(
            f"position {position.get('name')!r} is only named (by the code that produced the results), "
            "not declared as a rule this implementation can resolve"
        )
    raise PositionError(f"unknown position rule {rule!r}")


def resolve_positions(
    position: Mapping[str, Any],
    prompt: Mapping[str, Any],
    ids: Sequence[int],
    offsets: Sequence[tuple[int, int]],
    encode: Callable[[str], Sequence[int]],
) -> tuple[int, ...]:
    """The token indices a declared position names on one prompt: every index for ``all``,
    else the one :func:`resolve_position` gives.

    Raises:
        PositionError: the position does not exist on this prompt.
    """
    if position.get("rule") == "all":
        if not ids:
            raise PositionError("the prompt has no tokens")
        return tuple(range(len(ids)))
    return (resolve_position(position, prompt, ids, offsets, encode),)
