"""The one way importers and exporters read from a folder and write into one.

* Names. :func:`safe_name` is the name mibspec gives a file or folder it writes after names it
  read (a task, a model, a unit id), in both directions: letters, digits, ``_``, ``.`` and
  ``-`` only, never ``.`` or ``..``, never longer than :data:`MAX_NAME_CHARS`.
  :func:`name_problem` says why a name that must be kept as it is (a file name of a format
  that other code reads) cannot name a file in a folder.
* Reading. :class:`InputFolder` checks that every path read below a folder given stays in
  it once symbolic links are resolved (:class:`OutsideFolderError` otherwise), so that a link
  planted in a submission never makes mibspec read a file outside it.
* Writing. :class:`OutputPlan` collects every file to write before anything is written:
  each name is checked, two inputs that would be written under one name (compared as a
  case-insensitive file system compares them) are refused (:class:`NameClashError`), and
  :meth:`OutputPlan.write` refuses a file that is an input or that a link would put outside
  the output folder before it writes the first file. A caller that refuses an input simply
  never calls :meth:`~OutputPlan.write`: nothing is written.
"""

from __future__ import annotations

import filecmp
import hashlib
import os
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .outputs import Inputs, OutputPathError, write_atomic

__all__ = [
    "MAX_NAME_CHARS",
    "InputFolder",
    "NameClashError",
    "OutputPlan",
    "OutsideFolderError",
    "ReplaceError",
    "UnsafeNameError",
    "name_problem",
    "safe_name",
]

#: Longest name :func:`safe_name` gives (characters, all ASCII): well inside the 255 bytes of
#: common file systems, with room for the suffixes importers add (``_abs-False.pkl``).
MAX_NAME_CHARS = 120
#: Longest name (UTF-8 bytes) :func:`name_problem` accepts: the limit of common file systems.
MAX_NAME_BYTES = 255

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def safe_name(*parts: str) -> str:
    """The name of a file or folder written after ``parts`` (names read from an input).

    Each run of characters other than ASCII letters, digits, ``_``, ``.`` and ``-`` in a
    part becomes one ``-`` (so no name holds a separator); the parts are joined by ``_``;
    dashes at either end and dots at the end are dropped, and an empty result is ``-`` (so
    no name is ``.`` or ``..``). A name longer than :data:`MAX_NAME_CHARS` keeps its start
    and ends in ``-`` and 12 hex digits of the SHA-256 of the parts, so distinct long names
    stay distinct. Applying it to its own result changes nothing, so a name written by an
    export and read back by an import is the same name.

    >>> safe_name("ioi", "gpt2"), safe_name("../../escaped"), safe_name("a b/c", "/abs")
    ('ioi_gpt2', '..-..-escaped', 'a-b-c_-abs')
    >>> safe_name(".."), safe_name(safe_name("x" * 500)) == safe_name("x" * 500)
    ('-', True)
    """
    name = "_".join(_UNSAFE.sub("-", part) for part in parts).rstrip(".-").lstrip("-") or "-"
    if len(name) > MAX_NAME_CHARS:
        whole = "\x00".join(parts).encode("utf-8", "surrogatepass")
        name = f"{name[: MAX_NAME_CHARS - 13].rstrip('.-')}-{hashlib.sha256(whole).hexdigest()[:12]}"
    return name


def name_problem(name: str) -> str | None:
    """Why ``name``, kept as it is, cannot name one file in a folder; ``None`` when it can.

    >>> name_problem("ResidualStream(Layer:3,Token:last_token)_indices") is None
    True
    >>> name_problem("a/../b"), name_problem("..")
    ('holds a path separator', 'is . or ..')
    """
    if not isinstance(name, str) or not name:
        return "is empty"
    if name in (".", ".."):
        return "is . or .."
    if "/" in name or "\\" in name:
        return "holds a path separator"
    if _CONTROL.search(name):
        return "holds a control character"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid Unicode text"
    if size > MAX_NAME_BYTES:
        return f"is {size} bytes long, over the {MAX_NAME_BYTES} a file name may have"
    return None


