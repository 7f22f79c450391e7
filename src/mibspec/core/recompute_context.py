"""What a recomputer reads: :class:`RecomputeContext`.

The recompute stage hands each track's recomputer, and the estimate of the work a report
declares (:mod:`mibspec.core.work`), one object with exactly these members: the report and
its folder, the profile it is checked under (its conventions and tolerances), its
artifacts, the run's limits, model roots, device and batch size, the cache several reports
share, and two services (a finding with the catalogue's message, a referenced JSON file
parsed under the run's limits). A recomputer only reads it: everything it produces (the
comparisons, the findings, the model files it used) it returns in a
:class:`~mibspec.core.comparisons.Recomputation`.

The concrete object is the validator's rule context; this module names no layer above
:mod:`mibspec.core`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any, Protocol

from mibspec.core.findings import Finding
from mibspec.core.strict_json import Limits, ParsedDocument

__all__ = ["RECOMPUTE_NOT_REQUESTED", "RecomputeContext"]

#: The recompute stage's detail when the caller asked for no recomputation.
RECOMPUTE_NOT_REQUESTED = "not requested"


class RecomputeContext(Protocol):
    """What recomputation reads of a report and of the run verifying it."""

    @property
    def data(self) -> dict[str, Any]:
        """The report, as parsed (numbers normalised by the schema stage)."""

    @property
    def folder(self) -> Path:
        """The report's folder: its artifacts' paths are relative to it."""

    @property
    def profile(self) -> Mapping[str, Any]:
        """The profile the report is checked under: its conventions and tolerances."""

    @property
    def artifacts(self) -> Mapping[str, Mapping[str, Any]]:
        """The report's artifacts by id (filled by the artifact rule)."""

    @property
    def broken_artifacts(self) -> AbstractSet[str]:
        """Ids of artifacts whose file failed an integrity check: not to be read."""

    @property
    def limits(self) -> Limits:
        """The run's limits (document size, model bytes, recomputation time and memory)."""

    @property
    def model_roots(self) -> Sequence[Path]:
        """Extra folders local models are looked up in (``--model-root``)."""

    @property
    def device(self) -> str:
        """Where recomputation runs: ``cpu``, ``cuda:N`` or ``mps``, already resolved."""

    @property
    def batch_size(self) -> int | str | None:
        """Examples per forward pass: ``None`` (the report's), a positive integer, or ``"auto"``."""

    @property
    def session(self) -> object | None:
        """What the recomputation of several reports shares (a ``RecomputeSession`` of the
        reference implementation), or ``None``."""

    def finding(
        self,
        code: str,
        pointer: str = "",
        /,
        *,
        hint: str | None = None,
        data: dict[str, Any] | None = None,
        **params: Any,
    ) -> Finding:
        """A finding of ``code`` at ``pointer`` with the catalogue's message and severity."""

    def load_json(self, path: Path) -> ParsedDocument:
        """A JSON file the report references, parsed strictly under the run's limits."""
