"""Artifact rules (family A): sidecar files and the references to them."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from mibspec.core.files import sha256_file
from mibspec.core.findings import Finding
from mibspec.core.sidecars import (
    ITEMSIZE,
    SidecarError,
    non_finite_values,
    read_npy_header,
    read_safetensors_header,
    shape_problem,
    tensor_infos,
)
from mibspec.core.strict_json import JsonLinesError, describe_problem, load_json_file, read_json_lines

from .._annotations import iter_annotations
from .._context import RuleContext
from ._registry import rule

_EXTENSIONS = {
    "application/json": (".json",),
    "application/jsonl": (".jsonl", ".ndjson"),
    "application/x-safetensors": (".safetensors",),
    "application/x-npy": (".npy",),
}
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")
_MAX_JSONL_LINE = 16 * 1024 * 1024


def unsafe_reason(path: str) -> str | None:
    """Why a declared artifact path is not a plain relative POSIX path, or None."""
    if path.startswith(("/", "\\")) or _WINDOWS_DRIVE.match(path):
        return "is absolute"
    if "\\" in path:
        return "uses backslashes; artifact paths are POSIX"
    if "\x00" in path:
        return "contains a NUL character"
    parts = PurePosixPath(path).parts
    if ".." in parts:
        return "climbs out of the report's folder with '..'"
    return None


def resolve_inside(folder: Path, path: str) -> Path | None:
    """``folder/path`` with links resolved, or None when it lands outside ``folder``."""
    root = folder.resolve()
    target = (folder / path).resolve()
    try:
        target.relative_to(root)
    except ValueError:
        return None
    return target


@rule("artifact-integrity", codes=("A101", "A102", "A103", "A104", "A105", "A106", "A108"))
def artifact_integrity(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Every artifact is a safe relative path to a regular file with the declared size, hash and type."""
    seen_ids: dict[str, int] = {}
    seen_paths: dict[str, int] = {}
    for index, artifact in enumerate(doc.get("artifacts", [])):
        pointer = f"/artifacts/{index}"
        ident, declared = artifact["id"], artifact["path"]
        if ident in seen_ids:
            ctx.broken_artifacts.add(ident)
            yield ctx.finding(
                "A108",
                f"{pointer}/id",
                detail=f"artifact id {ident!r} is already used by /artifacts/{seen_ids[ident]}",
            )
            continue
        seen_ids[ident] = index
        ctx.artifacts[ident] = artifact
        normal = os.path.normpath(declared)
        if normal in seen_paths:
            yield ctx.finding(
                "A108",
                f"{pointer}/path",
                detail=f"path {declared!r} is already declared by /artifacts/{seen_paths[normal]}",
            )
        seen_paths.setdefault(normal, index)
        try:
            found = list(_check_one(artifact, pointer, ctx))
        except OSError as exc:  # a name too long for the file system, an unreadable file, ...
            found = [
                ctx.finding(
                    "A102",
                    f"{pointer}/path",
                    path=declared,
                    detail=f"cannot be read ({exc.strerror or type(exc).__name__})",
                )
            ]
        if any(f.severity.value == "error" for f in found):
            ctx.broken_artifacts.add(ident)
        yield from found


def _check_one(artifact: dict[str, Any], pointer: str, ctx: RuleContext) -> Iterator[Finding]:
    declared = artifact["path"]
    reason = unsafe_reason(declared)
    if reason:
        yield ctx.finding("A101", f"{pointer}/path", path=declared, detail=reason)
        return
    try:
        target = resolve_inside(ctx.folder, declared)
    except RuntimeError:  # Python < 3.13 reports a symbolic link loop so; later versions as OSError
        yield ctx.finding(
            "A102", f"{pointer}/path", path=declared, detail="cannot be resolved (a symbolic link loop)"
        )
        return
    if target is None:
        yield ctx.finding(
            "A101",
            f"{pointer}/path",
            path=declared,
            detail="resolves outside the report's folder through a symbolic link",
        )
        return
    if not target.exists():
        yield ctx.finding("A102", f"{pointer}/path", path=declared, detail="does not exist")
        return
    if not target.is_file():
        yield ctx.finding("A102", f"{pointer}/path", path=declared, detail="is not a regular file")
        return
    media_type = artifact["media_type"]
    if not declared.lower().endswith(_EXTENSIONS[media_type]):
        yield ctx.finding(
            "A105",
            f"{pointer}/media_type",
            path=declared,
            detail=f"file name does not end in {' or '.join(_EXTENSIONS[media_type])} "
            f"as {media_type} requires",
        )
    size = target.stat().st_size
    if size != artifact["bytes"]:
        yield ctx.finding("A104", f"{pointer}/bytes", path=declared, actual=size, declared=artifact["bytes"])
        return  # a size mismatch makes the hash mismatch too; do not read a file of unexpected size
    actual = sha256_file(target)
    if actual != artifact["sha256"]:
        yield ctx.finding(
            "A103", f"{pointer}/sha256", path=declared, actual=actual, declared=artifact["sha256"]
        )
        return
    yield from _check_content(artifact, target, pointer, ctx)


