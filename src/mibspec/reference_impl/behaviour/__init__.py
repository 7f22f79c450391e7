"""Behaviour models with a known or measured ground truth, and the CAUSAL-BENCH procedures.

* :mod:`.planted`: the planted-circuit model of Eq. 1 (numpy);
* :mod:`.localization`: the four localization procedures and the subsample draw (numpy);
* :mod:`.study`: the numbers of the paper's Tables 1–3 from declared inputs (numpy);
* :mod:`.transformer`: a model's normalised logit difference over its heads and MLPs
  (torch; import it explicitly, it is not loaded with this package).
"""

from .localization import (
    LOCALIZATION_KINDS,
    PAPER_PROCEDURES,
    Procedure,
    identify,
    procedure_scores,
    subsample,
)
from .planted import (
    PAPER_PLANTED_ROLES,
    PlantedCircuitModel,
    component_id,
    component_universe,
    default_planted,
)

__all__ = [
    "LOCALIZATION_KINDS",
    "PAPER_PLANTED_ROLES",
    "PAPER_PROCEDURES",
    "PlantedCircuitModel",
    "Procedure",
    "component_id",
    "component_universe",
    "default_planted",
    "identify",
    "procedure_scores",
    "subsample",
]