def _resolved(path: Path) -> Path | None:
    """``path`` with every link resolved; ``None`` for a loop of links (nothing to read)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError):
        return None


def _inside(path: Path | None, root: Path | None) -> bool:
    return path is not None and root is not None and (path == root or root in path.parents)


class OutsideFolderError(ValueError):
    """A path to be read leaves the folder given once links are resolved."""

    def __init__(self, path: Path, root: Path) -> None:
        self.path, self.root = path, root
        try:
            shown = path.relative_to(root).as_posix()
        except ValueError:
            shown = str(path)
        self.shown = shown
        super().__init__(
            f"{shown} leads out of {root.name or root} (or into a loop) through a symbolic link; "
            "it is not read"
        )


class InputFolder:
    """A folder given to read from: :meth:`check` every path below it before reading it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._root = _resolved(root)

    def inside(self, path: Path) -> bool:
        """Whether ``path`` (links resolved) is the folder or lies below it."""
        return _inside(_resolved(path), self._root)

    def check(self, path: Path) -> Path:
        """``path``, once it is known to stay inside the folder.

        Raises:
            OutsideFolderError: a link (of ``path`` or of a folder above it) leads out.
        """
        if not self.inside(path):
            raise OutsideFolderError(path, self.root)
        return path

    def listing(self, folder: Path) -> list[Path]:
        """The entries of ``folder`` (checked to be inside), sorted by name.

        Raises:
            OutsideFolderError: ``folder`` leads out of the folder given.
            OSError: it cannot be listed.
        """
        return sorted(self.check(folder).iterdir())


class UnsafeNameError(ValueError):
    """A name to be written is not one plain file name (see :func:`name_problem`)."""


class NameClashError(ValueError):
    """Two inputs would be written under one name."""

    def __init__(self, name: str, first: str, second: str) -> None:
        self.name, self.first, self.second = name, first, second
        super().__init__(
            f"{first} and {second} would both be written as {name}; nothing was written "
            "(import or export them apart)"
        )


class ReplaceError(NameClashError):
    """A file to write would replace one already in the output folder that another input wrote."""

    def __init__(self, name: str, source: str, earlier: str | None = None) -> None:
        self.name, self.second = name, source
        self.first = earlier or "another input"
        ValueError.__init__(
            self,
            f"{source} would replace {name}, already in the output folder and written from "
            f"{self.first}; nothing was written (write into another folder, or remove it first)",
        )


@dataclass
class _Planned:
    path: Path
    source: str
    data: bytes | str | None  # None: a staged file, moved into place
    staged: Path | None
    mtime: float | None


def _key(part: str) -> str:
    # Two names a case-insensitive (or normalising) file system takes for one.
    return unicodedata.normalize("NFC", part).casefold()


