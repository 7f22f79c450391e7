"""The work a causal-variable recomputation declares: its time, and the memory the
counterfactual runs' recorded sites hold (R125 before anything starts)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from mibspec.core.strict_json import Limits
from mibspec.core.work import over_limits
from mibspec.reference_impl.recompute import work

CONFIG = {"n_layers": 4, "n_heads": 4, "d_model": 64}


def _unit(layer: int, component: str, heads: list[int] | None = None, **extra: Any) -> dict[str, Any]:
    location: dict[str, Any] = {"layer": layer, "component": component, "position": {"rule": "all"}}
    if heads is not None:
        location["heads"] = heads
    return {
        "id": f"u{layer}{component}{heads}",
        "location": location,
        "scores": {"a": 0.0, "b": 0.0},
        **extra,
    }


def _estimate(monkeypatch: pytest.MonkeyPatch, units: list[dict[str, Any]], rows: int) -> Any:
    monkeypatch.setattr(work, "_dataset_rows", lambda ctx, ident: rows)
    report = {
        "model": {"config": CONFIG},
        "task": {"dataset": "dataset"},
        "claims": {"variables": [{"name": "v", "units": units}]},
    }
    [item] = work.causal_variable(SimpleNamespace(data=report, device="cpu"))  # type: ignore[arg-type]
    return item


def test_the_recorded_sites_are_counted_once_each_joint_sites_included(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    joint = [
        {"layer": 2, "component": "attention_heads", "heads": [1]},
        {"layer": 3, "component": "mlp_output"},
    ]
    units = [
        _unit(0, "residual_post"),
        _unit(0, "residual_post"),  # the same site again: recorded once
        _unit(1, "attention_heads", [0, 2]),
        _unit(1, "attention_heads", [0], joint_sites=joint),
    ]
    item = _estimate(monkeypatch, units, rows=1000)
    # by hand: residual 64, heads (0, 2) 2·16, head (0,) 16, joint head 16, MLP 64
    width = 64 + 32 + 16 + 16 + 64
    assert item.bytes == 4 * 1000 * width
    assert f"recording {width} values per token" in item.what
    assert item.pointer == "/claims/variables"


def test_many_distinct_sites_are_refused_for_their_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Units at distinct head subsets each add a recorded site: a report of many of them is
    refused before recomputation starts rather than filling the memory."""
    subsets = [[a, b] for a in range(4) for b in range(4) if a < b]
    units = [_unit(layer, "attention_heads", heads) for layer in range(4) for heads in subsets]
    item = _estimate(monkeypatch, units, rows=10**6)
    assert item.bytes == 4 * 10**6 * len(units) * 32
    found = over_limits([item], Limits(max_recompute_bytes=100 * 1024**2))
    assert found is not None
    assert found[0] is item
    assert "--max-recompute-bytes" in found[2]


def test_without_a_declared_config_no_memory_is_claimed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(work, "_dataset_rows", lambda ctx, ident: 10)
    report = {
        "model": {},
        "task": {"dataset": "d"},
        "claims": {"variables": [{"units": [_unit(0, "mlp_output")]}]},
    }
    [item] = work.causal_variable(SimpleNamespace(data=report, device="cpu"))  # type: ignore[arg-type]
    assert item.bytes == 0