def _check_content(
    artifact: dict[str, Any], target: Path, pointer: str, ctx: RuleContext
) -> Iterator[Finding]:
    declared, media_type = artifact["path"], artifact["media_type"]
    try:
        if media_type == "application/x-safetensors":
            read_safetensors_header(target)
        elif media_type == "application/x-npy":
            read_npy_header(target)
    except SidecarError as exc:
        yield ctx.finding(
            "A105", f"{pointer}/media_type", path=declared, detail=f"not a valid {media_type} file: {exc}"
        )
        return
    if media_type == "application/jsonl":
        yield from _check_jsonl(artifact, target, pointer, ctx)
    elif media_type == "application/json" and not artifact.get("kind"):
        yield from _check_json(artifact, target, pointer, ctx)
    elif artifact.get("kind") and media_type != "application/json":
        yield ctx.finding(
            "A105",
            f"{pointer}/kind",
            path=declared,
            detail="only application/json artifacts can be mibspec documents",
        )


def _check_json(artifact: dict[str, Any], target: Path, pointer: str, ctx: RuleContext) -> Iterator[Finding]:
    """A JSON sidecar that is not a document (no ``kind``) is parsed as strictly as one."""
    parsed = load_json_file(target, ctx.options.limits)
    if parsed.problems:
        detail = f"not strict JSON: {describe_problem(parsed, parsed.problems[0])}"
        yield ctx.finding("A105", f"{pointer}/media_type", path=artifact["path"], detail=detail)


def _check_jsonl(artifact: dict[str, Any], target: Path, pointer: str, ctx: RuleContext) -> Iterator[Finding]:
    declared = artifact["path"]
    if "rows" not in artifact:
        yield ctx.finding("A106", pointer, path=declared, detail='JSON Lines artifacts must declare "rows"')
        return
    rows = 0
    with target.open("rb") as handle:
        try:
            for _ in read_json_lines(handle, ctx.options.limits, max_line=_MAX_JSONL_LINE):
                rows += 1
        except JsonLinesError as exc:
            yield ctx.finding("A106", pointer, path=declared, detail=str(exc))
            return
    if rows != artifact["rows"]:
        yield ctx.finding(
            "A106", f"{pointer}/rows", path=declared, detail=f"has {rows} rows, declared {artifact['rows']}"
        )


@rule("artifact-references", codes=("A107", "A109"))
def artifact_references(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Fields that name an artifact name a declared one, of the expected document kind."""
    for pointer, marker, ident in iter_annotations(ctx.schema, doc, "x-mibspec-artifact"):
        kind = marker.get("kind")
        artifact = ctx.artifacts.get(ident)
        if artifact is None:
            yield ctx.finding("A109", pointer, artifact=ident)
        elif kind is not None and artifact.get("kind") != kind:
            yield ctx.finding(
                "A107",
                pointer,
                path=artifact["path"],
                detail=f'must be a {kind} document (declare "kind": "{kind}" on the artifact)',
            )


@rule("tensor-references", codes=("A110", "A112"))
def tensor_references(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """Declared tensors are within the tensor limits and exist in their sidecar with the
    declared shape and dtype."""
    for pointer, _, ref in iter_annotations(ctx.schema, doc, "x-mibspec-tensor"):
        # Judged on the declared numbers alone, before any file is read or array made.
        problem = shape_problem(ref["shape"], ITEMSIZE[ref["dtype"]])
        if problem:
            yield ctx.finding("A112", f"{pointer}/shape", detail=problem)
            continue
        artifact = ctx.artifacts.get(ref["artifact"])
        if artifact is None or ref["artifact"] in ctx.broken_artifacts:
            continue  # reported by the artifact rules already
        declared = artifact["path"]
        if artifact["media_type"] not in ("application/x-safetensors", "application/x-npy"):
            yield ctx.finding("A110", f"{pointer}/artifact", path=declared, detail="is not a tensor file")
            continue
        try:
            infos = tensor_infos(ctx.folder / declared, artifact["media_type"])
        except (SidecarError, OSError) as exc:
            yield ctx.finding("A110", f"{pointer}/artifact", path=declared, detail=str(exc))
            continue
        name = ref.get("tensor") if artifact["media_type"] == "application/x-safetensors" else None
        if artifact["media_type"] == "application/x-safetensors" and name is None:
            yield ctx.finding(
                "A110", pointer, path=declared, detail="a safetensors reference must name its tensor"
            )
            continue
        info = infos.get(name)
        if info is None:
            yield ctx.finding(
                "A110",
                f"{pointer}/tensor",
                path=declared,
                detail=f"has no tensor {name!r} (it has {sorted(k for k in infos if k)})",
            )
            continue
        if list(info.shape) != list(ref["shape"]):
            yield ctx.finding(
                "A110",
                f"{pointer}/shape",
                path=declared,
                detail=f"tensor {name or '(npy)'} has shape {list(info.shape)}, declared {ref['shape']}",
            )
        if info.dtype != ref["dtype"]:
            yield ctx.finding(
                "A110",
                f"{pointer}/dtype",
                path=declared,
                detail=f"tensor {name or '(npy)'} has dtype {info.dtype}, declared {ref['dtype']}",
            )
            continue
        bad = non_finite_values(ctx.folder / declared, info)
        if bad is not None:
            yield ctx.finding(
                "A110",
                pointer,
                path=declared,
                detail=f"tensor {name or '(npy)'} holds {bad[0]} NaN or infinite values "
                f"(the first at flat index {bad[1]})",
            )


@rule("model-pinned", codes=("A111",), kinds=("report", "circuit"))
def model_pinned(doc: dict[str, Any], ctx: RuleContext) -> Iterator[Finding]:
    """A hub model names the exact commit its weights come from."""
    model = doc.get("model")
    if isinstance(model, dict) and model.get("source") == "hub" and "revision" not in model:
        yield ctx.finding("A111", "/model", model=model["id"])
