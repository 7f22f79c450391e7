"""Behaviour models with a known ground truth, used to exercise the CAUSAL-BENCH metrics."""

from .planted import (
    PAPER_PLANTED_ROLES,
    PlantedCircuitModel,
    component_id,
    component_universe,
    default_planted,
)

__all__ = [
    "PAPER_PLANTED_ROLES",
    "PlantedCircuitModel",
    "component_id",
    "component_universe",
    "default_planted",
]
