"""What every model-based recomputer needs: the model, its tokenizer, referenced documents.

Failures raise :class:`UnusableInputError` with the pointer of the declaration at fault; the
recomputer turns it into an R104 finding (SPEC.md R-3).

Model lookup (SPEC.md M-2): a ``local`` model's ``path`` is relative and never climbs
(no ``..``); it is looked up in the report's folder, then in each ``--model-root``. A
``hub`` model is looked up as ``<root>/<id>`` in each model root first (an offline copy),
then in the local Hugging Face cache at its pinned revision, then downloaded at that
revision (never when the hub is offline or cannot be reached: R104 at once).

Model files (SPEC.md M-4): the folder and every file read must resolve inside the folder
the model was found in (a link out of it is refused, unread). The config is read first
(strict JSON, no quantity given under two spellings with different values) and the size
it implies checked against ``Limits.max_model_bytes``, then the sizes of the files (R107
over the limit); then each file is read once into memory, hashed, checked against its
declared hash, and the model and tokenizer are built from those bytes: what was hashed is
what is used. A file of the hub client's cache is also checked against the digest its
blob is named by. A file used but not pinned in ``model.files`` gives R106; every file
used is recorded for the receipt. Digests come from the bytes read in this run, unless the
run trusts the file-hash cache (``--trust-hash-cache``): a digest taken from it is
reported (R111, info).

The declared model (SPEC.md M-5) is compared with the config before any weight is read,
then with the model as built (its layers, heads, width and vocabulary as the weights'
shapes give them). Tokenized inputs are checked against the model before any forward
pass (:func:`check_tokens`): ids inside its vocabulary, sequences inside its context.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from mibspec.core.comparisons import Recomputation
from mibspec.core.findings import Finding
from mibspec.core.recompute_context import RecomputeContext
from mibspec.core.strict_json import (
    DEFAULT_LIMITS,
    JsonLinesError,
    Limits,
    read_json_lines,
)

from ._hash_cache import ChunkReader, FileGrewError, FileHashCache
from ._session import RecomputeSession

__all__ = [
    "ModelFile",
    "ModelMismatchError",
    "ModelSource",
    "ModelTooLargeInputError",
    "UnusableInputError",
    "batch_plan",
    "check_declared_dtype",
    "check_memory",
    "check_tokens",
    "dtype_narrowing",
    "encode_function",
    "error_findings",
    "load_referenced_document",
    "local_tokenizer",
    "open_model",
    "read_rows",
    "resolve_model",
    "session_of",
    "stored_dtype",
]

_CHUNK = 1 << 20
_CONFIG, _WEIGHTS, _INDEX, _TOKENIZER = (
    "config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "tokenizer.json",
)
#: What a hub snapshot needs (sharded weights are named ``model-00001-of-00002.safetensors``).
_HUB_PATTERNS = [_CONFIG, _WEIGHTS, _INDEX, "model-*-of-*.safetensors", _TOKENIZER]


class UnusableInputError(Exception):
    """A declaration recomputation depends on cannot be used (becomes R104 at ``pointer``)."""

    code = "R104"

    def __init__(self, pointer: str, detail: str) -> None:
        super().__init__(detail)
        self.pointer = pointer
        self.detail = detail


class ModelTooLargeInputError(UnusableInputError):
    """The declared model is over ``Limits.max_model_bytes`` (R107); nothing was read or built."""

    code = "R107"


class ModelMismatchError(UnusableInputError):
    """The declared model is not the loaded one (R108 architecture, R109 dimensions, R110
    vocabulary): nothing is recomputed on it, so no claim is reported as reproduced.

    ``also`` holds the other mismatches found with it, each reported before it."""

    def __init__(self, code: str, pointer: str, detail: str, also: Sequence[ModelMismatchError] = ()) -> None:
        super().__init__(pointer, detail)
        self.code = code
        self.also = tuple(also)


def error_findings(ctx: RecomputeContext, exc: UnusableInputError) -> list[Finding]:
    """The findings a recomputation stopped by ``exc`` reports: the other mismatches found
    with it (:class:`ModelMismatchError`), then ``exc`` itself."""
    others = exc.also if isinstance(exc, ModelMismatchError) else ()
    return [ctx.finding(e.code, e.pointer, detail=e.detail) for e in (*others, exc)]


def session_of(ctx: RecomputeContext) -> RecomputeSession | None:
    """The session the run's reports share, if any."""
    return ctx.session if isinstance(ctx.session, RecomputeSession) else None


#: Each field of a model declaration compared with the loaded config.json, and its code.
_DECLARED_FIELDS = {
    "architecture": ("R108", "the architecture"),
    "n_layers": ("R109", "the number of layers"),
    "n_heads": ("R109", "the number of attention heads"),
    "n_kv_heads": ("R109", "the number of key-value heads"),
    "d_model": ("R109", "the model width d_model"),
    "parallel_attn_mlp": ("R109", "parallel attention and MLP"),
    "vocab_size": ("R110", "the vocabulary size"),
}


