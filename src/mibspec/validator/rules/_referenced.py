"""Tensors a document declares, and documents a report references, as rules read them.

A report's rules run before the documents it references are verified (A-6), so a rule that
needs a referenced document's content (a circuit document's edge scores or membership rows)
reads it here: parsed strictly under the run's limits, checked against its schema, and its
artifacts checked by the artifact rule itself (a path inside its folder, size, hash, media
type), with every finding discarded. A document or tensor that fails any of it is ``None``:
its own verification reports why, and the report gets A107 through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mibspec.core.sidecars import SidecarError, load_tensor, non_finite_values, tensor_infos
from mibspec.core.spec import KNOWN_SPEC_VERSIONS

from .._annotations import normalize_numbers
from .._context import RuleContext
from .._schema_stage import check_schema
from .artifacts import artifact_integrity

__all__ = ["Referenced", "declared_tensor", "referenced"]


def declared_tensor(
    ctx: RuleContext, ref: dict[str, Any], *, bfloat16_as_float32: bool = False
) -> Any | None:
    """The tensor ``ref`` declares in ``ctx``'s document, or ``None`` when another rule reports
    a problem with it (its artifact broken, a shape or dtype other than declared, NaN or
    infinity: A101–A110). numpy has no bfloat16: such a tensor is ``None`` unless
    ``bfloat16_as_float32``, which widens it exactly to float32."""
    artifact = ctx.artifacts.get(ref["artifact"])
    if artifact is None or ref["artifact"] in ctx.broken_artifacts:
        return None
    path = ctx.folder / artifact["path"]
    try:
        info = tensor_infos(path, artifact["media_type"]).get(ref.get("tensor"))
        if info is None or list(info.shape) != list(ref["shape"]) or info.dtype != ref["dtype"]:
            return None  # A110 reports the mismatch
        if non_finite_values(path, info) is not None:
            return None  # A110 reports NaN and infinity
        if info.dtype == "bfloat16" and bfloat16_as_float32:
            import numpy as np

            raw = np.memmap(path, dtype="<u2", mode="r", offset=info.data_offset, shape=info.shape)
            return (raw.astype(np.uint32) << 16).view(np.float32)
        return load_tensor(path, info)
    except (SidecarError, OSError):
        return None


@dataclass
class Referenced:
    """A document the report references, read for the report's rules.

    Attributes:
        path: its path as the report's artifact entry declares it.
        ctx: its own rule context (its artifacts checked).
    """

    path: str
    ctx: RuleContext
    _tensors: dict[str, Any] = field(default_factory=dict)

    @property
    def data(self) -> dict[str, Any]:
        return self.ctx.data

    def tensor(self, key: str) -> Any | None:
        """The tensor the document declares at ``key`` (``scores``, ``membership``, …), or
        ``None`` when it declares none or the tensor fails its checks."""
        if key not in self._tensors:
            ref = self.data.get(key)
            self._tensors[key] = declared_tensor(self.ctx, ref) if isinstance(ref, dict) else None
        return self._tensors[key]


def referenced(ctx: RuleContext, ident: Any, kind: str) -> Referenced | None:
    """The document of ``kind`` that the artifact ``ident`` of ``ctx``'s document holds, or
    ``None``: no such artifact, one the artifact rules report, or a document that does not
    parse, is not of ``kind`` or of a known version, or fails its schema. Read once per
    verification of ``ctx``'s document."""
    key = (ident, kind)
    if key in ctx.referenced:
        found: Referenced | None = ctx.referenced[key]
        return found
    ctx.referenced[key] = found = _read(ctx, ident, kind)
    return found


def _read(ctx: RuleContext, ident: Any, kind: str) -> Referenced | None:
    artifact = ctx.artifacts.get(ident) if isinstance(ident, str) else None
    if artifact is None or ident in ctx.broken_artifacts or artifact.get("kind") != kind:
        return None
    path = ctx.folder / artifact["path"]
    try:
        parsed = ctx.load_json(path)
    except OSError:
        return None
    data = parsed.data
    if parsed.problems or not isinstance(data, dict) or data.get("kind") != kind:
        return None
    version = data.get("spec_version")
    if not isinstance(version, str) or version not in KNOWN_SPEC_VERSIONS:
        return None
    if next(iter(check_schema(data, kind, version, ctx.catalogue)), None) is not None:
        return None
    sub = RuleContext(
        path=path,
        data=data,
        kind=kind,
        spec_version=version,
        profile=ctx.profile,
        options=ctx.options,
        cat=ctx.catalogue,
    )
    normalize_numbers(sub.schema, data)
    for _ in artifact_integrity(data, sub):  # fills sub.artifacts and sub.broken_artifacts
        pass  # the findings are the document's own, reported when it is verified
    return Referenced(artifact["path"], sub)
