"""The EAP-IG graph JSON reader's paths agree: blocks of entries as ``json.dump`` writes them,
the per-entry expression, and the general parser.

The baseline is independent of the reader: ``json.loads`` of the same text, and the edges
placed by ``GraphUniverse.edge_ids``. Small blocks make every graph span many of them, and
each text is also read with the block path switched off.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mibspec.importers import _eap_ig_json as reader
from mibspec.importers.eap_ig import _universe

CFG = {"n_layers": 2, "n_heads": 2, "parallel_attn_mlp": False, "d_model": 8}


def _graph() -> dict[str, Any]:
    universe = _universe(CFG)
    rng = np.random.default_rng(7)
    names = universe.edge_names()
    order = rng.permutation(len(names))
    scores = rng.standard_normal(len(names)) * 10.0 ** rng.integers(-300, 300, len(names)) / 1e3
    edges = {names[i]: {"score": float(scores[i]), "in_graph": bool(rng.random() < 0.3)} for i in order}
    nodes = {name: {"in_graph": True} for name in [*universe.forward_names, "logits"]}
    return {"cfg": CFG, "nodes": nodes, "edges": edges}


def _expected(text: str) -> tuple[np.ndarray, ...]:
    """Scores, membership and scored flags in canonical order, from json.loads."""
    universe = _universe(CFG)
    edges = json.loads(text)["edges"]
    ids = universe.edge_ids(list(edges))
    scores = np.zeros(universe.n_edges)
    member = np.zeros(universe.n_edges, bool)
    scored = np.zeros(universe.n_edges, bool)
    for i, entry in zip(ids, edges.values(), strict=True):
        scores[i] = entry.get("score", 0.0)
        member[i] = entry.get("in_graph", False)
        scored[i] = "score" in entry
    return scores, member, scored


def _read(path: Path) -> Any:
    return reader.read_graph_json(path, 1 << 30, _universe)


def _read_both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """What the reader gives with blocks of 300 characters (and the entries after the last
    block taken 7 at a time), and with the block path off."""
    with monkeypatch.context() as patch:
        patch.setattr(reader, "_BLOCK", 300)
        patch.setattr(reader, "_TAIL", 7)
        fast = _outcome(lambda: _read(path))
        patch.setattr(reader, "_dumped_edges", lambda *_: None)
        slow = _outcome(lambda: _read(path))
    return fast, slow


def _outcome(read: Callable[[], Any]) -> Any:
    try:
        graph = read()
    except reader.ReadProblemError as exc:
        return ("refused", exc.code, exc.pointer, exc.offset)
    return tuple(np.asarray(a).tobytes() for a in (graph.scores, graph.in_graph, graph.scored, graph.seen))


def _text(graph: dict[str, Any], edit: Callable[[str], str] = lambda text: text) -> str:
    return edit(json.dumps(graph))


def _middle_entry(text: str) -> tuple[int, int]:
    """The span of an entry in the middle of the edges object, as json.dumps wrote it."""
    start = text.index('"edges": {') + len('"edges": {')
    at = start + (len(text) - start) // 2
    begin = text.index('}, "', at) + 3
    return begin, text.index("}, ", begin) + 1


def _respace(text: str) -> str:
    begin, end = _middle_entry(text)
    return text[:begin] + text[begin:end].replace(": ", " :\n ").replace(", ", " ,") + text[end:]


def _swap_keys(text: str) -> str:
    begin, end = _middle_entry(text)
    name, body = text[begin:end].split(": ", 1)
    entry = json.loads(body)
    swapped = f'{{"in_graph": {json.dumps(entry["in_graph"])}, "score": {entry["score"]!r}}}'
    return text[:begin] + f"{name}: {swapped}" + text[end:]


def _escape_name(text: str) -> str:
    begin, end = _middle_entry(text)
    return text[:begin] + text[begin:end].replace("->", "\\u002d>", 1) + text[end:]


def _edges_first(graph: dict[str, Any]) -> dict[str, Any]:
    return {"cfg": graph["cfg"], "edges": graph["edges"], "nodes": graph["nodes"]}


VALID: dict[str, Callable[[dict[str, Any]], str]] = {
    "as dumped, edges last": lambda g: _text(g),
    "nodes after the edges": lambda g: _text(_edges_first(g)),
    "one entry spaced otherwise": lambda g: _text(g, _respace),
    "one entry with in_graph first": lambda g: _text(g, _swap_keys),
    "one name with an escape": lambda g: _text(g, _escape_name),
    "compact separators": lambda g: json.dumps(g, separators=(",", ":")),
    "indented": lambda g: json.dumps(g, indent=1),
}


@pytest.mark.parametrize("shape", sorted(VALID))
def test_every_path_reads_the_scores_json_loads_reads(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "graph.json"
    path.write_text(VALID[shape](_graph()), encoding="utf-8")
    fast, slow = _read_both(path, monkeypatch)
    scores, member, scored = _expected(path.read_text(encoding="utf-8"))
    assert fast == slow
    assert fast[:3] == (scores.tobytes(), member.tobytes(), scored.tobytes())
    assert _outcome(lambda: _read(path)) == fast  # the default block size


@pytest.mark.parametrize(
    ("shape", "taken"),
    [
        ("as dumped, edges last", True),
        ("nodes after the edges", True),
        ("one entry spaced otherwise", False),
        ("compact separators", False),
    ],
)
def test_the_block_path_reads_what_json_dump_writes_and_only_that(
    shape: str, taken: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = VALID[shape](_graph())
    monkeypatch.setattr(reader, "_BLOCK", 300)
    at = text.index('"edges":') + len('"edges":')
    read = reader._dumped_edges(text, at + len(text[at:]) - len(text[at:].lstrip()), _universe(CFG))
    assert (read is not None) == taken


def _unknown_name(text: str) -> str:
    begin, end = _middle_entry(text)
    return text[:begin] + text[begin:end].replace("->", "->zz", 1) + text[end:]


def _repeat_entry(text: str) -> str:
    begin, end = _middle_entry(text)
    return text[:end] + ", " + text[begin:end] + text[end:]


def _nan_score(text: str) -> str:
    begin, end = _middle_entry(text)
    name = text[begin:end].split(": ", 1)[0]
    return text[:begin] + f'{name}: {{"score": NaN, "in_graph": true}}' + text[end:]


INVALID: dict[str, tuple[Callable[[str], str], str]] = {
    "an unknown edge": (_unknown_name, "I102"),
    "a repeated edge": (_repeat_entry, "P102"),
    "a NaN edge score": (_nan_score, "I105"),
    "a missing comma": (lambda t: t[: _middle_entry(t)[1]] + t[_middle_entry(t)[1] + 1 :], "P101"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_every_path_refuses_alike(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    edit, code = INVALID[case]
    path = tmp_path / "graph.json"
    path.write_text(_text(_graph(), edit), encoding="utf-8")
    fast, slow = _read_both(path, monkeypatch)
    assert fast == slow
    assert fast[:2] == ("refused", code)


def test_scores_keep_every_bit() -> None:
    """Extreme and negative-zero scores survive the block path's float conversion."""
    values = [-0.0, 5e-324, 1.7976931348623157e308, 0.1, -2.5e-300, 123456789.12345679]
    names = [f"input->a0.h{h}<{x}>" for h in range(2) for x in "qkv"]
    entries = ", ".join(
        f'"{name}": {{"score": {value!r}, "in_graph": false}}'
        for name, value in zip(names, values, strict=True)
    )
    text = f'{{"cfg": {json.dumps(CFG)}, "edges": {{{entries}}}}}'
    universe = _universe(CFG)
    read = reader._dumped_edges(text, text.index('"edges": ') + len('"edges": '), universe)
    assert read is not None
    scores = read[0][0]
    for i, value in zip(universe.edge_ids(names), values, strict=True):
        assert scores[i] == value
        assert math.copysign(1.0, scores[i]) == math.copysign(1.0, value)