def check_declared_model(
    declaration: dict[str, Any], config: dict[str, Any], where: str, pointer: str = "/model"
) -> None:
    """Compare the declared architecture, dimensions and vocabulary with the loaded config.

    Every mismatch is a finding at the declared field (R108–R110); the first is raised with
    the others in its ``also``, so that all of them are reported.

    Raises:
        ModelMismatchError: the declaration differs from the config in any field it states.
        UnusableInputError: the config's numbers cannot be read (R104).
    """
    from ..engine import config_summary

    try:
        loaded = config_summary(config)
    except ValueError as exc:
        raise UnusableInputError(pointer, str(exc)) from exc
    _compare_declared(declaration, loaded, f"the config.json of {where} gives", pointer)


def check_built_model(
    declaration: dict[str, Any],
    config: dict[str, Any],
    weights: Any,
    where: str,
    pointer: str = "/model",
) -> None:
    """Compare the declaration (R108–R110) and the config (R104) with the model as built: its
    layers, heads, width and vocabulary as the built weights' shapes give them.

    Raises:
        ModelMismatchError: the declaration differs from the built model.
        UnusableInputError: the built model is not the one the config describes (R104).
    """
    from ..engine import built_summary, config_summary

    try:
        built = built_summary(weights)
        loaded = config_summary(config)
    except ValueError as exc:
        raise UnusableInputError(pointer, str(exc)) from exc
    _compare_declared(declaration, built, f"the model built from the files of {where} has", pointer)
    differ = [
        f"{key} {loaded[key]!r} in config.json, {built[key]!r} built"
        for key in built
        if built[key] != loaded[key]
    ]
    if differ:
        raise UnusableInputError(
            pointer,
            f"the model built from the files of {where} is not the one its config.json describes: "
            + "; ".join(differ),
        )


def _compare_declared(declaration: dict[str, Any], loaded: dict[str, Any], origin: str, pointer: str) -> None:
    """R108–R110 for each declared field that differs from ``loaded``; the first is raised."""
    declared = {"architecture": declaration.get("architecture"), **(declaration.get("config") or {})}
    problems = []
    for key, (code, what) in _DECLARED_FIELDS.items():
        if declared.get(key) is None or declared[key] == loaded[key]:
            continue
        at = f"{pointer}/architecture" if key == "architecture" else f"{pointer}/config/{key}"
        detail = (
            f"the report declares {what} {declared[key]!r}, {origin} {loaded[key]!r}; the claims "
            "were not recomputed on a model other than the declared one"
        )
        problems.append(ModelMismatchError(code, at, detail))
    if problems:
        first = problems[0]
        raise ModelMismatchError(first.code, first.pointer, first.detail, also=problems[1:])


@dataclass(frozen=True)
class ModelSource:
    """Where the weights are: a local folder, or a hub id with its pinned revision.

    ``root`` is the folder a local model was found in (the report's folder or a model
    root): every file read must resolve inside it. ``tokenizer`` holds the bytes of the
    ``tokenizer.json`` that was hashed, once the model has been opened. ``hub_cache``: the
    folder is a snapshot of the hub client's cache, whose files link to blobs named by
    their digests.
    """

    location: str
    revision: str | None
    local: bool
    root: str | None = None
    tokenizer: bytes | None = field(default=None, repr=False, compare=False)
    start_token: int | None = field(default=None, compare=False)
    hub_cache: bool = field(default=False, compare=False)

    @property
    def display(self) -> str:
        return self.location if self.revision is None else f"{self.location}@{self.revision}"


@dataclass(frozen=True)
class ModelFile:
    """A model file recomputation read: its name in the model folder, its resolved path, and
    the SHA-256 and size of the bytes read; ``cached`` when the digest was taken from the
    file-hash cache (``--trust-hash-cache``) instead of being computed from those bytes."""

    name: str
    path: str
    sha256: str
    size: int
    cached: bool = False


def _relative_name(name: str, pointer: str, what: str) -> PurePosixPath:
    rel = PurePosixPath(name)
    if not name or rel.is_absolute() or ".." in rel.parts or "\\" in name:
        raise UnusableInputError(pointer, f"{what} {name!r} must be relative and not climb")
    return rel


def _inside(path: Path, root: Path, pointer: str, what: str) -> Path:
    """``path`` resolved, refused (unread) when it resolves outside ``root``."""
    resolved = path.resolve()
    if resolved != root and root not in resolved.parents:
        raise UnusableInputError(
            pointer,
            f"{what} resolves outside {root} (a link out of the folder the model was found in is "
            "refused; nothing was read)",
        )
    return resolved


