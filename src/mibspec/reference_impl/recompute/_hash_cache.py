"""A cache of model files' SHA-256 digests, so unchanged weights are not hashed again.

Used only when a run trusts the file system (``mibspec verify --trust-hash-cache``,
``mibspec.verify(trust_hash_cache=True)``): by default every digest a verdict rests on is
computed from the bytes read in that run, and this cache is neither read nor written.

An entry is keyed by the file's resolved path, size, device, inode, modification and change
times (nanoseconds). A digest is used only when all six still match the file as it is
opened, and only for a file whose last change came at least ``settle_ns`` before the digest
was computed: a file rewritten within the file system's timestamp granularity of being
hashed could otherwise keep its key (the "racy clean" case), so such an entry is re-hashed
next time. A change made through the ordinary calls — new bytes of the same size,
``touch``, replacement by rename, another volume mounted at the same path — changes the
key, and the file is hashed again.

What trusting the cache accepts: the file system is taken at its word that a file whose
key is unchanged holds the same bytes. Writes through a shared memory mapping need not
update the times (they are set when a page is first written, not at every write), times
can be set back, and a digest read from the cache says nothing of the bytes the model is
then built from. A run that uses a cached digest says so (R111).

The cache lives in ``$MIBSPEC_CACHE_DIR``, else ``$XDG_CACHE_HOME/mibspec``, else
``~/.cache/mibspec``, as ``file-hashes-v2.json``. It is written atomically (a temporary file
renamed over the old one), at most :data:`MAX_ENTRIES` entries, most recent kept. A cache
file that is unreadable, malformed, over :data:`MAX_CACHE_BYTES`, not owned by the user or
writable by others is ignored (and replaced on the next write); a malformed entry is dropped.
An entry is never trusted beyond its key: it can spare reading a file's bytes twice, never
vouch for a file it does not describe.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_CACHE_BYTES",
    "MAX_ENTRIES",
    "FileGrewError",
    "FileHashCache",
    "default_cache_dir",
    "file_key",
]

#: Most entries the cache keeps (the most recently used).
MAX_ENTRIES = 4096
#: Largest cache file read, in bytes (an entry is about 200 bytes).
MAX_CACHE_BYTES = 4 * 1024 * 1024
_FILE_NAME = "file-hashes-v2.json"
_VERSION = 2
_DIGEST = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20

Key = tuple[str, int, int, int, int, int]


class FileGrewError(Exception):
    """A file held more bytes than its size when it was opened (it changed while read)."""


def default_cache_dir() -> Path:
    """``$MIBSPEC_CACHE_DIR``, else ``$XDG_CACHE_HOME/mibspec``, else ``~/.cache/mibspec``."""
    explicit = os.environ.get("MIBSPEC_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "mibspec"


def file_key(path: str, st: os.stat_result) -> Key:
    """What identifies a file's state: resolved path, size, device, inode, mtime and ctime (ns)."""
    return (path, st.st_size, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


class ChunkReader:
    """The chunks of an open file, read into one buffer allocated once at the size the file is
    expected to have (with ``keep``), so that a file of n bytes is held in n bytes: never as a
    list of chunks and then their join, which held it twice. Iterating yields each chunk read
    (a view of the buffer, or the bytes read when not kept) and stops at the end of the file or
    once more than ``limit`` bytes were read (``total > limit`` then tells the caller the file
    grew)."""

    def __init__(self, handle: Any, limit: int, *, keep: bool, expected: int) -> None:
        self.handle, self.limit = handle, limit
        self.buffer = bytearray(min(expected, limit)) if keep else None
        self.total = 0

    def __iter__(self) -> Iterator[memoryview | bytes]:
        view = None if self.buffer is None else memoryview(self.buffer)
        while self.total <= self.limit:
            want = min(_CHUNK, self.limit + 1 - self.total)
            if view is not None and self.total < len(view):
                n = self.handle.readinto(view[self.total : self.total + min(want, len(view) - self.total)])
                chunk: memoryview | bytes = view[self.total : self.total + n]
            else:  # past the expected size (the file grew while it was read)
                chunk = self.handle.read(want)
                n = len(chunk)
                if self.buffer is not None and n:
                    # a new buffer (views of the old one may still be held): rare, and only
                    # for a file that grew yet stayed within the limit
                    view = None
                    self.buffer = self.buffer[: self.total] + chunk
            if not n:
                break
            self.total += n
            yield chunk

    def data(self) -> bytearray:
        """The bytes read (empty without ``keep``)."""
        if self.buffer is None:
            return bytearray()
        if len(self.buffer) > self.total:  # the file shrank while it was read
            del self.buffer[self.total :]
        return self.buffer


class FileHashCache:
    """Digests of files by :func:`file_key`; see the module docstring.

    Args:
        folder: where the cache file lives; ``None`` keeps the cache in memory only.
        settle_ns: how long before hashing a file must have last changed for its entry
            to be stored as trusted.
        clock: the wall clock in nanoseconds (the file system's time base).
    """

    def __init__(
        self,
        folder: Path | None,
        *,
        settle_ns: int = 1_000_000_000,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.folder, self.settle_ns, self.clock = folder, settle_ns, clock
        self.entries: OrderedDict[Key, str] = OrderedDict()
        self.hashed = 0  # files whose bytes were hashed (for tests and benchmarks)
        self.reused = 0  # files whose digest came from the cache
        self._dirty = False
        if folder is not None:
            self.entries.update(_load(folder / _FILE_NAME))

    def lookup(self, key: Key) -> str | None:
        digest = self.entries.get(key)
        if digest is not None:
            self.entries.move_to_end(key)
        return digest

    def store(self, key: Key, digest: str, started_ns: int) -> None:
        """Remember ``digest`` for ``key`` if the file had settled when hashing began."""
        if max(key[4], key[5]) + self.settle_ns > started_ns:
            return
        self.entries[key] = digest
        self.entries.move_to_end(key)
        while len(self.entries) > MAX_ENTRIES:
            self.entries.popitem(last=False)
        self._dirty = True

    def read(
        self, path: Path, limit: int, *, keep: bool = True, progress: Any = None
    ) -> tuple[str, int, bytearray, bool]:
        """The SHA-256, size and (with ``keep``) bytes of the file at ``path``, and whether the
        digest came from the cache.

        The digest comes from the cache when the file's key matches it both when the file
        is opened and after it was read; otherwise the bytes read are hashed. Without
        ``keep`` a cached file is not read at all.

        Raises:
            FileGrewError: the file holds more than ``limit`` bytes.
        """
        resolved = str(path)
        started = self.clock()
        with path.open("rb") as handle:
            before = file_key(resolved, os.fstat(handle.fileno()))
            cached = self.lookup(before) if before[1] <= limit else None
            if cached is not None and not keep:
                self.reused += 1
                if progress is not None:
                    progress.advance(before[1])
                return cached, before[1], bytearray(), True
            sha = hashlib.sha256() if cached is None else None
            reader = ChunkReader(handle, limit, keep=keep, expected=before[1])
            for chunk in reader:
                if sha is not None:
                    sha.update(chunk)
                if progress is not None:
                    progress.advance(len(chunk))
            if reader.total > limit:
                raise FileGrewError(resolved)
            total, data = reader.total, reader.data()
            after = file_key(resolved, os.fstat(handle.fileno()))
        unchanged = after == before and total == before[1]
        if cached is not None and unchanged:
            self.reused += 1
            return cached, total, data, True
        self.hashed += 1
        digest = sha.hexdigest() if sha is not None else hashlib.sha256(data).hexdigest()
        if unchanged:
            self.store(before, digest, started)
        return digest, total, data, False

    def save(self) -> None:
        """Write the entries (merged with what another process wrote meanwhile), atomically."""
        if self.folder is None or not self._dirty:
            return
        path = self.folder / _FILE_NAME
        merged = OrderedDict(_load(path))
        for key, digest in self.entries.items():
            merged.pop(key, None)
            merged[key] = digest
        while len(merged) > MAX_ENTRIES:
            merged.popitem(last=False)
        text = json.dumps(
            {"version": _VERSION, "entries": [[*key, digest] for key, digest in merged.items()]},
            separators=(",", ":"),
        )
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".file-hashes-", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            return  # a cache that cannot be written only costs time
        self._dirty = False


def _load(path: Path) -> list[tuple[Key, str]]:
    """The valid entries of a cache file; nothing when it is absent, foreign or malformed."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return []
    try:
        st = os.fstat(fd)
        if (
            not stat.S_ISREG(st.st_mode)
            or st.st_size > MAX_CACHE_BYTES
            or (hasattr(os, "getuid") and st.st_uid != os.getuid())
            or st.st_mode & 0o022
        ):
            return []
        with os.fdopen(fd, "rb", closefd=False) as handle:
            raw = handle.read(MAX_CACHE_BYTES + 1)
    except OSError:
        return []
    finally:
        os.close(fd)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return []
    if (
        not isinstance(data, dict)
        or data.get("version") != _VERSION
        or not isinstance(data.get("entries"), list)
    ):
        return []
    entries: list[tuple[Key, str]] = []
    for item in data["entries"][:MAX_ENTRIES]:
        if (
            isinstance(item, list)
            and len(item) == 7
            and isinstance(item[0], str)
            and all(type(x) is int and x >= 0 for x in item[1:6])
            and isinstance(item[6], str)
            and _DIGEST.fullmatch(item[6])
        ):
            entries.append(((item[0], item[1], item[2], item[3], item[4], item[5]), item[6]))
    return entries