class OutputPlan:
    """The files one import or export writes into ``out_dir``, collected before any is written.

    Names are owned: :meth:`claim` reserves a file or folder name for one input (``source``,
    named as the user would name it), and another input claiming it, or a file below it, is
    a clash; inputs share folders nobody claimed. A file is planned once.
    """

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self._files: dict[tuple[str, ...], _Planned] = {}
        self._folders: dict[tuple[str, ...], str] = {}  # folders of planned files → first source
        self._owners: dict[tuple[str, ...], str] = {}

    def _parts(self, relative: str) -> tuple[str, ...]:
        parts = relative.split("/")
        for part in parts:
            problem = name_problem(part)
            if problem is not None:
                raise UnsafeNameError(f"the name {relative!r} to write {problem}")
        return tuple(parts)

    def claim(self, relative: str, source: str) -> Path:
        """Reserve ``relative`` (a ``/``-separated path below the output folder: a file or a
        folder) for ``source``; the path.

        Raises:
            UnsafeNameError: a part of it is not one plain file name.
            NameClashError: another input owns that name or a folder above it.
        """
        parts = self._parts(relative)
        key = tuple(map(_key, parts))
        for cut in range(1, len(key) + 1):
            owner = self._owners.get(key[:cut])
            if owner is not None and owner != source:
                raise NameClashError("/".join(parts[:cut]), owner, source)
        self._owners.setdefault(key, source)
        return self.out_dir.joinpath(*parts)

    def _plan(self, relative: str, source: str, planned: _Planned) -> Path:
        path = self.claim(relative, source)
        key = tuple(map(_key, path.relative_to(self.out_dir).parts))
        if key in self._files or key in self._folders:
            first = self._files[key].source if key in self._files else self._folders[key]
            raise NameClashError(relative, first, source)
        for cut in range(1, len(key)):
            if key[:cut] in self._files:
                raise NameClashError(relative, self._files[key[:cut]].source, source)
        planned.path = path
        self._files[key] = planned
        for cut in range(1, len(key)):
            self._folders.setdefault(key[:cut], source)
        return path

    def add(self, relative: str, data: bytes | str, *, source: str, mtime: float | None = None) -> Path:
        """Plan ``data`` as ``relative`` for ``source``; the path it will be written at.

        Raises:
            UnsafeNameError, NameClashError: as :meth:`claim`; also when a file or folder is
                already planned at that path, or a file above it.
        """
        return self._plan(relative, source, _Planned(self.out_dir, source, data, None, mtime))

    def add_staged(self, relative: str, staged: Path, *, source: str) -> Path:
        """Plan the file ``staged`` (already written beside the output, under a temporary
        name) to be moved to ``relative``; :meth:`discard` removes it if nothing is written."""
        return self._plan(relative, source, _Planned(self.out_dir, source, None, staged, None))

    @property
    def paths(self) -> list[Path]:
        """Every planned file, in the order planned."""
        return [planned.path for planned in self._files.values()]

    def unchanged(self, path: Path) -> bool:
        """Whether the file at ``path`` already holds exactly what is planned there."""
        key = tuple(map(_key, path.relative_to(self.out_dir).parts))
        planned = self._files.get(key)
        if planned is None or path.is_symlink() or not path.is_file():
            return False
        try:
            if planned.staged is not None:
                return filecmp.cmp(planned.staged, path, shallow=False)
            data = planned.data.encode("utf-8") if isinstance(planned.data, str) else planned.data
            return path.stat().st_size == len(data or b"") and path.read_bytes() == data
        except OSError:
            return False

    def replaced(
        self,
        inputs: Inputs,
        same_input: Callable[[Path], bool] = lambda path: False,
        earlier: Callable[[Path], str | None] = lambda path: None,
        option: str = "output",
    ) -> list[ReplaceError]:
        """The planned files that would replace a different file already in the output folder
        which ``same_input`` (given that file's path) does not recognise as written from the
        same input: one error per folder below the output folder (or one for the folder
        itself), naming the input ``earlier`` says wrote it when it knows. A file that already
        holds what is planned is not replaced.

        Raises:
            OutputPathError: a planned file is one of ``inputs`` (checked first: that is a
                usage error, not a clash between inputs).
        """
        for planned in self._files.values():
            inputs.refuse(planned.path, option)
        found: dict[str, ReplaceError] = {}
        for planned in self._files.values():
            path = planned.path
            if not (path.exists() or path.is_symlink()) or self.unchanged(path) or same_input(path):
                continue
            relative = path.relative_to(self.out_dir).as_posix()
            key = relative.split("/")[0] if "/" in relative else ""
            found.setdefault(key, ReplaceError(relative, planned.source, earlier(path)))
        return list(found.values())

    def discard(self) -> None:
        """Remove the staged files: nothing of the plan is written."""
        for planned in self._files.values():
            if planned.staged is not None:
                planned.staged.unlink(missing_ok=True)
        self._files.clear()

    def write(self, inputs: Inputs, option: str = "output") -> list[Path]:
        """Write every planned file; the paths written.

        Checked first, for every file: it is not an input (``inputs``), and neither the file
        nor a folder above it is a link leading out of the output folder. Files are written
        atomically; a staged file is moved into place.

        Raises:
            OutputPathError: the first file that must not be written (then none is, and the
                staged files are removed).
        """
        root = _resolved(self.out_dir)
        try:
            for planned in self._files.values():
                inputs.refuse(planned.path, option)
                if not _inside(_resolved(planned.path), root):
                    raise OutputPathError(
                        f"{option} {planned.path}: a symbolic link there leads out of {self.out_dir}; "
                        "nothing was written"
                    )
        except OutputPathError:
            self.discard()
            raise
        written = []
        for planned in self._files.values():
            if planned.staged is not None:
                planned.path.parent.mkdir(parents=True, exist_ok=True)
                os.replace(planned.staged, planned.path)
            else:
                assert planned.data is not None
                write_atomic(planned.path, planned.data)
            if planned.mtime is not None:
                os.utime(planned.path, (planned.mtime, planned.mtime))
            written.append(planned.path)
        return written