def resolve_model(
    model: dict[str, Any], folder: Path, roots: tuple[Path, ...], pointer: str = "/model"
) -> ModelSource:
    """Find the declared model (see the module docstring); nothing is read yet."""
    source = model["source"]
    if source == "local":
        rel = _relative_name(model["path"], f"{pointer}/path", "a local model path")
        for base in [folder, *roots]:
            candidate = base / rel
            if (candidate / _CONFIG).is_file():
                root = base.resolve()
                _inside(candidate, root, f"{pointer}/path", f"the model folder {model['path']!r}")
                return ModelSource(str(candidate), None, local=True, root=str(root))
        searched = ", ".join(str(base / rel) for base in [folder, *roots])
        raise UnusableInputError(
            f"{pointer}/path",
            f"model folder {model['path']!r} not found (searched {searched}); pass --model-root FOLDER",
        )
    if source == "hub":
        rel = _relative_name(model["id"], f"{pointer}/id", "a hub id")
        for base in roots:
            candidate = base / rel
            if (candidate / _CONFIG).is_file():
                root = base.resolve()
                _inside(candidate, root, f"{pointer}/id", f"the model folder {model['id']!r}")
                return ModelSource(str(candidate), None, local=True, root=str(root))
        revision = model.get("revision")
        if revision is None:
            raise UnusableInputError(
                f"{pointer}/revision", "the hub model is not pinned to a revision (A111)"
            )
        return ModelSource(model["id"], revision, local=False)
    raise UnusableInputError(
        f"{pointer}/source", f"models of source {source!r} cannot be recomputed by this track"
    )


def _offline() -> bool:
    from huggingface_hub import constants

    flag = os.environ.get("HF_HUB_OFFLINE", "")
    return bool(constants.HF_HUB_OFFLINE) or flag.upper() in {"1", "ON", "YES", "TRUE"}


def _unreachable(endpoint: str) -> str | None:
    """Why ``endpoint`` cannot be reached (one connection attempt), or ``None``."""
    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=5):
            return None
    except OSError as exc:
        return str(exc) or type(exc).__name__


def _hub_snapshot(source: ModelSource, pointer: str, check_config: Any) -> ModelSource:
    """The local snapshot folder of a pinned hub model: the cache, else one download.

    Offline, or when the hub cannot be reached, a model not in the cache fails at once
    (no retries). ``check_config(bytes)`` vets the config before the weights are fetched.
    """
    from huggingface_hub import constants, hf_hub_download, snapshot_download

    where = f"{source.display}"
    try:
        folder = snapshot_download(
            source.location, revision=source.revision, local_files_only=True, allow_patterns=_HUB_PATTERNS
        )
    except Exception:  # not in the cache (the library's errors vary by version)
        folder = None
    if folder is None:
        advice = f"pass --model-root FOLDER holding {source.location}/ (config.json, weights, tokenizer.json)"
        if _offline():
            raise UnusableInputError(
                pointer,
                f"hub model {where} is not in the local cache and the hub is offline "
                f"(HF_HUB_OFFLINE); {advice}",
            )
        reason = _unreachable(constants.ENDPOINT)
        if reason is not None:
            raise UnusableInputError(
                pointer,
                f"hub model {where} is not in the local cache and {constants.ENDPOINT} cannot be reached "
                f"({reason}); {advice}",
            )
        try:
            config = hf_hub_download(source.location, _CONFIG, revision=source.revision)
            check_config(Path(config).read_bytes())
            folder = snapshot_download(
                source.location, revision=source.revision, allow_patterns=_HUB_PATTERNS
            )
        except UnusableInputError:
            raise
        except Exception as exc:  # a network or hub failure is a finding
            raise UnusableInputError(pointer, f"cannot download hub model {where}: {exc}") from exc
    snapshot = Path(folder)
    # snapshot files link into the repository's blob store: its folder bounds them
    return ModelSource(
        str(snapshot), source.revision, local=True, root=str(snapshot.parents[1].resolve()), hub_cache=True
    )


