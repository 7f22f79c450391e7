"""Output files of every command: never an input, checked before the work, written atomically.

A command that writes checks each output path before it starts (:func:`check_writable`:
the folder exists or can be made, and can be written) and refuses a path that is one of
its inputs (:class:`Inputs`: the same path, a symbolic link to it, or a hard link to it;
an input folder protects every file below it), and refuses a path that is a symbolic link
or passes through one unless the caller follows links on purpose (``follow_links``; the
commands' ``--follow-output-links``): a link planted in a scanned folder must not send an
output elsewhere. Files are written by :func:`write_atomic`: a temporary file beside the
destination, then ``os.replace``, so a failure leaves the old file, never half of a new one;
a link at the destination is replaced, not written through, unless links are followed.
Problems are :class:`OutputPathError`, a usage error.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "Inputs",
    "OutputPathError",
    "check_writable",
    "declared_files",
    "input_files",
    "link_on_path",
    "refuse_links",
    "write_atomic",
]


class OutputPathError(ValueError):
    """An output path that cannot or must not be written (a usage error, exit 2)."""


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a link loop, a name too long: compare as given
        return Path(os.path.abspath(path))


def _identity(path: Path) -> tuple[int, int] | None:
    """Device and inode of an existing file (links to one file share them), else ``None``."""
    try:
        stat = path.stat()
    except (OSError, ValueError):
        return None
    return stat.st_dev, stat.st_ino


class Inputs:
    """The files (and folders) a command reads; :meth:`refuse` keeps outputs off them."""

    def __init__(self, paths: Iterable[str | os.PathLike[str]] = (), *, what: str = "input") -> None:
        self.what = what
        self._files: set[Path] = set()
        self._identities: set[tuple[int, int]] = set()
        self._folders: list[Path] = []
        self._given: dict[Path, str] = {}
        for raw in paths:
            self.add(raw)

    def add(self, raw: str | os.PathLike[str]) -> None:
        path = Path(raw)
        resolved = _resolved(path)
        self._given.setdefault(resolved, str(raw))
        try:
            is_dir = path.is_dir()
        except OSError:
            is_dir = False
        if is_dir:
            self._folders.append(resolved)
            return
        self._files.add(resolved)
        identity = _identity(path)
        if identity is not None:
            self._identities.add(identity)

    def clash(self, output: str | os.PathLike[str]) -> str | None:
        """The input ``output`` would overwrite (as given), or ``None``."""
        resolved = _resolved(Path(output))
        if resolved in self._files:
            return self._given[resolved]
        identity = _identity(Path(output))
        if identity is not None and identity in self._identities:
            return next(
                (given for path, given in self._given.items() if _identity(path) == identity), str(output)
            )
        for folder in self._folders:
            if resolved == folder or folder in resolved.parents:
                return self._given[folder]
        return None

    def refuse(
        self, output: str | os.PathLike[str], option: str, *, hint: str = "choose another output path"
    ) -> None:
        """Raise :class:`OutputPathError` when ``output`` is (or links to) an input.

        Args:
            output: the path about to be written.
            option: how the user named it, for the message (``"-o"``, ``"--receipt"``).
            hint: what to do instead, for the message.
        """
        found = self.clash(output)
        if found is not None:
            raise OutputPathError(f"{option} {output} would overwrite the {self.what} {found}; {hint}")


def declared_files(document: Path, *, max_bytes: int | None = None) -> list[tuple[str, Path | None, Any]]:
    """(artifact id, file, declared ``bytes``) for each artifact entry of a document; the file
    is ``None`` when its path leaves the document's folder. A file that is not a readable JSON
    object (or is larger than ``max_bytes``) declares nothing."""
    try:
        if max_bytes is not None and document.stat().st_size > max_bytes:
            return []
        data = json.loads(document.read_bytes())
    except (OSError, ValueError, RecursionError):
        return []
    entries = data.get("artifacts") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return []
    folder = _resolved(document.parent)
    found: list[tuple[str, Path | None, Any]] = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            continue
        artifact_id = entry.get("id")
        target = _resolved(folder / entry["path"])
        inside = target == folder or folder in target.parents
        found.append(
            (
                str(artifact_id) if artifact_id is not None else "",
                target if inside else None,
                entry.get("bytes"),
            )
        )
    return found


def input_files(
    paths: Iterable[str | os.PathLike[str] | None], *, max_bytes: int = 64 * 1024 * 1024
) -> Inputs:
    """The inputs of a command given its path arguments: each file with the artifacts it
    declares (and theirs, once each), the ``<stem>.jsonl`` beside a ``<stem>.meta.json``
    dataset, and each folder with everything below it.

    Args:
        paths: the path arguments (``None`` entries are skipped).
        max_bytes: documents larger than this are not read for declared artifacts.
    """
    inputs = Inputs()
    pending = [Path(p) for p in paths if p is not None]
    seen: set[Path] = set()
    while pending:
        path = pending.pop()
        resolved = _resolved(path)
        if resolved in seen:
            continue
        seen.add(resolved)
        inputs.add(path)
        if path.name.endswith(".meta.json"):
            inputs.add(path.with_name(path.name[: -len(".meta.json")] + ".jsonl"))
        try:
            is_file = path.is_file()
        except OSError:
            is_file = False
        if is_file and path.suffix == ".json":
            pending.extend(target for _, target, _ in declared_files(path, max_bytes=max_bytes) if target)
    return inputs


def link_on_path(output: str | os.PathLike[str]) -> Path | None:
    """The first symbolic link among the folders ``output`` names and ``output`` itself, or
    ``None``.

    A relative path is checked from the current folder (which the system gives without
    links), an absolute one from the root. The components are checked as given, before any
    ``..`` is applied, so ``link/../x`` is found. Paths under ``/dev`` (``/dev/stdout``,
    ``/dev/fd/1``) are the system's and are not links a submission can plant.
    """
    given = Path(output)
    if _system(given):
        return None
    if given.is_absolute():
        current, parts = Path(given.anchor), given.parts[1:]
    else:
        current, parts = Path(os.getcwd()), given.parts
    for part in parts:
        current = current / part
        try:
            if current.is_symlink():
                return current
        except (OSError, ValueError):  # a name too long, a NUL: writing it fails and says so
            return None
    return None


def _system(path: Path) -> bool:
    """``path`` names a file under ``/dev`` (``/dev/stdout``, ``/dev/null``, ``/dev/fd/N``)."""
    return path.is_absolute() and path.parts[:2] == ("/", "dev")


def refuse_links(output: str | os.PathLike[str], option: str) -> None:
    """Raise :class:`OutputPathError` when ``output`` is, or passes through, a symbolic link."""
    link = link_on_path(output)
    if link is None:
        return
    try:
        target = os.readlink(link)
    except OSError:
        target = "?"
    where = "is" if link == Path(os.path.abspath(output)) else f"passes through {link}, which is"
    raise OutputPathError(
        f"{option} {output} {where} a symbolic link (to {target}); outputs are not written through "
        "links unless --follow-output-links is given"
    )


def check_writable(
    output: str | os.PathLike[str], option: str, *, folder: bool = False, follow_links: bool = False
) -> None:
    """Raise :class:`OutputPathError` unless ``output`` can be written: it is not a symbolic
    link and passes through none (unless ``follow_links``), each name fits the file system,
    the path is not a folder (a file when ``folder``), and the nearest existing folder above
    it is a folder this process may write into (missing folders are made when the output is
    written).

    Args:
        output: the file (or, with ``folder``, the folder) to be written.
        option: how the user named it, for the message.
        folder: ``output`` is a folder to write files into.
        follow_links: write through symbolic links on the path (the user asked for it).
    """
    if not follow_links:
        refuse_links(output, option)
    path = _written(Path(os.path.abspath(output)))
    try:
        if _special(path) and not folder:  # written in place: the file itself must take writes
            if not os.access(path, os.W_OK):
                raise OutputPathError(f"{option} {output}: cannot write to it (permission denied)")
            return
        if path.exists() and path.is_dir() != folder:
            what = "a folder" if path.is_dir() else "a file"
            raise OutputPathError(
                f"{option} {output}: is {what}; expected {'a folder' if folder else 'a file'}"
            )
        existing = path if folder and path.is_dir() else path.parent
        while not existing.exists():
            existing = existing.parent
    except OSError as exc:
        raise OutputPathError(f"{option} {output}: {exc.strerror or exc}") from exc
    if not existing.is_dir():
        raise OutputPathError(f"{option} {output}: {existing} is not a folder")
    limit = _name_max(existing)
    for part in path.relative_to(existing).parts:
        if len(os.fsencode(part)) > limit:
            raise OutputPathError(f"{option} {output}: {os.strerror(errno.ENAMETOOLONG)}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputPathError(
            f"{option} {output}: cannot write into the folder {existing} (permission denied)"
        )


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # not reported (or no pathconf): the common limit
        return 255


def _default_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(
    path: str | os.PathLike[str],
    data: bytes | str,
    *,
    mode_from: str | os.PathLike[str] | None = None,
    follow_links: bool = False,
) -> None:
    """Write ``data`` (text as UTF-8) to ``path``: a temporary file beside it, then ``os.replace``.

    Either the whole new file is in place or the old one is untouched. Missing folders
    are made. The file gets ``mode_from``'s permission bits, else those of the file it
    replaces, else the usual ones for a new file (0666 less the umask). A symbolic link at
    ``path`` is replaced by the file, its target untouched; with ``follow_links`` it is
    followed instead (the file it names is replaced, the link kept). A device, FIFO or socket
    (``/dev/stdout``, a pipe) is written in place, never replaced by a regular file.
    """
    given = Path(path)
    follow = follow_links or _system(given)
    destination = _written(given) if follow else given
    payload = data.encode("utf-8") if isinstance(data, str) else data
    if _special(destination) and (follow or not destination.is_symlink()):
        with destination.open("wb") as handle:
            handle.write(payload)
        return
    destination.parent.mkdir(parents=True, exist_ok=True)
    source = Path(mode_from) if mode_from is not None else destination
    try:
        mode = source.stat().st_mode & 0o7777
        if not follow and source.is_symlink():
            mode = _default_mode()  # a link's own bits say nothing about the file replacing it
    except OSError:
        mode = _default_mode()
    fd, temporary = tempfile.mkstemp(
        dir=destination.parent, prefix=f".{destination.name[:64]}.", suffix=".tmp"
    )
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, destination)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _written(path: Path) -> Path:
    """The path an atomic write to ``path`` replaces: the file a symbolic link names (links
    resolved), so that the link stays. A link to a device, FIFO or socket is kept as it is
    (``/dev/stdout`` names a descriptor, not a file to replace): it is written in place."""
    try:
        return path.resolve() if path.is_symlink() and not _special(path) else path
    except (OSError, RuntimeError):  # a loop of links: writing to it fails, and says so
        return path


def _special(path: Path) -> bool:
    """``path`` exists and is neither a regular file nor a folder (a device, FIFO or socket)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def check_outputs(
    files: Iterable[tuple[str | os.PathLike[str] | None, str]],
    inputs: Inputs,
    *,
    folders: Iterable[tuple[str | os.PathLike[str] | None, str]] = (),
    follow_links: bool = False,
) -> None:
    """Check a command's outputs before it starts: each can be written
    (:func:`check_writable`), none is (or links to) an input, no two are the same file.

    Args:
        files: ``(path, option)`` for each output file; ``None`` paths (not asked for) are skipped.
        inputs: what the command reads.
        folders: ``(path, option)`` for each output folder (checked as folders; the files
            written into it are checked with ``inputs.refuse`` as they are named).
        follow_links: outputs may be, or pass through, symbolic links.

    Raises:
        OutputPathError: the first output that cannot or must not be written.
    """
    taken = Inputs(what="output")
    for path, option in files:
        if path is None:
            continue
        inputs.refuse(path, option)  # first: a link to an input is refused even when links are followed
        check_writable(path, option, follow_links=follow_links)
        taken.refuse(path, option, hint="give each output its own path")
        taken.add(path)
    for path, option in folders:
        if path is not None:
            inputs.refuse(path, option)
            check_writable(path, option, folder=True, follow_links=follow_links)
