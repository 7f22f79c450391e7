"""Image classifiers of the pixel-level saliency track (torch).

* :mod:`._registry`: the built-in architectures a ``registry`` model names
  (:data:`ARCHITECTURES`, :func:`load_registry_model`, :func:`read_weights`);
* :mod:`._evaluate`: class probabilities, the Shapley game over a dominant area
  (:class:`PixelGame`, :func:`shapley_ground_truth`) and deletion/addition curves
  (:func:`curve_scores`);
* :mod:`._protocol`: the report's numbers over a dataset (dominance, the dominant images,
  their ground truth, per-method scores and curve areas), shared by the producer and the
  recompute stage;
* :mod:`._maps`: saliency maps of standard attribution methods through captum
  (imported on demand: captum is only needed to produce maps, not to check them).

Imported only by the recompute stage and the ``score`` command: validation never loads
torch.
"""

from ._evaluate import (
    DEFAULT_BATCH,
    CurveScore,
    GroundTruth,
    PixelGame,
    Sampler,
    class_probabilities,
    curve_scores,
    shapley_ground_truth,
)
from ._maps import METHODS, saliency_maps
from ._protocol import (
    CurveSettings,
    DominanceResult,
    DominantImages,
    MapScores,
    ShapleySettings,
    class_patch_masks,
    dominant_curves,
    dominant_ground_truth,
    dominant_images,
    evaluate_dominance,
    map_curves,
    map_scores,
)
from ._registry import ARCHITECTURES, Architecture, TinyCNN, load_registry_model, read_weights

__all__ = [
    "ARCHITECTURES",
    "DEFAULT_BATCH",
    "METHODS",
    "Architecture",
    "CurveScore",
    "CurveSettings",
    "DominanceResult",
    "DominantImages",
    "GroundTruth",
    "MapScores",
    "PixelGame",
    "Sampler",
    "ShapleySettings",
    "TinyCNN",
    "class_patch_masks",
    "class_probabilities",
    "curve_scores",
    "dominant_curves",
    "dominant_ground_truth",
    "dominant_images",
    "evaluate_dominance",
    "load_registry_model",
    "map_curves",
    "map_scores",
    "read_weights",
    "saliency_maps",
    "shapley_ground_truth",
]