_BLOB_NAME = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class _Reader:
    """Reads a model folder's files once, bounded and hashed (see the module docstring).

    Without ``hashes`` every digest is computed from the bytes read; with it (the run
    trusts the file-hash cache) a digest may come from the cache, and is marked so.
    """

    def __init__(
        self,
        source: ModelSource,
        declared: dict[str, str],
        pointer: str,
        progress: Any,
        hashes: FileHashCache | None = None,
    ) -> None:
        self.folder = Path(source.location)
        self.root = Path(source.root or source.location).resolve()
        self.hub_cache = source.hub_cache
        self.declared, self.pointer, self.progress = declared, pointer, progress
        self.hashes = hashes
        self.used: list[ModelFile] = []

    def where(self, name: str) -> str:
        return f"{self.pointer}/files" if name in self.declared else self.pointer

    def locate(self, name: str) -> Path:
        where = self.where(name)
        rel = _relative_name(name, where, "model file name")
        path = self.folder / rel
        if not path.is_file():
            raise UnusableInputError(where, f"model file {name!r} is absent from {self.folder}")
        return _inside(path, self.root, where, f"model file {name!r}")

    def read(self, name: str, path: Path, size: int, keep: bool = True) -> bytearray:
        """The bytes of ``path`` (at most ``size``; a file that grew is refused), hashed; or,
        when the run trusts the file-hash cache, their digest from it when the file is
        unchanged since it was hashed."""
        blob = self._blob(name, path)
        git_blob = blob is not None and len(blob) == 40
        cached = False
        if self.hashes is not None and not git_blob:
            try:
                actual, total, data, cached = self.hashes.read(path, size, keep=keep, progress=self.progress)
            except FileGrewError:
                raise UnusableInputError(
                    self.pointer, f"model file {name!r} changed while it was read"
                ) from None
            named = actual
        else:
            actual, named, total, data = self._hash(name, path, size, keep, git_blob)
        if blob is not None and named != blob:
            raise UnusableInputError(
                self.where(name),
                f"model file {name!r} of the hub cache is the blob {blob}, but its bytes hash to {named}: "
                "it is not the file the pinned revision names (the cache was altered or is corrupt)",
            )
        return self._check(name, path, actual, total, data, cached)

    def _hash(
        self, name: str, path: Path, size: int, keep: bool, git_blob: bool
    ) -> tuple[str, str, int, bytearray]:
        """SHA-256 of the bytes read, the digest a hub blob is named by (git's SHA-1 of a
        blob for ``git_blob``), their count and (with ``keep``) the bytes, read into one buffer
        (:class:`~._hash_cache.ChunkReader`)."""
        digest = hashlib.sha256()
        git = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False) if git_blob else None
        with path.open("rb") as handle:
            reader = ChunkReader(handle, size, keep=keep, expected=size)
            for chunk in reader:
                if reader.total > size:
                    break
                digest.update(chunk)
                if git is not None:
                    git.update(chunk)
                self.progress.advance(len(chunk))
            if reader.total > size:
                raise UnusableInputError(self.pointer, f"model file {name!r} changed while it was read")
            total, data = reader.total, reader.data()
        sha256 = digest.hexdigest()
        return sha256, sha256 if git is None or total != size else git.hexdigest(), total, data

    def _blob(self, name: str, path: Path) -> str | None:
        """For a file of the hub client's cache, the digest its blob is named by (SHA-256 for
        files stored in large-file storage, git's SHA-1 for the others); ``None`` otherwise.

        Raises:
            UnusableInputError: a file of the cache that is not such a blob and that the
                report does not pin by its hash: nothing would tie its bytes to the revision.
        """
        if not self.hub_cache:
            return None
        if (
            path.parent.name == "blobs"
            and path.parent.parent == self.root
            and _BLOB_NAME.fullmatch(path.name)
        ):
            return path.name
        if name in self.declared:
            return None
        raise UnusableInputError(
            self.pointer,
            f"model file {name!r} of the hub cache is not a blob named by its digest ({path}), so "
            "nothing ties its bytes to the pinned revision; pin it in model.files or pass "
            "--model-root FOLDER holding the model",
        )

    def _check(
        self, name: str, path: Path, actual: str, total: int, data: bytearray, cached: bool
    ) -> bytearray:
        declared = self.declared.get(name)
        if declared is not None and actual != declared:
            raise UnusableInputError(
                f"{self.pointer}/files", f"sha256 of model file {name!r} is {actual}, declared {declared}"
            )
        self.used.append(ModelFile(name, str(path), actual, total, cached))
        return data


def _size_error(pointer: str, exc: Exception) -> UnusableInputError:
    from ..engine import ModelTooLargeError

    if isinstance(exc, ModelTooLargeError):
        return ModelTooLargeInputError(pointer, f"the model was not loaded: {exc}")
    return UnusableInputError(pointer, str(exc))


def open_model(
    ctx: RecomputeContext,
    progress: Any,
    dtype: str,
    out: Recomputation,
    pointer: str = "/model",
    keeps_runs: bool = False,
) -> tuple[ModelSource, Any]:
    """Find, read, hash, check and build the report's model; the files used, and what is to be
    said of them (R106, R111), go into the recomputation ``out``, before the model is checked
    as built (so that they are reported even when it fails that check).

    The model is built in the declared ``dtype`` on the run's device (``ctx.device``).
    ``keeps_runs``: the recomputation keeps runs in the session's activation cache for the
    reports that follow, so the memory check counts its bound.

    Returns:
        The source (with the tokenizer's bytes) and the engine weights.

    Raises:
        UnusableInputError: R104 (or R107 when over the size limit) at the declaration at fault.
    """
    declaration = ctx.data["model"]
    declared: dict[str, str] = dict(declaration.get("files") or {})
    vet = _config_vetter(dtype, ctx.limits.max_model_bytes, pointer)
    source = resolve_model(declaration, ctx.folder, tuple(ctx.model_roots), pointer)
    if not source.local:
        source = _hub_snapshot(source, pointer, vet)
    session = session_of(ctx)
    # the file-hash cache only when the run trusts it (--trust-hash-cache)
    reader = _Reader(source, declared, pointer, progress, None if session is None else session.hashes)
    config_path = reader.locate(_CONFIG)
    config_size = config_path.stat().st_size
    if config_size > ctx.limits.max_bytes:
        raise UnusableInputError(pointer, f"config.json holds {config_size} bytes, over the document limit")
    progress.start(f"reading the config of {source.display}", config_size)
    config = vet(bytes(reader.read(_CONFIG, config_path, config_size)))
    check_declared_model(declaration, config, source.display, pointer)
    files = _model_files(ctx, reader, source, declared, pointer, config_size)
    # The files the weights are built from: the config and index bytes read above, and the
    # digests of the weights and tokenizer. A model built earlier in this run from files
    # with the same digests is used again instead of being read and built twice.
    model_key = (
        source.location,
        source.revision,
        dtype,
        tuple((f.name, f.sha256) for f in reader.used if f.name in (_CONFIG, _INDEX)),
    )
    weight_bytes = sum(files.sizes[name] for name in files.names)
    kept = session.activation_bound() if session is not None and keeps_runs else 0
    if session is None or not session.has_model(model_key):  # a model held is in memory already
        if session is not None:
            session.forget_model()  # another model's memory is not held while this one loads
        check_memory(config, dtype, weight_bytes, pointer, str(ctx.device), kept)
    check_declared_dtype(
        ctx, declaration, dtype, [files.paths[n] for n in files.names if n != _TOKENIZER], pointer
    )
    progress.start(f"reading and hashing the model files of {source.display}", sum(files.sizes.values()))
    for name in files.extra:
        reader.read(name, files.paths[name], files.sizes[name], keep=False)
    reused = None if session is None else _reused_model(session, model_key, reader, files)
    if reused is not None:
        out.extend(_files_used(ctx, reader.used, files.read, declared, source, pointer))
        tokenizer, weights = reused
        check_built_model(declaration, config, weights, source.display, pointer)
        return _opened(source, tokenizer, config), weights
    if session is not None and session.has_model(model_key):  # its files changed since: built anew
        session.forget_model()
        check_memory(config, dtype, weight_bytes, pointer, str(ctx.device), kept)
    mark = len(reader.used)
    blobs = {name: reader.read(name, files.paths[name], files.sizes[name]) for name in files.names}
    digests = tuple((f.name, f.sha256) for f in reader.used[mark:])
    out.extend(_files_used(ctx, reader.used, files.read, declared, source, pointer))
    tokenizer = bytes(blobs.pop(_TOKENIZER))
    weights = _build_model(ctx, progress, source, config, blobs, dtype, pointer)
    check_built_model(declaration, config, weights, source.display, pointer)
    if session is not None:
        session.keep_model(model_key, digests, (tokenizer, weights))
    return _opened(source, tokenizer, config), weights


_SIXTEEN_BITS = ("float16", "bfloat16")
#: The bits of the floating dtypes weights may be stored in, by safetensors' spec name.
_FLOAT_BITS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}


def stored_dtype(weight_paths: Sequence[Path]) -> str:
    """The widest floating dtype of the tensors in safetensors files (their headers only).

    Raises:
        OSError, SidecarError: a file or its header cannot be read.
    """
    from mibspec.core.sidecars import read_safetensors_header

    stored = "float16"
    for path in weight_paths:
        for info in read_safetensors_header(path).values():
            if _FLOAT_BITS.get(info.dtype, 0) > _FLOAT_BITS[stored]:
                stored = info.dtype
    return stored


def dtype_narrowing(
    profile: Mapping[str, Any], track: str, names: Collection[str], dtype: str, stored: str
) -> str | None:
    """Why computing a model stored in ``stored`` in ``dtype`` is refused (M-6, R113), or ``None``.

    A 16-bit ``dtype`` on weights stored wider would compare the claims with the 16-bit
    tolerance of the profile's ``recompute`` table; only the dtype the profile evaluates the
    model in (``model_dtypes``, the model known by ``names``: architecture, hub id) is accepted.
    """
    from mibspec.core.profiles import model_dtype

    if _FLOAT_BITS.get(dtype, 32) >= min(_FLOAT_BITS[stored], 32):  # float32 and wider share a tolerance
        return None
    if model_dtype(profile, track, names) == dtype:
        return None
    return (
        f"the report declares dtype {dtype}, and the weights of {' / '.join(sorted(names))} are stored in "
        f"{stored}: computing in {dtype} would check the claims against the {dtype} tolerance, which profile "
        f"{profile.get('name')!r} does not accept for this model and track (model_dtypes); "
        f"declare dtype {stored}"
    )


def check_declared_dtype(
    ctx: RecomputeContext, declaration: dict[str, Any], dtype: str, weight_paths: Sequence[Path], pointer: str
) -> None:
    """R113 at ``pointer``/dtype when the declared dtype narrows the stored weights in a way
    the profile does not accept (:func:`dtype_narrowing`).

    Raises:
        ModelMismatchError: R113.
        UnusableInputError: a weight file's header cannot be read (R104).
    """
    from mibspec.core.sidecars import SidecarError

    try:
        stored = stored_dtype(weight_paths)
    except (OSError, SidecarError) as exc:
        raise UnusableInputError(pointer, f"a weight file's header cannot be read: {exc}") from exc
    names = {str(declaration[key]) for key in ("id", "path", "architecture") if declaration.get(key)}
    problem = dtype_narrowing(ctx.profile, str(ctx.data.get("track")), names, dtype, stored)
    if problem is not None:
        raise ModelMismatchError("R113", f"{pointer}/dtype", problem)


def check_memory(
    config: dict[str, Any], dtype: str, file_bytes: int, pointer: str, device: str = "cpu", kept: int = 0
) -> None:
    """Refuse, before anything is read, a model this machine's memory cannot load and run.

    Loading holds the weight and tokenizer files (``file_bytes``) in memory, and the weights
    are views of them (the engine's loader); when the files' size is not that of the
    parameters in ``dtype`` they are converted, and both are held at once. Running holds one
    batch's activations beside them, planned within the engine's share of the parameter
    bytes (:func:`~mibspec.reference_impl.engine.activation_share`, engine.md ME-9), and, in a
    group of reports, up to ``kept`` bytes of runs kept for the reports that follow; both in
    the machine's memory unless ``device`` is a CUDA device (whose own memory the batch size
    is planned and halved against). The need is compared with the memory available
    (``MemAvailable``): a model that would not fit is R104 naming its parts, instead of a
    process the kernel kills.

    Raises:
        UnusableInputError: at ``pointer``, the model needs more memory than is available.
    """
    from ..devices import free_memory
    from ..engine import activation_share, model_size

    parameters = model_size(config).parameters * _ITEMSIZE.get(dtype, 4)
    converted = abs(file_bytes - parameters) > parameters // 20  # not the same bytes: converted
    parts = [(file_bytes, "its files")]
    if converted:
        parts.append((parameters, f"its parameters in {dtype}"))
    if not device.startswith("cuda"):
        parts.append((activation_share(parameters), "a batch's activations"))
        if kept:
            parts.append(
                (
                    kept,
                    "the runs kept for the group's other reports "
                    "(MIBSPEC_ACTIVATION_CACHE_BYTES, 0 keeps none)",
                )
            )
    need = sum(size for size, _ in parts)
    available = free_memory("cpu")
    if need > available:
        held = ", ".join(f"{size} bytes for {what}" for size, what in parts)
        raise UnusableInputError(
            pointer,
            f"the model was not loaded: loading and running it needs about {need} bytes of memory ({held}), "
            f"and {available} bytes are available (MemAvailable): verify it on a machine with more "
            "free memory",
        )


#: Bytes per parameter of the dtypes a report may declare.
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def _config_vetter(dtype: str, max_bytes: int, pointer: str) -> Callable[[bytes], dict[str, Any]]:
    """A function reading a config's bytes and refusing a model over ``max_bytes`` in ``dtype``."""
    from ..engine import check_model_size, model_size, read_config

    def vet(data: bytes) -> dict[str, Any]:
        try:
            config = read_config(data, _CONFIG)
            check_model_size(model_size(config), dtype, max_bytes)
        except ValueError as exc:
            raise _size_error(pointer, exc) from exc
        return config

    return vet


@dataclass(frozen=True)
class _ModelFiles:
    """The files a model is built from, located and measured before any is read."""

    names: list[str]  # the weight files, then the tokenizer
    read: set[str]  # every file used, the config and index included
    extra: list[str]  # pinned but not used: checked all the same
    paths: dict[str, Path]
    sizes: dict[str, int]


def _model_files(
    ctx: RecomputeContext,
    reader: _Reader,
    source: ModelSource,
    declared: dict[str, str],
    pointer: str,
    config_size: int,
) -> _ModelFiles:
    """The weight files (from the index when the weights are sharded), the tokenizer and the
    pinned extras, located; R107 when they hold more than ``--max-model-bytes``."""
    max_bytes = ctx.limits.max_model_bytes
    if (Path(source.location) / _WEIGHTS).is_file() or not (Path(source.location) / _INDEX).is_file():
        weight_names, index = [_WEIGHTS], None
    else:
        index_path = reader.locate(_INDEX)
        index_size = index_path.stat().st_size
        if index_size > ctx.limits.max_bytes:
            raise UnusableInputError(pointer, f"{_INDEX} holds {index_size} bytes, over the document limit")
        index = bytes(reader.read(_INDEX, index_path, index_size))
        try:
            weight_map = json.loads(index)["weight_map"]
            weight_names = sorted({str(v) for v in weight_map.values()})
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UnusableInputError(pointer, f"{_INDEX} has no weight_map of file names") from exc
    if not (Path(source.location) / _TOKENIZER).is_file():
        raise UnusableInputError(pointer, f"the model folder {source.location} has no {_TOKENIZER}")
    names = [*weight_names, _TOKENIZER]
    read = {_CONFIG, *names, *([_INDEX] if index is not None else [])}
    extra = sorted(set(declared) - read)
    paths = {name: reader.locate(name) for name in [*names, *extra]}
    sizes = {name: path.stat().st_size for name, path in paths.items()}
    total = config_size + sum(sizes.values()) + (len(index) if index is not None else 0)
    if total > max_bytes:
        raise ModelTooLargeInputError(
            pointer,
            f"the model was not loaded: its files hold {total} bytes, over the limit of {max_bytes} bytes "
            "(--max-model-bytes)",
        )
    return _ModelFiles(names, read, extra, paths, sizes)


def _reused_model(session: RecomputeSession, model_key: Any, reader: _Reader, files: _ModelFiles) -> Any:
    """The ``(tokenizer, weights)`` the session built from files with the same digests, else
    ``None`` (the files hashed for the check then dropped from ``reader.used``)."""
    if not session.has_model(model_key):
        return None
    mark = len(reader.used)
    for name in files.names:
        reader.read(name, files.paths[name], files.sizes[name], keep=False)
    reused = session.model(model_key, tuple((f.name, f.sha256) for f in reader.used[mark:]))
    if reused is None:  # changed since: read and build anew
        del reader.used[mark:]
    return reused


def _build_model(
    ctx: RecomputeContext,
    progress: Any,
    source: ModelSource,
    config: dict[str, Any],
    blobs: dict[str, bytearray],
    dtype: str,
    pointer: str,
) -> Any:
    """The engine weights built from the bytes read, on the run's device."""
    from ..engine import load_model_from_bytes

    progress.start(f"loading {source.display}", 1)
    try:
        weights = load_model_from_bytes(
            config,
            blobs,
            dtype=dtype,
            source=source.location,
            revision=source.revision,
            device=ctx.device,
        )
    except Exception as exc:  # loading is the model's business; any failure is a finding
        raise UnusableInputError(pointer, f"cannot load {source.display}: {exc}") from exc
    progress.advance()
    return weights


def _opened(source: ModelSource, tokenizer: bytes, config: dict[str, Any]) -> ModelSource:
    """``source`` once opened: with the tokenizer bytes that were hashed and the config's start token."""
    return ModelSource(
        source.location,
        source.revision,
        True,
        source.root,
        tokenizer,
        config_start_token(config),
        source.hub_cache,
    )


def _files_used(
    ctx: RecomputeContext,
    used: list[ModelFile],
    read: set[str],
    declared: dict[str, str],
    source: ModelSource,
    pointer: str,
) -> Recomputation:
    """The model files used, for the receipt; R106 for those used but not pinned in
    ``model.files``, R111 (info) naming those whose digest the file-hash cache gave
    (``--trust-hash-cache``)."""
    findings = []
    unpinned = sorted(read - set(declared))
    if unpinned and (source.revision is None or declared):
        # a folder's files are pinned by their hashes only; a hub revision pins them unless
        # the report pins some files and not others
        findings.append(
            ctx.finding(
                "R106",
                f"{pointer}/files" if declared else pointer,
                model=source.display,
                files=", ".join(unpinned),
            )
        )
    cached = [f.name for f in used if f.cached]
    if cached:
        pinned = any(name in declared for name in cached)
        findings.append(
            ctx.finding(
                "R111",
                f"{pointer}/files" if pinned else pointer,
                model=source.display,
                files=", ".join(cached),
            )
        )
    return Recomputation(findings=findings, model_files=list(used))


def config_start_token(config: dict[str, Any]) -> int | None:
    """The start token a model's ``config.json`` declares: ``bos_token_id``, else
    ``eos_token_id`` (as TransformerLens falls back to the end token), else ``None``."""
    for key in ("bos_token_id", "eos_token_id"):
        value = config.get(key)
        if isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def load_referenced_document(
    ctx: RecomputeContext, artifact_id: str, pointer: str, kind: str
) -> tuple[dict[str, Any], Path]:
    """The JSON document behind an artifact of the report, and its folder.

    The earlier stages verified the document (A107 otherwise); it is parsed again with the
    same strict parser (``ctx.load_json``).
    """
    artifact = ctx.artifacts.get(artifact_id)
    if artifact is None or artifact_id in ctx.broken_artifacts:
        raise UnusableInputError(pointer, f"artifact {artifact_id!r} is not available")
    path = ctx.folder / artifact["path"]
    parsed = ctx.load_json(path)
    if not parsed.ok or not isinstance(parsed.data, dict) or parsed.data.get("kind") != kind:
        raise UnusableInputError(pointer, f"artifact {artifact_id!r} is not a readable {kind} document")
    return parsed.data, path.parent


def read_rows(
    document: dict[str, Any], folder: Path, pointer: str, limits: Limits = DEFAULT_LIMITS
) -> list[dict[str, Any]]:
    """The JSON Lines rows a counterfactual dataset document declares (``examples``), each
    parsed as strictly as a document."""
    entry = next((a for a in document.get("artifacts", []) if a["id"] == document["examples"]), None)
    if entry is None:
        raise UnusableInputError(pointer, f"the dataset declares no artifact {document['examples']!r}")
    try:
        with (folder / entry["path"]).open("rb") as handle:
            return [row for _, row in read_json_lines(handle, limits)]
    except JsonLinesError as exc:
        raise UnusableInputError(pointer, f"the dataset's rows are not strict JSON objects: {exc}") from exc


def encode_function(source: ModelSource, pointer: str = "/model") -> Any:
    """``encode(text) -> list[int]`` without special tokens, from the model's tokenizer.

    The ``tokenizer.json`` bytes an opened model carries, else a local folder's
    ``tokenizer.json``, are read with the tokenizers library (no code is run); otherwise
    transformers' ``AutoTokenizer`` with ``trust_remote_code=False``.
    """
    try:
        tokenizer = local_tokenizer(source)
        if tokenizer is not None:
            return lambda text: tokenizer.encode(text, add_special_tokens=False).ids
        from transformers import AutoTokenizer

        auto = AutoTokenizer.from_pretrained(
            source.location, revision=source.revision, trust_remote_code=False
        )
        return lambda text: list(auto(text, add_special_tokens=False)["input_ids"])
    except Exception as exc:  # any failure to read a tokenizer is a finding, not a crash
        raise UnusableInputError(pointer, f"cannot load the tokenizer of {source.display}: {exc}") from exc


def local_tokenizer(source: ModelSource) -> Any:
    """The tokenizers-library tokenizer of the bytes ``source`` carries or of its local
    ``tokenizer.json``; ``None`` when it has neither."""
    from tokenizers import Tokenizer

    if source.tokenizer is not None:
        return Tokenizer.from_str(source.tokenizer.decode("utf-8"))
    path = Path(source.location) / _TOKENIZER
    if source.local and path.is_file():
        return Tokenizer.from_file(str(path))
    return None


def check_tokens(model: Any, ids: Sequence[int], pointer: str, what: str, *, generated: int = 0) -> None:
    """The one check of tokenized input before any forward pass, for every track that
    tokenizes: each id inside the model's vocabulary, and the sequence, with ``generated``
    tokens fed back after it (greedy decoding), inside the model's context.

    A tokenizer that gives an id at or above the vocabulary size is not the model's (a
    pinned ``tokenizer.json`` of another model); a prompt longer than the context has
    positions the model has no embedding for.

    Raises:
        UnusableInputError: R104 at ``pointer``, naming ``what`` (a dataset row, a prompt).
    """
    vocab = int(model.vocab_size)
    outside = next((int(t) for t in ids if not 0 <= int(t) < vocab), None)
    if outside is not None:
        raise UnusableInputError(
            pointer,
            f"{what}: the tokenizer gives token id {outside}, outside the model's vocabulary of "
            f"{vocab} (ids 0 to {vocab - 1}); the tokenizer is not the model's",
        )
    context = getattr(model, "max_positions", None)
    if context is not None and len(ids) + generated > context:
        fed = f" and {generated} generated" if generated else ""
        raise UnusableInputError(
            pointer,
            f"{what}: {len(ids)} tokens{fed}, longer than the model's context of {context} positions",
        )


def batch_plan(
    ctx: RecomputeContext,
    declared: int,
    per_example: int | Callable[[], int],
    n_examples: int,
    out: Recomputation,
) -> tuple[int, bool]:
    """The batch size recomputation starts with, and whether it halves it on out-of-memory.

    ``ctx.batch_size``: ``None`` keeps the report's ``declared`` batch size, an
    integer replaces it, ``"auto"`` chooses from the device's free memory and the estimate
    ``per_example`` (bytes, or a function computing them, called only then; see
    :func:`~mibspec.reference_impl.devices.auto_batch_size`) and halves on out-of-memory.
    Batch sizes change recomputed values by reassociation inside matrix products at most
    (engine.md ME-10). A 16-bit model keeps its declared batch size, said by R114 in ``out``.
    """
    from ..devices import AUTO, plan_batch

    requested = ctx.batch_size
    dtype = (ctx.data.get("model") or {}).get("dtype", "float32")
    if dtype in _SIXTEEN_BITS and requested is not None and requested != declared:
        # In 16 bits a batch size changes values beyond the tolerance (ME-10): the declared one
        # is kept; "auto" still halves it, only when the device runs out of memory.
        pointer = "/settings/batch_size" if "batch_size" in (ctx.data.get("settings") or {}) else "/settings"
        detail = (
            f"the report's model computes in {dtype}, where the batch size changes recomputed values beyond "
            f"the tolerance, so its batch size {declared} was used, not --batch-size {requested}"
        )
        out.findings.append(ctx.finding("R114", pointer, detail=detail))
        return int(declared), requested == AUTO
    size = AUTO if requested == AUTO else requested if isinstance(requested, int) else None
    return plan_batch(size, ctx.device, declared, per_example, n_examples)
